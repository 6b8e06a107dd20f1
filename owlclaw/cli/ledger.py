"""The ledger's own commands: ledger (its events, a page at a time), verify (hash chains,
sealed heads, anchors, evidence bundles) and anchor. Their own module: they read and check the
record itself, where the other reading commands read views built from it."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    JsonOption,
    app,
    ask_server,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    summary,
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import load_config

if TYPE_CHECKING:
    from events.hashchain import VerifyReport
    from owlclaw.reports.listings import LedgerPage, SpawnNode


@app.command()
@handles_errors
def ledger(
    agent: Annotated[str, typer.Argument(help="Agent id.")],
    after: Annotated[
        int, typer.Option(min=0, help="Start after this log position (a page's next_after).")
    ] = 0,
    limit: Annotated[int, typer.Option(min=1, help="Show at most this many events.")] = 200,
    every: Annotated[bool, typer.Option("--all", help="Show every event (no --limit).")] = False,
    talk: Annotated[
        bool,
        typer.Option(
            "--conversation",
            help="Show the messages between this agent and others instead (send_to_agent), "
            "followed from agent to agent, each with the state of its link.",
        ),
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Print an agent's events (its stream and its runs' streams) in log order, a page at a
    time: the first --limit events after --after, and where the next page starts."""
    if talk:
        _conversation(agent, as_json)
        return
    config = load_config()
    shown = None if every else limit
    page = ask_server(config, lambda client: client.ledger(agent, after, shown))
    if page is None:
        from owlclaw.audit.ledger_page import ledger_page

        with open_ledger(config) as (_, led):
            page = ledger_page(led, agent, after, shown)
    if as_json:
        print_json(page)
        return
    out.print(ledger_table(page))
    if page.next_after is not None:
        out.print(
            f"[yellow]{limit} events shown, more follow:[/] owlclaw ledger {escape(agent)}"
            f" --after {page.next_after} (or --all)",
            highlight=False,
        )
    if page.sub_agents:
        out.print(_tree(Tree(f"sub-agents of {agent}"), page.sub_agents))


def ledger_table(page: "LedgerPage") -> Table:
    """Each event's position and stream as ``--after``, ``replay`` and ``export`` take them
    (a run stream by its run number), its data folded under its type."""
    table = Table(
        whole("pos"),
        whole("stream"),
        whole("ver"),
        whole("time"),
        text("event"),
        title=f"ledger of {page.agent_id}",
    )
    for e in page.events:
        table.add_row(
            str(e.position),
            "agent" if e.run is None else f"run {e.run}",
            str(e.version),
            e.timestamp.strftime("%H:%M:%S.%f")[:-3],
            stacked(Text(e.type, "bold"), summary(e.data)),
        )
    return table


def _conversation(agent: str, as_json: bool) -> None:
    from owlclaw.audit.conversations import conversation

    with open_ledger() as (_, led):
        led.require_agent(agent)
        said = conversation(led, agent)
    if as_json:
        print_json({"agent_id": agent, "conversation": [s.__dict__ for s in said]})
        return
    table = Table(
        whole("time"),
        whole("from"),
        whole("to"),
        whole("what"),
        text("text"),
        whole("link"),
        title=f"conversation of {agent}",
    )
    for s in said:
        link = Text(s.link, "red" if s.link not in ("ok", "-") else "")
        table.add_row(
            s.at.strftime("%H:%M:%S.%f")[:-3], s.from_agent, s.to_agent, s.kind, s.text, link
        )
    out.print(table)


def _tree(branch: Tree, nodes: "list[SpawnNode]") -> Tree:
    for node in nodes:
        child = branch.add(
            escape(f"{node.agent_id} run {node.run_id[:8]} [{node.status}] {node.task[:60]}")
        )
        _tree(child, node.children)
    return branch


@app.command()
@handles_errors
def verify(
    agent: Annotated[str | None, typer.Argument(help="Agent id (default: every stream).")] = None,
    bundle: Annotated[
        Path | None,
        typer.Option("--bundle", help="Verify this evidence bundle offline (no database)."),
    ] = None,
    pubkey: Annotated[
        str | None,
        typer.Option("--pubkey", help="The bundle signer's public key (base64, or its file)."),
    ] = None,
    anchor_file: Annotated[
        Path | None,
        typer.Option(
            "--anchor",
            help="Check against this anchor (the JSON `owlclaw anchor --json` printed) instead "
            "of the latest one in the ledger.",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Recompute the hash chains (naming the first altered event of each stream), check each
    ended run against the head sealed on its agent's stream, and every stream against the
    latest anchor: a deleted tail or stream, or an event rewritten after the anchor, is named.
    Archived runs are checked in their files against their ArchiveSealed.
    With --bundle, check an exported bundle instead: its chains, manifest and signature."""
    if bundle is not None or pubkey is not None:
        if agent is not None or anchor_file is not None:
            fail(
                "--bundle verifies a file, not an agent or an anchor",
                "drop the agent argument and --anchor",
                EXIT_USAGE,
            )
        _verify_bundle_file(bundle, pubkey, as_json)
        return
    from events.heads import AnchorInvalid, read_anchor
    from owlclaw.audit.chains import verify_agent

    anchor = None
    if anchor_file is not None:
        try:
            anchor = read_anchor(anchor_file.read_bytes(), str(anchor_file))
        except OSError as e:
            fail(
                f"cannot read {anchor_file}: {e.strerror}", "pass an existing file", EXIT_NOT_FOUND
            )
        except AnchorInvalid as e:
            fail(str(e), "pass the JSON `owlclaw anchor --json` printed, unchanged", EXIT_USAGE)
    with open_ledger() as (_, led):
        report = verify_agent(led, agent, anchor)
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "streams": report.streams,
                "events": report.events,
                "breaks": [
                    {
                        "stream": b.stream,
                        "version": b.version,
                        "position": b.position,
                        "reason": b.reason,
                    }
                    for b in report.breaks
                ],
                "mismatches": report.mismatches,
                "sealed_runs": report.sealed_runs,
                "anchor": report.anchor,
                "unreadable": report.unreadable,
                "archives": report.archives,
                "archived_runs": report.archived_runs,
                "archive_problems": [
                    {"file": p.file, "by": p.by, "reason": p.reason}
                    for p in report.archive_problems
                ],
                "links": report.links,
                "link_problems": [{**p.__dict__, "text": str(p)} for p in report.link_problems],
            }
        )
    else:
        _print_report(report)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


def _print_report(report: "VerifyReport") -> None:
    """What verify found, one line each, or the one ok line."""
    for b in report.breaks:
        out.print(f"[red]BROKEN[/] {escape(str(b))}")
    for m in report.mismatches:
        out.print(f"[red]MISMATCH[/] {escape(str(m))}")
    for p in report.archive_problems:
        out.print(f"[red]ARCHIVE[/] {escape(str(p))}")
    for link in report.link_problems:
        out.print(f"[red]LINK[/] {escape(str(link))}")
    for u in report.unreadable:
        out.print(f"[yellow]unchecked[/] {escape(u)}")
    if report.ok:
        against = f"; every stream reaches {report.anchor}" if report.anchor else ""
        archives = (
            f"; {report.archives} archive files ({report.archived_runs} runs) match their "
            "ArchiveSealed"
            if report.archives
            else ""
        )
        links = f"; {report.links} links between agents hold" if report.links else ""
        out.print(
            f"[green]ok[/]: {report.events} events in {report.streams} streams, chains "
            f"intact; {report.sealed_runs} ended runs match their sealed heads"
            f"{archives}{links}{against}"
        )


def _verify_bundle_file(bundle: Path | None, pubkey: str | None, as_json: bool) -> None:
    from owlclaw.audit.evidence.verify_bundle import BundleKeyError, parse_public_key, verify_bundle

    if bundle is None or pubkey is None:
        fail(
            "--bundle and --pubkey go together",
            "owlclaw verify --bundle FILE --pubkey KEY",
            EXIT_USAGE,
        )
    try:
        key = parse_public_key(pubkey)
        data = bundle.read_bytes()
    except (BundleKeyError, OSError) as e:
        fail(str(e), "pass the bundle file and the key `owlclaw keys init` printed", EXIT_USAGE)
    report = verify_bundle(data, key)
    if as_json:
        print_json(
            {
                "ok": report.ok,
                "agent": report.agent,
                "streams": report.streams,
                "events": report.events,
                "key_id": report.key_id,
                "problems": [{**p.__dict__, "text": str(p)} for p in report.problems],
            }
        )
    elif report.ok:
        out.print(
            f"[green]ok[/]: {report.events} events in {report.streams} streams of"
            f" {escape(report.agent or '')}, chains intact, signed by key {report.key_id}",
            highlight=False,
            soft_wrap=True,
        )
    else:
        for p in report.problems:
            out.print(f"[red]BROKEN[/] {escape(str(p))}", highlight=False, soft_wrap=True)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)


@app.command()
@handles_errors
def anchor(as_json: JsonOption = False) -> None:
    """Record the head (last version and hash) of every stream in the ledger, and print it.
    Keep the printed JSON outside the database: `owlclaw verify --anchor FILE` then finds any
    later deletion or rewrite of what it covers, even if the anchor events are deleted too."""
    with open_ledger() as (_, led):
        anchored = led.chains.anchor()
    if as_json:
        print_json(anchored)
        return
    for h in anchored.heads:
        out.print(f"{h.stream} {h.version} {h.hash}", highlight=False)
    out.print(
        f"anchor {anchored.anchor} at {anchored.at.isoformat()}: {len(anchored.heads)} streams, "
        f"digest {anchored.digest}",
        highlight=False,
    )
