"""The ledger's recorded format on the real database: a new ledger records the format this
OwlClaw writes, an older one is upgraded, and one a newer OwlClaw wrote is refused at start
(nothing of it replaced, the CLI saying what to do) and its newer events are never misread."""

from __future__ import annotations

from pathlib import Path

import msgspec
import psycopg
import pytest
from psycopg.types.json import Jsonb

from events import Ledger, LedgerReadError
from events.codec import NewerEventVersion
from events.ledger_format import LEDGER_FORMAT, LedgerTooNew, running_format
from events.recorder import OwlClawApplicationRecorder
from owlclaw.database import Database
from tests.apps import make_app
from tests.cli import owlclaw_on
from tests.sample_run import AGENT_ID, record_sample_run

pytestmark = pytest.mark.integration

FORMAT_TABLE = "ledger_events_format"
APPEND_ONE = "ledger_events_append_1"


def recorded(db: Database) -> tuple[int, dict[str, int], str]:
    with psycopg.connect(db.url) as conn:
        row = conn.execute(f"SELECT format, events, owlclaw FROM {FORMAT_TABLE}").fetchall()
    [(number, events, release)] = row
    return number, events, release


def written_by_a_newer_owlclaw(db: Database, **changes: object) -> None:
    """What a newer release leaves: its format row, and its own append function."""
    running = running_format()
    with psycopg.connect(db.url) as conn:
        conn.execute(
            f"UPDATE {FORMAT_TABLE} SET format = %s, events = %s, owlclaw = '9.0.0'",
            (
                changes.get("format", running.format),
                Jsonb({**running.events, **changes.get("events", {})}),  # type: ignore[dict-item]
            ),
        )
        conn.execute(f"COMMENT ON FUNCTION {APPEND_ONE} IS 'the newer release''s'")


def test_a_new_ledger_records_the_format_this_owlclaw_writes(
    ledger: Ledger, fresh_db: Database
) -> None:
    recorder = ledger.database.recorder
    assert isinstance(recorder, OwlClawApplicationRecorder)
    assert recorder.format_table_name == FORMAT_TABLE
    running = running_format()
    assert recorded(fresh_db) == (LEDGER_FORMAT, running.events, running.owlclaw)


def test_a_ledger_an_older_owlclaw_wrote_opens_and_records_this_format(
    fresh_db: Database,
) -> None:
    with Ledger(fresh_db.url) as ledger:
        record_sample_run(ledger)
    with psycopg.connect(fresh_db.url) as conn:
        conn.execute(
            f"UPDATE {FORMAT_TABLE} SET format = 0, events = %s, owlclaw = '0.0.1'",
            (Jsonb({"RunStarted": 1, "RunCompleted": 1}),),
        )
    with Ledger(fresh_db.url) as reopened:
        assert reopened.load_agent(AGENT_ID).state.run_count == 1
    assert recorded(fresh_db)[:2] == (LEDGER_FORMAT, running_format().events)


@pytest.mark.parametrize(
    ("changes", "cannot_read"),
    [
        ({"format": LEDGER_FORMAT + 1}, f"ledger format {LEDGER_FORMAT + 1} (this OwlClaw"),
        ({"events": {"RunForked": 1}}, "event type RunForked (unknown to this OwlClaw)"),
        ({"events": {"RunStarted": 2}}, "RunStarted version 2 (this OwlClaw reads up to 1)"),
    ],
)
def test_a_ledger_a_newer_owlclaw_wrote_is_refused_before_anything_is_replaced(
    fresh_db: Database, tmp_path: Path, changes: dict[str, object], cannot_read: str
) -> None:
    with Ledger(fresh_db.url) as ledger:
        record_sample_run(ledger)
    written_by_a_newer_owlclaw(fresh_db, **changes)
    with pytest.raises(LedgerTooNew) as refused:
        Ledger(fresh_db.url)
    message = str(refused.value)
    assert message.startswith("this ledger was written by OwlClaw 9.0.0 (ledger format")
    assert f"this OwlClaw {running_format().owlclaw} (ledger format {LEDGER_FORMAT})" in message
    assert cannot_read in message
    assert message.endswith("upgrade OwlClaw to 9.0.0 or later to open it")
    with psycopg.connect(fresh_db.url) as conn:
        [(comment,)] = conn.execute(f"SELECT obj_description('{APPEND_ONE}'::regproc)").fetchall()
    assert comment == "the newer release's"  # its append function was not replaced
    assert recorded(fresh_db)[2] == "9.0.0"

    for args in (("status",), ("ledger", AGENT_ID), ("verify",)):
        result = owlclaw_on(fresh_db, *args, cwd=tmp_path)
        assert result.returncode == 4, (args, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert lines[0].startswith("error: this ledger was written by OwlClaw 9.0.0"), args
        assert lines[-1].startswith("hint: pip install -U owlclaw") and "Traceback" not in (
            result.stderr
        )


def test_an_event_of_a_newer_class_version_is_refused_where_it_is_read(
    ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    """A newer OwlClaw writing while an older one still runs: the older one meets the event."""
    record_sample_run(ledger)
    agent = ledger.load_agent(AGENT_ID)
    [run_id] = agent.run_ids()
    events = ledger.stream(run_id)
    last = events[-1]
    state = msgspec.json.encode(last)
    with psycopg.connect(fresh_db.url) as conn:
        conn.execute(
            "SELECT ledger_events_append_1(%s, %s, %s, %s)",
            (run_id, last.originator_version + 1, "RunWarning@2", state),
        )
    with pytest.raises(LedgerReadError) as refused:
        ledger.stream(run_id)
    assert isinstance(refused.value.cause, NewerEventVersion)
    result = owlclaw_on(fresh_db, "ledger", AGENT_ID, cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    assert result.stderr.startswith(f"error: event RunWarning@2 in stream {run_id} version")
    assert "reads RunWarning up to version 1; upgrade OwlClaw" in result.stderr


def test_owlclaw_run_refuses_to_start_on_a_ledger_a_newer_owlclaw_wrote(
    fresh_db: Database, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url):
        pass
    written_by_a_newer_owlclaw(fresh_db, format=LEDGER_FORMAT + 1)
    app = make_app(tmp_path / "app", config='[agent]\nid = "refused"\nmodels = ["scripted/x"]\n')
    result = owlclaw_on(fresh_db, "run", str(app), cwd=tmp_path)
    assert result.returncode == 4, result.stderr
    assert "error: this ledger was written by OwlClaw 9.0.0" in result.stderr
    assert "Traceback" not in result.stderr and "serving" not in result.stdout
