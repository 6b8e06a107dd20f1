"""The ``owlclaw`` command line (Typer + Rich). Each module registers its commands on ``app``."""

from owlclaw.cli import agents, bench, inspect, timers
from owlclaw.cli.common import app

__all__ = ["agents", "app", "bench", "inspect", "main", "timers"]


def main() -> None:
    app()
