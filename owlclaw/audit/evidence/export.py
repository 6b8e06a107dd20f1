"""Writes an agent's streams as an evidence bundle: every event as stored, a manifest, a signature.

Each stream is exported whole from version 1, so its chain can be recomputed from the genesis
hash; the format is docs/evidence.md's and ``verify_bundle`` checks it.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any
from uuid import UUID

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from events import Ledger
from events.hashchain import Row
from events.streams import run_stream_id
from owlclaw.audit.evidence.keys import public_key_of
from owlclaw.audit.evidence.verify_bundle import FORMAT


class RunSelectionError(ValueError):
    """A run selection names no run of the agent, or is not ``N``, ``N..M`` or a run id."""


def select_runs(
    agent_id: str, run_count: int, ranges: Sequence[str], runs: Sequence[str]
) -> list[int]:
    """The run numbers ``--runs N..M`` and ``--run N|RUN_ID`` select, in run order; every run
    when neither is given."""
    if not ranges and not runs:
        return list(range(1, run_count + 1))
    by_id = {str(run_stream_id(agent_id, n)): n for n in range(1, run_count + 1)}
    chosen: set[int] = set()
    for text in ranges:
        first, dots, last = text.partition("..")
        if not (dots and first.isdigit() and last.isdigit()) or int(first) > int(last):
            raise RunSelectionError(f"--runs {text!r}: expected N..M with N <= M, e.g. 3..7")
        chosen.update(range(int(first), int(last) + 1))
    for text in runs:
        if text.isdigit():
            chosen.add(int(text))
        elif text.lower() in by_id:
            chosen.add(by_id[text.lower()])
        else:
            raise RunSelectionError(f"agent {agent_id} has no run {text!r}")
    missing = sorted(n for n in chosen if not 1 <= n <= run_count)
    if missing:
        raise RunSelectionError(
            f"agent {agent_id} has runs 1..{run_count}, not {', '.join(map(str, missing))}"
        )
    return sorted(chosen)


def export_bundle(
    ledger: Ledger, agent_id: str, run_numbers: Sequence[int], key: Ed25519PrivateKey
) -> Iterator[bytes]:
    """The bundle of the agent's stream and the given runs' streams, line by line."""
    agent = ledger.load_agent(agent_id)
    streams = [agent.id, *(run_stream_id(agent_id, n) for n in run_numbers)]
    return bundle_lines(
        ledger.chains.chain_rows(streams), agent_id, list(run_numbers), key, datetime.now(UTC)
    )


def bundle_lines(
    rows: Iterable[Row],
    agent_id: str,
    run_numbers: list[int],
    key: Ed25519PrivateKey,
    created_at: datetime,
) -> Iterator[bytes]:
    """Event lines for ``rows`` (stream by stream, each by version), then the manifest and its
    signature; each line ends with a newline."""
    digest = hashlib.sha256()
    heads: dict[UUID, dict[str, Any]] = {}
    count = 0
    for stream, version, topic, state, position, prev_hash, hash_ in rows:
        line = (
            msgspec.json.encode(
                {
                    "stream": str(stream),
                    "version": version,
                    "topic": topic,
                    "position": position,
                    **_state_field(state),
                    "prev_hash": prev_hash.hex(),
                    "hash": hash_.hex(),
                }
            )
            + b"\n"
        )
        digest.update(line)
        count += 1
        head = heads.setdefault(stream, {"stream": str(stream), "first_version": version})
        head |= {"last_version": version, "head_hash": hash_.hex()}
        yield line
    manifest = msgspec.json.encode(
        {
            "type": "manifest",
            "format": FORMAT,
            "agent": agent_id,
            "runs": run_numbers,
            "created_at": created_at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
            "streams": list(heads.values()),
            "event_lines": count,
            "events_sha256": digest.hexdigest(),
        },
        order="sorted",
    )
    public = public_key_of(key)
    signature = {
        "type": "signature",
        "algorithm": "Ed25519",
        "key_id": public.key_id,
        "signature": base64.b64encode(key.sign(manifest)).decode(),
    }
    yield manifest + b"\n"
    yield msgspec.json.encode(signature, order="sorted") + b"\n"


def _state_field(state: bytes) -> dict[str, str]:
    """The state as its UTF-8 text (what the ledger stores: JSON), or base64 of bytes that are
    not UTF-8, so that the verifier recomputes the hash over exactly the stored bytes."""
    try:
        return {"state": state.decode("utf-8")}
    except UnicodeDecodeError:
        return {"state_base64": base64.b64encode(state).decode()}
