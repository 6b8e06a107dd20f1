"""An archive file against its ArchiveSealed: whatever runs it holds, the file as written checks
out, and any one changed byte, dropped event or swapped pair is found, named at its event; the
file round-trips byte for byte and writes the same bytes twice."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from events import catalog as ev
from events.archive_file import ArchiveUnreadable, Header, file_sha256, read_archive, write_archive
from events.archive_seal import archived_runs, check_archive, merkle_root
from events.hashchain import GENESIS_HASH, Row, row_hash

AGENT = uuid.uuid4()


def chain(stream: uuid.UUID, states: list[bytes], start: int) -> list[Row]:
    rows: list[Row] = []
    previous = GENESIS_HASH
    for version, state in enumerate(states, 1):
        current = row_hash(previous, stream, version, "LLMResponded", state)
        rows.append((stream, version, "LLMResponded", state, start + version, previous, current))
        previous = current
    return rows


runs_of_states = st.lists(
    st.lists(st.binary(min_size=1, max_size=40), min_size=2, max_size=6), min_size=1, max_size=4
)


def archive(states: list[list[bytes]]) -> tuple[list[Row], ev.ArchiveSealed, dict[uuid.UUID, int]]:
    streams = [uuid.uuid5(AGENT, f"run/{n}") for n in range(1, len(states) + 1)]
    rows = [r for n, s in enumerate(states) for r in chain(streams[n], s, 100 * n)]
    run_nos = {s: n for n, s in enumerate(streams, 1)}
    runs = archived_runs(rows, run_nos)
    seal = ev.ArchiveSealed(
        originator_id=AGENT,
        originator_version=9,
        timestamp=datetime.now(UTC),
        file="a/2026-01.1.jsonl.gz",
        sha256="digest",
        period="2026-01",
        runs=runs,
        root=merkle_root(runs),
        first_position=rows[0][4],
        last_position=rows[-1][4],
    )
    return rows, seal, run_nos


def check(seal: ev.ArchiveSealed, rows: list[Row]) -> tuple[list[str], list[tuple[int, int]]]:
    found = check_archive(seal, "by", "digest", rows, {})
    return [p.reason for p in found.problems], [
        (b.position, b.version) for b in found.chains.breaks
    ]


@given(runs_of_states)
def test_a_file_as_written_matches_its_seal(states: list[list[bytes]]) -> None:
    rows, seal, _ = archive(states)
    assert check(seal, rows) == ([], [])
    assert [r.version for r in seal.runs] == [len(s) for s in states]


@given(runs_of_states, st.data())
def test_a_changed_byte_is_named_at_its_event(
    states: list[list[bytes]], data: st.DataObject
) -> None:
    rows, seal, _ = archive(states)
    i = data.draw(st.integers(0, len(rows) - 1))
    stream, version, topic, state, position, prev, hash_ = rows[i]
    at = data.draw(st.integers(0, len(state) - 1))
    changed = state[:at] + bytes([state[at] ^ 0x40]) + state[at + 1 :]
    rows[i] = (stream, version, topic, changed, position, prev, hash_)
    _, breaks = check(seal, rows)
    assert breaks == [(position, version)]


@given(runs_of_states, st.data())
def test_a_dropped_event_is_found(states: list[list[bytes]], data: st.DataObject) -> None:
    rows, seal, _ = archive(states)
    i = data.draw(st.integers(0, len(rows) - 1))
    dropped = rows.pop(i)
    problems, breaks = check(seal, rows)
    last_of_its_run = i == len(rows) or rows[i][0] != dropped[0]
    if last_of_its_run:
        assert any("events were dropped or added" in p for p in problems)
    else:
        assert breaks == [(rows[i][4], dropped[1] + 1)]


@given(runs_of_states, st.data())
def test_a_swapped_pair_is_named_at_the_first_event_out_of_place(
    states: list[list[bytes]], data: st.DataObject
) -> None:
    rows, seal, _ = archive(states)
    i = data.draw(st.integers(0, len(rows) - 2).filter(lambda k: rows[k][0] == rows[k + 1][0]))
    rows[i], rows[i + 1] = rows[i + 1], rows[i]
    _, breaks = check(seal, rows)
    assert breaks == [(rows[i][4], rows[i][1])]


def test_a_run_left_out_or_added_and_an_edited_root_are_named() -> None:
    rows, seal, _ = archive([[b"a", b"b"], [b"c", b"d"]])
    run_2 = seal.runs[1]
    problems, _ = check(seal, [r for r in rows if r[0] != run_2.run_id])
    assert problems == [f"run 2 (stream {run_2.run_id}) is not in the file"]
    extra = chain(uuid.uuid4(), [b"x"], 500)
    problems, _ = check(seal, rows + extra)
    assert problems == [f"stream {extra[0][0]} is in the file but not among its sealed runs"]
    edited = msgspec.structs.replace(seal, root="00")
    assert check(edited, rows)[0] == ["the sealed runs do not make the sealed root 00"]


def test_the_merkle_root_depends_on_every_run_and_its_order() -> None:
    _, seal, _ = archive([[b"a"], [b"b"], [b"c"]])
    runs = seal.runs
    assert merkle_root(runs) != merkle_root(runs[::-1])
    assert merkle_root(runs) != merkle_root(runs[:2])
    assert len({merkle_root(runs[:n]) for n in range(4)}) == 4


def test_a_file_round_trips_and_the_same_rows_make_the_same_bytes(tmp_path: Path) -> None:
    rows, _, _ = archive([[b'{"a": 1}', b"\x00\xff ciphertext"], [b"c", b"d"]])
    header = Header(owlclaw_archive=1, agent_id="a", period="2026-01")
    first = write_archive(tmp_path / "a" / "one.jsonl.gz", header, rows)
    second = write_archive(tmp_path / "b" / "one.jsonl.gz", header, rows)
    assert first == second == file_sha256(tmp_path / "a" / "one.jsonl.gz")
    assert read_archive(tmp_path / "a" / "one.jsonl.gz") == (header, rows)
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["one.jsonl.gz"]


def test_a_missing_or_garbled_file_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ArchiveUnreadable, match="missing"):
        read_archive(tmp_path / "gone.jsonl.gz")
    garbled = tmp_path / "garbled.jsonl.gz"
    garbled.write_bytes(b"not gzip")
    with pytest.raises(ArchiveUnreadable, match=r"garbled\.jsonl\.gz cannot be read"):
        read_archive(garbled)
