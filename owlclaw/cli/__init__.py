"""The ``owlclaw`` command line (Typer + Rich). Each module registers its commands on ``app``;
``owlclaw --help`` lists them in the order the modules below are imported.

The modules do not use ``from __future__ import annotations``: Typer reads every command's
annotations at each start, and as strings each is compiled and evaluated again (~50 ms a
command). A name imported only for type checking is quoted where it is used."""

# isort: off
from owlclaw.cli import apps, trigger, status, demo
from owlclaw.cli import approvals, audit, bench, evals, evidence
from owlclaw.cli import ledger, archive, erase, blob, replay, runs, schedules, memory, why
from owlclaw.cli import projections, timers, tools, principals

# isort: on
from owlclaw.cli.common import app

__all__ = [
    "app",
    "approvals",
    "apps",
    "archive",
    "audit",
    "bench",
    "blob",
    "demo",
    "erase",
    "evals",
    "evidence",
    "ledger",
    "main",
    "memory",
    "principals",
    "projections",
    "replay",
    "runs",
    "schedules",
    "status",
    "timers",
    "tools",
    "trigger",
    "why",
]


def main() -> None:
    app()
