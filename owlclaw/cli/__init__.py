"""The ``owlclaw`` command line (Typer + Rich). Each module registers its commands on ``app``."""

from owlclaw.cli import agents, approvals, audit, bench, evals, evidence, inspect, timers, tools
from owlclaw.cli.common import app

__all__ = [
    "agents",
    "app",
    "approvals",
    "audit",
    "bench",
    "evals",
    "evidence",
    "inspect",
    "main",
    "timers",
    "tools",
]


def main() -> None:
    app()
