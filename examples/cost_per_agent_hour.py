"""Example analytics job: LLM cost per agent per hour, updated live as runs finish.

It follows the ``runs`` projection (woken by LISTEN/NOTIFY) and, whenever a run ends, re-reads
the aggregate from the view with plain SQL — the view has absorbed that run by then.

    python examples/cost_per_agent_hour.py            # uses owlclaw.toml / OWLCLAW_* settings
    python examples/cost_per_agent_hour.py --after N  # resume from log position N
"""

from __future__ import annotations

import argparse

from rich.console import Console
from rich.table import Table

from events import Ledger
from events.catalog import TERMINAL_RUN_EVENTS
from owlclaw.config import load_config
from owlclaw.database import open_database
from projections import RunsView
from projections.feed import follow_projection

QUERY = """
SELECT agent_id, date_trunc('hour', started_at) AS hour, count(*) AS runs,
       sum(tokens) AS tokens, round(sum(cost_usd)::numeric, 6) AS cost_usd
FROM runs GROUP BY 1, 2 ORDER BY 2 DESC, 1 LIMIT 20
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--after", type=int, default=0, help="resume after this log position")
    args = parser.parse_args()
    console = Console()
    config = load_config()
    with Ledger(open_database(config).url) as ledger:
        view = RunsView(ledger)
        view.create_table()
        for logged in follow_projection(ledger, view, after=args.after):
            if not isinstance(logged.event, TERMINAL_RUN_EVENTS):
                continue
            with view.connection() as conn:
                rows = conn.execute(QUERY).fetchall()
            table = Table(title=f"cost per agent per hour (log position {logged.position})")
            for column in ("agent", "hour", "runs", "tokens", "cost USD"):
                table.add_column(column)
            for row in rows:
                table.add_row(
                    row["agent_id"],
                    f"{row['hour']:%Y-%m-%d %H:00}",
                    str(row["runs"]),
                    str(row["tokens"]),
                    str(row["cost_usd"]),
                )
            console.print(table)


if __name__ == "__main__":
    main()
