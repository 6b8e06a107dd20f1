"""Archiving on the real ledger: `owlclaw archive` moves ended runs into a sealed file and out of
the table; reads, `replay --verify`, `ledger`, `explain` and `verify` find them there; verify
names a changed byte, a dropped event, a swapped pair and a deleted file; an archiving
interrupted before its seal or before its delete is finished by the next one, nothing lost or
doubled; runs a view has not absorbed yet are held back for the next archiving; an archived run
erased later reads erased from its unchanged, still verifying file."""

from __future__ import annotations

import asyncio
import base64
import gzip
import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from events import Ledger
from events import catalog as ev
from events.recorder import OwlClawApplicationRecorder
from events.streams import agent_stream_id, run_stream_id
from owlclaw.audit.chains import verify_agent
from owlclaw.cli import app as cli
from owlclaw.compose.read import open_views
from owlclaw.config import load_config
from owlclaw.database import Database
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.server.duties import archive_retention
from projections import VIEWS, ProjectionRunner
from projections.absorbed import absorbed
from tests.audited_run import record
from tests.ledger_runs import record_runs, tomorrow
from tests.scripted import play

pytestmark = pytest.mark.integration

AGENT = "audited"


class Crash(BaseException):
    """The process dies between two steps: nothing of the archiving handles it."""


@pytest.fixture
def archived_env(fresh_db: Database, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The CLI on the test's database, its archive directory under ``tmp_path``."""
    monkeypatch.setenv("OWLCLAW_DATABASE_URL", fresh_db.url)
    monkeypatch.setenv("OWLCLAW_DATABASE_NAME", str(fresh_db.params["dbname"]))
    monkeypatch.setenv("OWLCLAW_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("OWLCLAW_ARCHIVE_DIR", str(tmp_path / "archive"))
    return tmp_path / "archive"


def views_catch_up(ledger: Ledger, but: str = "") -> None:
    """Every registered view (``but`` one) absorbs the log so far: archiving moves only what
    all of them have."""
    for view in open_views(ledger, load_config()):
        if view.name != but:
            ProjectionRunner(ledger, view).catch_up()


def absorbed_now(ledger: Ledger) -> int:
    return absorbed(ledger, VIEWS).position


@pytest.fixture
def ledger(fresh_db: Database, archived_env: Path) -> Iterator[Ledger]:
    """A ledger with AGENT's three ended runs (a tool-calling one, two appended straight), which
    the views have absorbed."""
    with Ledger(fresh_db.url, archive_dir=archived_env) as led:
        record(led)
        record_runs(led, led.load_agent(AGENT), 2)
        views_catch_up(led)
        yield led


def rows_of(db: Database, run_ids: list[object]) -> int:
    with psycopg.connect(db.url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM ledger_events WHERE originator_id = ANY(%s)", (run_ids,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def seals(ledger: Ledger) -> list[ev.ArchiveSealed]:
    own = ledger.stream(agent_stream_id(AGENT))
    return [e for e in own if isinstance(e, ev.ArchiveSealed)]


def test_archived_runs_leave_the_table_and_read_as_before(
    ledger: Ledger, fresh_db: Database, archived_env: Path
) -> None:
    runs = ledger.list_runs(AGENT)
    before = {r: ledger.stream(r) for r in runs}
    history = [(h.position, h.event) for h in ledger.agent_history(AGENT)]
    stored = list(ledger.chains.chain_rows(runs))
    runner = CliRunner()

    done = runner.invoke(cli, ["archive", "--before", tomorrow(), "--json"])

    assert done.exit_code == 0, done.output
    [agent] = json.loads(done.stdout)["agents"]
    period = datetime.now(UTC).strftime("%Y-%m")
    assert agent["files"] == [f"{AGENT}/{period}.1.jsonl.gz"] and agent["runs"] == 3
    assert rows_of(fresh_db, runs) == 0
    [seal] = seals(ledger)
    assert [r.run_no for r in seal.runs] == [1, 2, 3]
    assert (archived_env / seal.file).is_file()
    assert {r: ledger.stream(r) for r in runs} == before  # read from the archive
    now = [(h.position, h.event) for h in ledger.agent_history(AGENT)]
    assert now == [*history, (now[-1][0], seal)]  # the archived runs in place, then the seal
    assert list(ledger.chains.chain_rows(runs)) == stored  # what export and `why` read
    assert ledger.load_run(runs[0]).state.ended
    assert ledger.resumable.unstarted_runs(ledger.load_agent(AGENT)) == []

    verified = runner.invoke(cli, ["verify"])
    assert verified.exit_code == 0, verified.output
    assert "1 archive files (3 runs) match their ArchiveSealed" in verified.stdout
    replayed = runner.invoke(cli, ["replay", AGENT, "1", "--verify", "--json"])
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout)["verify"]["matched"] is True
    listed = runner.invoke(cli, ["ledger", AGENT, "--json", "--all"])
    assert len(json.loads(listed.stdout)["events"]) == len(history) + 1
    assert runner.invoke(cli, ["explain", AGENT, "1"]).exit_code == 0

    assert runner.invoke(cli, ["archive", "--before", "soon"]).exit_code == 2
    unknown = runner.invoke(cli, ["archive", "--before", tomorrow(), "--agent", "nobody"])
    assert unknown.exit_code == 3, unknown.output
    again = runner.invoke(cli, ["archive", "--before", tomorrow(), "--json"])
    assert json.loads(again.stdout)["agents"][0]["runs"] == 0 and len(seals(ledger)) == 1


def test_the_agent_runs_on_after_its_runs_are_archived(ledger: Ledger) -> None:
    ledger.archive.archive_agent(AGENT, datetime.now(UTC) + timedelta(days=1), absorbed_now(ledger))
    runtime = AgentRuntime(ledger, AGENT, models=["scripted/none"])
    try:
        assert play(runtime, [{"content": "still here"}]).status == "completed"
    finally:
        runtime.close()
    assert ledger.load_agent(AGENT).state.run_count == 4
    report = verify_agent(ledger, AGENT)
    assert report.ok and report.archived_runs == 3
    assert report.sealed_runs == 2  # runs 1 and 4 ran in a runtime, which seals them


def rewrite_file(path: Path, change: Callable[[list[bytes]], None]) -> bytes:
    """Apply ``change`` to the file's lines (header first) and write it back; the old bytes."""
    old = path.read_bytes()
    lines = gzip.decompress(old).splitlines(keepends=True)
    change(lines)
    path.write_bytes(gzip.compress(b"".join(lines)))
    return old


def test_verify_names_what_was_done_to_an_archive(ledger: Ledger, archived_env: Path) -> None:
    ledger.archive.archive_agent(AGENT, datetime.now(UTC) + timedelta(days=1), absorbed_now(ledger))
    [seal] = seals(ledger)
    path = archived_env / seal.file
    run_1 = run_stream_id(AGENT, 1)
    clean = verify_agent(ledger, AGENT)
    assert clean.ok and clean.mismatches == [] and clean.archived_runs == 3

    def changed_byte(lines: list[bytes]) -> None:
        row = json.loads(lines[3])  # run 1, version 3
        state = bytearray(base64.b64decode(row[3]))
        state[-2] ^= 0x01
        row[3] = base64.b64encode(bytes(state)).decode()
        lines[3] = json.dumps(row).encode() + b"\n"

    def dropped(lines: list[bytes]) -> None:
        del lines[3]

    def swapped(lines: list[bytes]) -> None:
        lines[3], lines[4] = lines[4], lines[3]

    for change, version in ((changed_byte, 3), (dropped, 4), (swapped, 4)):
        old = rewrite_file(path, change)
        report = verify_agent(ledger, AGENT)
        path.write_bytes(old)
        assert not report.ok
        [broken] = report.breaks
        assert (broken.stream, broken.version) == (run_1, version), change
        assert f"in archive {seal.file} (agent {AGENT} run 1)" in broken.reason
        assert any("its bytes changed" in p.reason for p in report.archive_problems)

    path.unlink()
    gone = verify_agent(ledger, AGENT)
    [problem] = gone.archive_problems
    assert problem.file == seal.file and "is missing" in problem.reason
    assert "run(s) 1, 2, 3" in problem.reason
    assert gone.mismatches == []  # the runs are accounted for, by the problem above


def test_an_interrupted_archiving_is_finished_by_the_next(
    ledger: Ledger, fresh_db: Database, archived_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = ledger.list_runs(AGENT)
    events = rows_of(fresh_db, runs)
    before = datetime.now(UTC) + timedelta(days=1)
    archive = ledger.archive

    def crash(*_: object) -> None:
        raise Crash

    with monkeypatch.context() as m:  # dies after writing the file, before sealing it
        m.setattr(archive, "_commit", crash)
        with pytest.raises(Crash):
            archive.archive_agent(AGENT, before, absorbed_now(ledger))
    assert seals(ledger) == [] and rows_of(fresh_db, runs) == events
    assert len(list(archived_env.rglob("*.jsonl.gz"))) == 1

    with monkeypatch.context() as m:  # dies after sealing, before deleting
        m.setattr(OwlClawApplicationRecorder, "delete_streams", crash)
        with pytest.raises(Crash):
            archive.archive_agent(AGENT, before, absorbed_now(ledger))
    [seal] = seals(ledger)
    assert rows_of(fresh_db, runs) == events
    assert verify_agent(ledger, AGENT).ok  # rows in both places: both check out

    done = archive.archive_agent(AGENT, before, absorbed_now(ledger))

    assert (done.finished, done.runs, done.files) == (3, 0, [])
    assert seals(ledger) == [seal] and rows_of(fresh_db, runs) == 0
    assert list(archived_env.rglob("*.jsonl.gz")) == [archived_env / seal.file]
    assert sum(r.version for r in seal.runs) == events
    report = verify_agent(ledger, AGENT)
    assert report.ok and report.events >= events


def test_owlclaw_run_s_retention_archives_its_agents_runs(ledger: Ledger) -> None:
    stop = asyncio.Event()
    stop.set()  # one pass, then it stops
    later = datetime.now(UTC) + timedelta(days=1)

    asyncio.run(archive_retention(ledger, [AGENT], lambda: later, stop))

    [seal] = seals(ledger)
    assert [r.run_no for r in seal.runs] == [1, 2, 3]
    assert verify_agent(ledger, AGENT).ok


def test_an_archive_directory_that_cannot_be_written_is_refused_and_nothing_moves(
    ledger: Ledger, fresh_db: Database, tmp_path: Path
) -> None:
    (tmp_path / "blocked").write_text("")  # a file where the directory must go
    runs = ledger.list_runs(AGENT)
    events = rows_of(fresh_db, runs)
    where = str(tmp_path / "blocked" / "archive")

    refused = CliRunner().invoke(cli, ["archive", "--before", tomorrow(), "--dir", where])

    assert refused.exit_code == 2
    assert f"cannot write the archive of {AGENT} under {where}" in refused.stderr
    assert seals(ledger) == [] and rows_of(fresh_db, runs) == events


def test_runs_a_view_has_not_absorbed_are_held_back_until_it_has(
    ledger: Ledger, fresh_db: Database
) -> None:
    record_runs(ledger, ledger.load_agent(AGENT), 2)  # runs 4 and 5: after the views' position
    views_catch_up(ledger, but="memory")
    behind = absorbed(ledger, VIEWS)
    assert behind.view == "memory" and behind.position < ledger.log.last_committed()
    runner = CliRunner()

    held = runner.invoke(cli, ["archive", "--before", tomorrow()])

    assert held.exit_code == 0, held.output
    assert (
        f"held back 2 run(s): they have events after log position {behind.position}, which "
        "the memory view has not absorbed yet" in " ".join(held.stdout.split())
    )
    [seal] = seals(ledger)
    assert [r.run_no for r in seal.runs] == [1, 2, 3]
    later = [run_stream_id(AGENT, 4), run_stream_id(AGENT, 5)]
    assert rows_of(fresh_db, later) == 2 * 8  # still in the table

    views_catch_up(ledger)
    moved = runner.invoke(cli, ["archive", "--before", tomorrow(), "--json"])

    [agent] = json.loads(moved.stdout)["agents"]
    assert (agent["runs"], agent["held"]) == (2, 0) and rows_of(fresh_db, later) == 0
    assert [r.run_no for r in seals(ledger)[1].runs] == [4, 5]
    assert verify_agent(ledger, AGENT).ok


def test_an_archived_run_erased_later_is_erased_in_its_archive_file_too(
    ledger: Ledger, fresh_db: Database, archived_env: Path
) -> None:
    """The file holds the rows as stored, so sealed content stays sealed there: destroying the
    run's key erases it in the archive as in the table, and the archive still verifies."""
    [run, *_] = ledger.list_runs(AGENT)
    runner = CliRunner()
    assert runner.invoke(cli, ["archive", "--before", tomorrow()]).exit_code == 0
    [seal] = seals(ledger)
    archived = gzip.decompress((archived_env / seal.file).read_bytes())
    assert b"look for entries" not in archived  # the focus is sealed in the file
    started = next(e for e in ledger.stream(run) if isinstance(e, ev.RunStarted))
    assert started.focus == "look for entries"  # read from the archive, opened

    erased = runner.invoke(cli, ["erase", "--run", str(run), "--reason", "asked to"])

    assert erased.exit_code == 0, erased.output
    with Ledger(fresh_db.url, archive_dir=archived_env) as reader:  # no key cached (5 s)
        started = next(e for e in reader.stream(run) if isinstance(e, ev.RunStarted))
    assert started.focus == "[erased]"
    assert gzip.decompress((archived_env / seal.file).read_bytes()) == archived  # untouched
    verified = runner.invoke(cli, ["verify"])
    assert verified.exit_code == 0, verified.output
    assert "1 archive files (3 runs) match their ArchiveSealed" in verified.stdout
