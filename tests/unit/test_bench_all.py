"""``owlclaw bench all`` and ``bench docs``: the catalog, ``--only`` and its refusal, reading the
headline figures and the machine's load, the page rendered from a result, and the committed real
quick result holding every catalogued bench's headline figures."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import msgspec
import pytest
from typer.testing import CliRunner

from owlclaw.bench.catalog import ENTRIES, NAMES
from owlclaw.bench.load import CpuTimes, Load, busy_share, parse_cpu_times
from owlclaw.bench.page import render
from owlclaw.bench.suite import (
    BenchRun,
    Entry,
    Figure,
    Headline,
    SuiteRun,
    decode_run,
    figures,
    run_one,
    select,
)
from owlclaw.cli import app

COMMITTED = Path(__file__).parents[1] / "data" / "bench" / "all-quick.json"

PROC_STAT = """\
cpu  4705 356 584 3699176 23060 0 277 0 10 0
cpu0 1393 280 170 1850116 11422 0 135 0 0 0
cpu1 3312 76 414 1849060 11638 0 142 0 0 0
intr 114930548 113199788 3 0 5 263 0 4 [...]
ctxt 1990473
"""


def _pids(url: str, **sizes: int) -> dict[str, Any]:
    """A bench that reports the process it ran in (module level: a spawned process runs it)."""
    return {"pid": os.getpid(), "url": url, **sizes}


def _failing(url: str, **sizes: int) -> dict[str, Any]:
    raise RuntimeError("no database")


def _entry(run: Any = _pids, *, fresh: bool = False) -> Entry:
    return Entry(
        name="toy",
        title="Toy",
        note="A toy bench.",
        method="{runs} runs",
        run=run,
        full={"runs": 10},
        quick={"runs": 2},
        headlines=(Headline("runs", "runs", "runs", "as asked"),),
        fresh_process=fresh,
    )


@contextmanager
def _scratch(name: str) -> Iterator[str]:
    yield f"postgresql:///{name}"


def test_only_selects_in_the_catalog_order_and_refuses_an_unknown_name() -> None:
    assert [e.name for e in select(ENTRIES, "actors, ledger")] == ["ledger", "actors"]
    assert select(ENTRIES, None) == list(ENTRIES)
    with pytest.raises(ValueError, match="unknown bench 'ledgr'; the benches are: ledger,"):
        select(ENTRIES, "ledgr,runtime")
    with pytest.raises(ValueError, match="names no bench"):
        select(ENTRIES, " , ")


def test_the_cli_refuses_an_unknown_bench_with_the_known_names() -> None:
    refused = CliRunner().invoke(app, ["bench", "all", "--only", "ledger,nope"])
    assert refused.exit_code == 2
    assert "unknown bench 'nope'" in refused.output
    assert ", ".join(NAMES) in refused.output


def test_the_only_help_names_every_catalogued_bench() -> None:
    (only,) = [p for p in _all_command().params if p.name == "only"]
    assert only.help is not None
    named = only.help.split("of: ")[1].split(" (default")[0]
    assert named.split(", ") == list(NAMES)


def test_catalogued_names_are_unique_and_every_entry_has_figures() -> None:
    assert len(set(NAMES)) == len(NAMES)
    for entry in ENTRIES:
        assert entry.headlines and set(entry.full) == set(entry.quick)
        entry.method.format(**entry.full)  # every size the method names is given


def test_headline_figures_are_read_off_the_result() -> None:
    entry = Entry(
        name="t",
        title="T",
        note="",
        method="",
        run=_pids,
        full={},
        quick={},
        headlines=(
            Headline("p95", "step.p95_ms", "ms", "m"),
            Headline("hatchet", "hatchet.lateness.p99_ms", "ms", "not built here"),
        ),
    )
    got = figures(entry, {"step": {"p95_ms": 3}})
    assert got == [
        Figure(bench="t", name="p95", value=3.0, unit="ms", method="m"),
        Figure(bench="t", name="hatchet", value=None, unit="ms", method="not built here"),
    ]
    with pytest.raises(TypeError, match=r"step\.p95_ms is 'fast', not a number"):
        figures(entry, {"step": {"p95_ms": "fast"}})


def test_a_bench_runs_at_its_quick_sizes_with_its_load_and_method() -> None:
    run = run_one(_entry(), quick=True, scratch=_scratch)
    assert run.error is None and run.sizes == {"runs": 2} and run.method == "2 runs"
    assert run.result["url"] == "postgresql:///owlclaw_bench_all_toy"
    assert run.result["pid"] == os.getpid()
    assert [f.value for f in run.figures] == [2.0]
    assert 0 <= run.load.cpu_busy_share <= 1 and run.load.load1_before >= 0


def test_a_fresh_process_bench_runs_in_another_process() -> None:
    run = run_one(_entry(fresh=True), quick=False, scratch=_scratch)
    assert run.error is None and run.result["runs"] == 10
    assert run.result["pid"] != os.getpid()


def test_a_failing_bench_is_recorded_without_figures() -> None:
    run = run_one(_entry(_failing), quick=True, scratch=_scratch)
    assert run.error == "RuntimeError: no database" and run.figures == []


def test_cpu_busy_share_from_proc_stat() -> None:
    times = parse_cpu_times(PROC_STAT)
    # user nice system idle iowait irq softirq steal; guest (10) is already in user
    assert times == CpuTimes(
        busy=4705 + 356 + 584 + 277, total=4705 + 356 + 584 + 3699176 + 23060 + 277
    )
    assert busy_share(CpuTimes(100, 1000), CpuTimes(250, 1200)) == 0.75
    assert busy_share(times, times) == 0.0
    with pytest.raises(ValueError, match="no aggregate 'cpu' line"):
        parse_cpu_times("intr 1 2 3\n")


def _suite(started: datetime, value: float, *, quick: bool) -> SuiteRun:
    bench = BenchRun(
        bench="runtime",
        title="Runtime",
        sizes={"runs": 20},
        method="20 runs of one agent",
        started_at=started,
        duration_s=12.5,
        load=Load(load1_before=1.5, load1_after=2.25, cpu_busy_share=0.62),
        figures=[Figure("runtime", "tool step overhead p50", value, "ms", "gap between calls")],
        result={},
    )
    return SuiteRun(started_at=started, duration_s=13.0, quick=quick, cores=2, benches=[bench])


def test_the_page_shows_each_bench_with_its_latest_run() -> None:
    older = _suite(datetime(2026, 11, 28, 9, 0, tzinfo=UTC), 0.61, quick=False)
    newer = _suite(datetime(2026, 11, 29, 20, 30, tzinfo=UTC), 0.52, quick=True)
    page = render([newer, older], ENTRIES)
    assert page.startswith("# Benchmarks\n")
    runtime = page.split("## Runtime\n")[1].split("\n## ")[0]
    assert next(e.note for e in ENTRIES if e.name == "runtime") in runtime
    assert "| tool step overhead p50 | 0.52 ms | gap between calls |" in runtime
    assert "0.61" not in runtime
    assert "Measured 2026-11-29 20:30 UTC (quick sizes, 2 cores) in 12.5 s" in runtime
    assert "load 1.5 → 2.25, CPU 62% busy" in runtime
    for entry in ENTRIES:
        assert f"## {entry.title}\n" in page
    assert "Not measured yet (`owlclaw bench all --only ledger`)" in page


def test_bench_docs_writes_the_page_from_result_files(tmp_path: Path) -> None:
    result = tmp_path / "result.json"
    result.write_bytes(msgspec.json.encode(_suite(datetime.now(UTC), 0.5, quick=True)))
    page = tmp_path / "benchmarks.md"
    done = CliRunner().invoke(app, ["bench", "docs", str(result), "--out", str(page)])
    assert done.exit_code == 0, done.output
    assert "| tool step overhead p50 | 0.5 ms |" in page.read_text()
    (tmp_path / "bad.json").write_text("{}")
    refused = CliRunner().invoke(app, ["bench", "docs", str(tmp_path / "bad.json")])
    assert refused.exit_code == 2 and "bench all --json" in refused.output


def test_the_committed_quick_result_holds_every_headline_figure() -> None:
    suite = decode_run(COMMITTED.read_bytes())
    assert suite.quick
    by_name = {b.bench: b for b in suite.benches}
    assert list(by_name) == list(NAMES)
    for entry in ENTRIES:
        run = by_name[entry.name]
        assert run.error is None, (entry.name, run.error)
        assert run.sizes == dict(entry.quick)
        assert [f.name for f in run.figures] == [h.name for h in entry.headlines]
        # read again from the bench's whole result: the declared keys hold numbers
        for figure in figures(entry, run.result):
            assert isinstance(figure.value, float), (entry.name, figure.name)


def _all_command() -> Any:
    import typer.main

    group = typer.main.get_command(app)
    bench = group.commands["bench"]  # type: ignore[attr-defined]
    return bench.commands["all"]
