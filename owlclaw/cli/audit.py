"""Questions an auditor asks of the ledger: what the agent was and knew at a moment (``agent
--as-of``, ``memory --as-of``) and why it decided what it did (``explain``)."""

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from owlclaw.cli.common import (
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
)
from owlclaw.cli.tables import stacked, text, whole
from owlclaw.config import load_config

if TYPE_CHECKING:
    from events.agent_state import ActiveSchedule
    from owlclaw.audit.as_of import Moment, PastMemory

AS_OF_HELP = (
    "A past moment: an ISO-8601 time (UTC unless it names an offset) or a log position (@1234)."
)


def moment_of(text: str | None) -> "Moment":
    """The moment ``--as-of`` names (no option: everything recorded so far)."""
    from owlclaw.audit.as_of import Moment, UnknownMoment, parse_moment

    if text is None:
        return Moment()
    try:
        return parse_moment(text)
    except UnknownMoment as e:
        fail(str(e), "e.g. --as-of 2026-11-03T14:02:00Z or --as-of @1234", EXIT_USAGE)


def _short(sha: str) -> str:
    return sha[:12] if sha else "-"


@app.command()
@handles_errors
def agent(
    agent_id: Annotated[str, typer.Argument(metavar="AGENT", help="Agent id.")],
    as_of: Annotated[str | None, typer.Option("--as-of", help=AS_OF_HELP)] = None,
    as_json: JsonOption = False,
) -> None:
    """The agent at a moment, from its events up to then: identity version (hashes of its
    files), skills, governance, active schedules and that day's spending up to then."""
    from owlclaw.audit.as_of import UnknownMoment, agent_at, history_at

    moment = moment_of(as_of)
    with open_ledger() as (_, led):
        try:
            state = agent_at(history_at(led, agent_id, moment))
        except UnknownMoment as e:
            fail(str(e), f"`owlclaw ledger {agent_id}` shows when it started", EXIT_NOT_FOUND)
    if as_json:
        print_json(state)
        return
    out.print(
        f"[bold]{escape(agent_id)}[/] at log position {state.position} ({state.at.isoformat()}),"
        f" {state.runs} runs queued",
        highlight=False,
    )
    identity = state.identity
    if identity is None:
        out.print("identity: none loaded yet")
    else:
        out.print(
            f"identity version {identity.number} (loaded {identity.loaded_at.isoformat()},"
            f" changed {', '.join(identity.changed) or 'nothing'}):\n"
            f"  SOUL.md {identity.soul_sha256}\n  IDENTITY.md {identity.identity_sha256}\n"
            f"  owlclaw.toml {_short(identity.config_sha256)}"
            f"  handlers.py {_short(identity.code_sha256)}",
            highlight=False,
        )
        for skill, sha in identity.skills.items():
            out.print(f"  skill {escape(skill)} {_short(sha)}", highlight=False)
        out.print(f"governance: {identity.governance or 'not recorded (older event)'}")
    if state.app_error:
        out.print(f"[red]app did not load:[/] {escape(state.app_error)}")
    out.print(
        f"tools disabled by the operator: {', '.join(state.disabled_tools) or '-'};"
        f" withheld: {', '.join(state.withheld_tools) or '-'}",
        highlight=False,
    )
    out.print(schedules_then_table(state.schedules))
    out.print(
        f"spent on {state.spent.day} up to then: {state.spent.tokens} tokens,"
        f" ${state.spent.cost_usd:.6f}; budget exceeded {len(state.budget_exceeded)} times;"
        f" approvals pending: {len(state.pending_approvals)}",
        highlight=False,
    )


def schedules_then_table(schedules: "dict[str, ActiveSchedule]") -> Table:
    table = Table(
        whole("schedule"),
        whole("kind"),
        whole("last fire"),
        text("focus"),
        title="schedules active then",
    )
    for schedule_id, s in schedules.items():
        last = s.last_fire_time.strftime("%Y-%m-%d %H:%M:%S") if s.last_fire_time else "-"
        table.add_row(schedule_id, s.cron or s.kind, last, s.focus)
    return table


def memory_as_of(
    agent_id: str, as_of: str, query: str | None, limit: int, *, as_json: bool
) -> None:
    """``owlclaw memory AGENT --as-of T``: the memories held at T, rebuilt from the ledger."""
    from owlclaw.audit.as_of import UnknownMoment, history_at, memories_at, recall_at
    from owlclaw.cli.tables import recall_table
    from projections.embedders import embedder_for

    moment = moment_of(as_of)
    config = load_config()
    settings = config.memory
    with open_ledger(config) as (_, led):
        try:
            history = history_at(led, agent_id, moment)
        except UnknownMoment as e:
            fail(str(e), f"`owlclaw ledger {agent_id}` shows when it started", EXIT_NOT_FOUND)
    held = memories_at(history, settings.embedding_model)
    recalled = None
    if query is not None:
        recalled = recall_at(
            held,
            query,
            history.at,
            lambda model: embedder_for(model, settings.embedding_dimensions),
            half_life_days=settings.half_life_days,
            limit=limit,
            min_similarity=config.runtime.recall_min_similarity,
        )
    if as_json:
        print_json(
            {
                "agent": agent_id,
                "as_of": {"position": history.position, "at": history.at},
                "memories": held,
                "recall": None if recalled is None else {"query": query, "memories": recalled},
            }
        )
        return
    out.print(
        f"memories of {escape(agent_id)} at log position {history.position}"
        f" ({history.at.isoformat()})",
        highlight=False,
    )
    if recalled is not None:
        out.print(recall_table(f"{agent_id} recalls: {query!r}", recalled))
    else:
        out.print(memories_then_table(held))


def memories_then_table(held: "list[PastMemory]") -> Table:
    """The memories held, each one's tags under its content."""
    table = Table(whole("when"), whole("memory"), text("embedding model"), text("content"))
    for p in held:
        model = p.embedding_model + ("" if p.embedding_model_recorded else " (configured)")
        table.add_row(
            p.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            str(p.memory_id)[:8],
            model,
            stacked(p.content, Text(f"tags: {', '.join(p.tags)}", "dim") if p.tags else None),
        )
    return table


@app.command()
@handles_errors
def explain(
    agent_id: Annotated[str, typer.Argument(metavar="AGENT", help="Agent id.")],
    run_no: Annotated[int, typer.Argument(min=1, help="Run number (1 = the agent's first run).")],
    step: Annotated[
        int | None, typer.Argument(min=1, help="Step (model answer) of the run; default: all.")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The decision manifest of a run's steps, from the recorded events alone: identity and
    skill versions, recalled memories, visible and hidden tools, governance decisions, model
    path with fallbacks, tokens and cost, and the run's current plan (update_plan)."""
    config = load_config()
    manifest = ask_server(config, lambda client: client.manifest(agent_id, run_no, step))
    if manifest is None:
        from owlclaw.audit.explain import NotRecorded, explain_run

        with open_ledger(config) as (_, led):
            try:
                manifest = explain_run(led, agent_id, run_no, step)
            except NotRecorded as e:
                fail(str(e), f"`owlclaw ledger {agent_id}` lists its runs", EXIT_NOT_FOUND)
    if as_json:
        print_json(manifest)
        return
    m = manifest
    lines = [
        f"[bold]{escape(agent_id)} run {run_no}[/] ({m.trigger}"
        + (f" by {escape(m.triggered_by)}" if m.triggered_by else "")
        + (f", focus {escape(m.focus)!r}" if m.focus else "")
        + f"): {escape(m.ended)}",
    ]
    if m.identity is not None:
        i = m.identity
        lines += [
            f"identity version {i.number}: SOUL.md {_short(i.soul_sha256)},"
            f" IDENTITY.md {_short(i.identity_sha256)}, owlclaw.toml {_short(i.config_sha256)},"
            f" handlers.py {_short(i.code_sha256)}",
            f"  changed in this version: {', '.join(i.changed) or 'nothing'}",
            f"  changed since the previous run: {', '.join(m.changed_since_previous_run) or '-'}",
            "  skills: " + (", ".join(f"{k} {_short(v)}" for k, v in i.skills.items()) or "-"),
        ]
    lines += [
        f"skills in the prompt: {', '.join(m.skills_in_prompt) or '-'}",
        f"system prompt: {m.prompt_tokens if m.prompt_tokens is not None else '?'} tokens"
        + (", trimmed:" if m.prompt_trimmed else ""),
        *(
            f"  {part}: {escape(', '.join(map(str, left)))}"
            for part, left in m.prompt_trimmed.items()
        ),
        f"visible tools: {', '.join(m.visible_tools) or '-'}",
        *(f"  hidden {escape(t)}: {escape(why)}" for t, why in m.hidden_tools.items()),
        "memories recalled: " + ("" if m.memories else "-"),
        *(f"  {r.relevance:.3f} {escape(r.content)}" for r in m.memories),
        f"model path: {' → '.join(m.model_path) or '-'}",
        f"rate limits: {_rate_limits(m.rate_limits)}",
        f"budget: {_budget(m.budget)}",
        f"tokens {m.tokens}, cost ${m.cost_usd:.6f}",
        "plan: " + ("" if m.plan else "-"),
        *(f"  {item['status']:<11} {escape(item['text'])}" for item in m.plan),
    ]
    for s in m.steps:
        decided = (
            "; ".join(f"{c.tool}({c.arguments}) → {c.outcome}" for c in s.calls)
            if s.calls
            else f"answered {s.answer!r}"
        )
        lines.append(
            f"step {s.number} [{s.model}"
            + (f" after {len(s.fallback_hops)} failed" if s.fallback_hops else "")
            + f", {s.usage.get('total_tokens', 0)} tokens, ${s.cost_usd:.6f}]: {escape(decided)}"
        )
        lines += [f"  fallback: {escape(h)}" for h in s.fallback_hops]
        lines += [f"  governance: {escape(g)}" for g in s.governance]
        lines += [f"  recalled {r.relevance:.3f} {escape(r.content)}" for r in s.recalled]
    out.print("\n".join(lines), highlight=False, soft_wrap=True)


def _rate_limits(limits: dict[str, Any]) -> str:
    """``place_order 5 per 3600 s, ...`` (the governance table as the run recorded it)."""
    return (
        ", ".join(
            f"{escape(tool)} {limit.get('calls')} per {limit.get('per_seconds'):g} s"
            for tool, limit in limits.items()
        )
        or "none"
    )


def _budget(budget: dict[str, Any]) -> str:
    """``1,000 tokens a day, $2.00 a day; exceeded daily_tokens (1,020 of 1,000)``."""
    parts = []
    if budget.get("daily_tokens") is not None:
        parts.append(f"{budget['daily_tokens']:,} tokens a day")
    if budget.get("daily_cost_usd") is not None:
        parts.append(f"${budget['daily_cost_usd']:.2f} a day")
    text = ", ".join(parts) or "none"
    exceeded = [f"{e['budget']} ({e['spent']:,g} of {e['limit']:,g})" for e in budget["exceeded"]]
    return text + (f"; exceeded {', '.join(exceeded)}" if exceeded else "")
