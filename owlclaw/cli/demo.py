"""The demo command: the seeds' trading agent through the acceptance scenarios. Its own module:
it drives the whole embedded stack from one command, unlike any other."""

from owlclaw.cli.common import (
    JsonOption,
    app,
    command_name,
    err,
    exit_served,
    handles_errors,
    out,
    print_json,
)
from owlclaw.config import load_config


@app.command()
@handles_errors
def demo(as_json: JsonOption = False) -> None:
    """The seeds' trading agent through six scenarios (timers, memory, heartbeat, a cancelled
    schedule, an approval, a question to a person) on the embedded default (PostgreSQL +
    pgvector, Ray actors, projections, timers, local embeddings, webhook)."""
    import asyncio

    from owlclaw.demo import AGENT, Demo

    report = asyncio.run(Demo(load_config(), err if as_json else out).run())
    if as_json:
        print_json(report)
        exit_served()
    owlclaw = command_name()
    out.print(
        f"\n[bold green]demo done in {report.seconds:.0f} s.[/] Inspect what happened:\n"
        f"  {owlclaw} ledger {AGENT}                  every event, in log order\n"
        f"  {owlclaw} memory {AGENT} --recall 'market crash recovery'\n"
        f"  {owlclaw} schedules {AGENT} --all\n"
        f"  {owlclaw} replay {AGENT} {report.fired_run_no} --verify"
        "   re-execute the fired run without a model\n"
        f"  {owlclaw} verify {AGENT}\n"
        f"  cat {report.memory_md}",
        highlight=False,
        soft_wrap=True,
    )
    exit_served()
