"""The golden ledger's file: a ledger written by one OwlClaw release, as JSON lines of its stored
rows, that every later release must load, verify, replay and project (test_golden_ledger).

``tests/data/golden-ledger/`` holds ``ledger.jsonl`` and ``app/``, the agent app that wrote it
(its capabilities, governance and scripts: what a replay re-executes against). The first line of
``ledger.jsonl`` is the ledger format its writer recorded (``events.ledger_format``); each
further line is one stored event: its log position (``id``), the commit it was written in
(numbered in commit order), its stream and version, its topic, its state (the stored JSON text,
byte for byte) and the hashes the append function chained it with. ``scripts/make-golden-ledger.py``
writes it; never rewrite it once committed: a changed event class gets an upcaster instead.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import groupby
from pathlib import Path
from typing import Any
from uuid import UUID

import psycopg
from psycopg.sql import SQL, Identifier
from psycopg.types.json import Jsonb

from events import Ledger
from events.recorder import OwlClawApplicationRecorder

GOLDEN = Path(__file__).parent / "data" / "golden-ledger"
LEDGER_FILE = GOLDEN / "ledger.jsonl"
APP = GOLDEN / "app"
RECORDED_APP = Path("/tmp/owlclaw-golden-ledger/app")
"""Where the golden ledger says ``APP`` was served from (its sub-agent's app is under it)."""


def _recorder(ledger: Ledger) -> OwlClawApplicationRecorder:
    recorder = ledger.database.recorder
    assert isinstance(recorder, OwlClawApplicationRecorder)
    return recorder


def dump(url: str) -> Iterator[str]:
    """The ledger at ``url`` as the lines of ``ledger.jsonl``."""
    with Ledger(url) as ledger:
        recorder = _recorder(ledger)
        recorded = recorder.recorded_format()
        assert recorded is not None
        yield json.dumps(
            {"format": recorded.format, "owlclaw": recorded.owlclaw, "events": recorded.events},
            sort_keys=True,
        )
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                SQL(
                    "SELECT notification_id, dense_rank() OVER (ORDER BY transaction_id),"
                    " originator_id, originator_version, topic, state, prev_hash, hash"
                    " FROM {} ORDER BY notification_id"
                ).format(Identifier(recorder.events_table_name))
            ).fetchall()
    for position, commit, stream, version, topic, state, prev_hash, row_hash in rows:
        yield json.dumps(
            {
                "id": position,
                "commit": commit,
                "stream": str(stream),
                "version": version,
                "topic": topic,
                "state": bytes(state).decode("utf-8"),
                "prev_hash": bytes(prev_hash).hex(),
                "hash": bytes(row_hash).hex(),
            },
            ensure_ascii=False,
        )


def load(url: str, path: Path = LEDGER_FILE) -> int:
    """Store the rows of ``path`` in the (empty) ledger database at ``url`` as their writer
    left them: each commit in a transaction of its own, in commit order, and the format it
    recorded; today's code made the tables. How many events were loaded."""
    header, *lines = path.read_text(encoding="utf-8").splitlines()
    written: dict[str, Any] = json.loads(header)
    rows = [json.loads(line) for line in lines]
    with Ledger(url) as ledger:
        recorder = _recorder(ledger)
        table = Identifier(recorder.events_table_name)
        sequence = recorder.sequence_name
        format_table = Identifier(recorder.format_table_name)
    insert = SQL(
        "INSERT INTO {} (notification_id, originator_id, originator_version, topic, state,"
        " transaction_id, prev_hash, hash) VALUES (%s, %s, %s, %s, %s, pg_current_xact_id(),"
        " %s, %s)"
    ).format(table)
    with psycopg.connect(url, autocommit=True) as conn:
        for _, commit in groupby(rows, key=lambda r: r["commit"]):
            with conn.transaction(), conn.cursor() as curs:
                curs.executemany(
                    insert,
                    [
                        (
                            r["id"],
                            UUID(r["stream"]),
                            r["version"],
                            r["topic"],
                            r["state"].encode("utf-8"),
                            bytes.fromhex(r["prev_hash"]),
                            bytes.fromhex(r["hash"]),
                        )
                        for r in commit
                    ],
                )
        conn.execute("SELECT setval(%s, %s)", (sequence, max(r["id"] for r in rows)))
        conn.execute(
            SQL("UPDATE {} SET format = %s, events = %s, owlclaw = %s").format(format_table),
            (written["format"], Jsonb(written["events"]), written["owlclaw"]),
        )
    return len(rows)
