"""``owlclaw bench all``: the headline benches in sequence, each figure with its method and the
machine's load while it ran.

A bench is declared once (``Entry``): its name, how to run it at full and quick sizes, and which
values of its result are the headline figures. Running it reads those values into ``Figure``s; its
whole result is kept beside them for whoever wants the rest."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import msgspec

from owlclaw.bench.load import Load, LoadMeter


class Headline(msgspec.Struct, frozen=True):
    """A headline figure: where it is in the bench's result (keys joined by dots) and its unit."""

    name: str
    path: str
    unit: str
    method: str


@dataclass(frozen=True)
class Entry:
    """One bench of ``bench all``. ``run(url, **sizes)`` gets a scratch database's URL and
    ``full`` or ``quick`` as keywords; ``method`` is formatted with the same sizes.
    ``fresh_process``: run it in a new (spawned) process, for benches that start a Ray cluster
    of their own or account for their process's CPU."""

    name: str
    title: str
    note: str
    method: str
    run: Callable[..., dict[str, Any]]
    full: Mapping[str, int]
    quick: Mapping[str, int]
    headlines: tuple[Headline, ...]
    fresh_process: bool = False


class Figure(msgspec.Struct, frozen=True):
    bench: str
    name: str
    value: float | None
    """None: not measured on this machine (e.g. no Hatchet engine built)."""
    unit: str
    method: str


class BenchRun(msgspec.Struct):
    bench: str
    title: str
    sizes: dict[str, int]
    method: str
    started_at: datetime
    duration_s: float
    load: Load
    figures: list[Figure]
    result: dict[str, Any]
    error: str | None = None


class SuiteRun(msgspec.Struct):
    started_at: datetime
    duration_s: float
    quick: bool
    cores: int
    benches: list[BenchRun]


Scratch = Callable[[str], AbstractContextManager[str]]
"""A scratch database for one bench, by name: its URL, dropped afterwards."""


def select(entries: Sequence[Entry], only: str | None) -> list[Entry]:
    """The entries named in ``only`` (comma-separated), in the registry's order; every entry
    without it. An unknown name is refused with the known ones."""
    if only is None:
        return list(entries)
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    known = [e.name for e in entries]
    if unknown := [name for name in wanted if name not in known]:
        raise ValueError(
            f"unknown bench {', '.join(map(repr, unknown))}; the benches are: {', '.join(known)}"
        )
    if not wanted:
        raise ValueError(f"--only names no bench; the benches are: {', '.join(known)}")
    return [e for e in entries if e.name in wanted]


def figures(entry: Entry, result: Mapping[str, Any]) -> list[Figure]:
    """The entry's headline figures read off its result; a value the result does not hold
    (a part not measured here) is None, one that is not a number is a bug of the declaration."""
    found = []
    for headline in entry.headlines:
        value: Any = result
        for key in headline.path.split("."):
            value = value.get(key) if isinstance(value, Mapping) else None
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
            raise TypeError(f"{entry.name}: {headline.path} is {value!r}, not a number")
        found.append(
            Figure(
                bench=entry.name,
                name=headline.name,
                value=None if value is None else float(value),
                unit=headline.unit,
                method=headline.method,
            )
        )
    return found


def run_one(entry: Entry, *, quick: bool, scratch: Scratch) -> BenchRun:
    """Run one bench on a scratch database of its own. A bench that fails is recorded with its
    error (and no figures) so that the others' figures are not lost with it."""
    sizes = dict(entry.quick if quick else entry.full)
    started_at = datetime.now(UTC)
    meter = LoadMeter()
    began = time.perf_counter()
    result: dict[str, Any] = {}
    error = None
    try:
        with scratch(f"owlclaw_bench_all_{entry.name.replace('-', '_')}") as url:
            if entry.fresh_process:
                # a new interpreter: a fork would inherit this one's threads and libraries
                import multiprocessing
                from concurrent.futures import ProcessPoolExecutor

                spawn = multiprocessing.get_context("spawn")
                with ProcessPoolExecutor(1, mp_context=spawn) as pool:
                    result = pool.submit(entry.run, url, **sizes).result()
            else:
                result = entry.run(url, **sizes)
    except Exception as e:  # recorded in the bench's entry; the run goes on
        error = f"{type(e).__name__}: {e}"
    duration = time.perf_counter() - began
    return BenchRun(
        bench=entry.name,
        title=entry.title,
        sizes=sizes,
        method=entry.method.format(**sizes),
        started_at=started_at,
        duration_s=round(duration, 1),
        load=meter.read(),
        figures=[] if error else figures(entry, result),
        result=result,
        error=error,
    )


def run_all(
    entries: Sequence[Entry],
    *,
    quick: bool,
    scratch: Scratch,
    progress: Callable[[str], None] = lambda _: None,
) -> SuiteRun:
    started_at = datetime.now(UTC)
    began = time.perf_counter()
    runs = []
    for i, entry in enumerate(entries, 1):
        progress(f"{entry.name} ({i}/{len(entries)})…")
        runs.append(run_one(entry, quick=quick, scratch=scratch))
    return SuiteRun(
        started_at=started_at,
        duration_s=round(time.perf_counter() - began, 1),
        quick=quick,
        cores=os.cpu_count() or 1,
        benches=runs,
    )


def decode_run(text: bytes) -> SuiteRun:
    """A ``bench all --json`` output read back."""
    return msgspec.json.decode(text, type=SuiteRun)
