"""``owlclaw approvals`` / ``approve`` / ``deny`` / ``answer``: the calls agents wait on a
person for, and the questions they ask one (ask_human).

An answer goes through the agent's writer when ``owlclaw run`` serves the agent (the parked run
resumes at once), else it is recorded directly in the ledger and the run resumes when a host
next activates the agent.
"""

import getpass
import json
from typing import TYPE_CHECKING, Annotated, Any

import msgspec
import typer
from rich.table import Table

from owlclaw.cli.common import (
    EXIT_FAILED,
    EXIT_NOT_FOUND,
    EXIT_USAGE,
    JsonOption,
    State,
    app,
    ask_server,
    fail,
    handles_errors,
    open_ledger,
    out,
    print_json,
    server_client,
)
from owlclaw.cli.tables import text, whole
from owlclaw.config import OwlClawConfig, load_config
from owlclaw.messages import ApprovalAnswer, Decision
from owlclaw.reports.relative_time import relative

if TYPE_CHECKING:
    from owlclaw.reports.approvals import PendingApproval

QUESTION_HINT = "`owlclaw approvals` shows the question and its options"
CLOSED_CODES = frozenset(
    {"approval_closed", "digest_mismatch", "same_approver", "self_approval", "forbidden"}
)
"""The server's refusals of an answer (nothing recorded)."""
ARGS_EXAMPLE = """pass an object, e.g. --args '{"amount": 900}'"""
NoteOption = Annotated[str, typer.Option("--note", help="Why, for the ledger and the model.")]
ByOption = Annotated[str | None, typer.Option("--by", help="Who answers (default: the OS user).")]
DigestOption = Annotated[
    str | None,
    typer.Option(
        "--digest",
        help="The digest of the arguments you read (`owlclaw approvals --json`); default: the"
        " arguments shown now, printed with the answer.",
    ),
]


@app.command()
@handles_errors
def approvals(
    agent: Annotated[str | None, typer.Argument(help="Only this agent's.")] = None,
    as_json: JsonOption = False,
) -> None:
    """Pending approvals: the tool calls agents' runs are parked at, and the questions they
    ask (`owlclaw answer`), oldest first."""
    config = load_config()
    listing = ask_server(config, lambda client: client.approvals(agent))
    if listing is None:
        from owlclaw.reports.approvals import approvals_of

        with open_ledger(config) as (_, led):
            listing = approvals_of(led, agent, served=())
    found, served = listing.pending, set(listing.served)
    if as_json:
        print_json([{**_fields(p), "served": p.approval_id in served} for p in found])
        return
    if not found:
        out.print("no pending approvals")
        return
    short = listing.short
    table = Table(
        whole("id"),
        *(text(column) for column in ("agent", "tool", "arguments", "reason")),
        whole("requested"),
        whole("expires"),
        title="pending approvals (an id's prefix is enough for approve / deny / answer)",
    )
    for p in found:
        table.add_row(
            short[p.approval_id],
            p.agent_id,
            p.tool,
            _asked(p.kind, p.arguments),
            p.reason,
            relative(p.requested_at),
            relative(p.expires_at),
        )
    out.print(table)


@app.command()
@handles_errors
def approve(
    approval_id: Annotated[str, typer.Argument(help="From `owlclaw approvals`.")],
    note: NoteOption = "",
    args: Annotated[
        str | None,
        typer.Option("--args", metavar="JSON", help="Run the call with these arguments instead."),
    ] = None,
    by: ByOption = None,
    digest: DigestOption = None,
    as_json: JsonOption = False,
) -> None:
    """Let a parked call run (with --args: edited arguments, checked against the tool)."""
    config, who = load_config(), _by(by)
    arguments = _arguments(args)
    shown = _shown(config, approval_id)
    decision = Decision(shown.approval_id, True, who, note, arguments, digest or shown.digest)
    _report(_answer(config, decision), shown, as_json)


@app.command()
@handles_errors
def deny(
    approval_id: Annotated[str, typer.Argument(help="From `owlclaw approvals`.")],
    note: NoteOption = "",
    by: ByOption = None,
    digest: DigestOption = None,
    as_json: JsonOption = False,
) -> None:
    """Refuse a parked call: the model is told who denied it and why, and goes on."""
    config, who = load_config(), _by(by)
    shown = _shown(config, approval_id)
    decision = Decision(shown.approval_id, False, who, note, None, digest or shown.digest)
    _report(_answer(config, decision), shown, as_json)


@app.command()
@handles_errors
def answer(
    approval_id: Annotated[
        str, typer.Argument(help="The question's id, from `owlclaw approvals`.")
    ],
    text: Annotated[
        str, typer.Argument(help="The answer: one of the question's options when it has any.")
    ],
    by: ByOption = None,
    digest: DigestOption = None,
    as_json: JsonOption = False,
) -> None:
    """Answer a question an agent asked (ask_human): the answer is the result its run resumes
    with."""
    config, who = load_config(), _by(by)
    shown = _shown(config, approval_id)
    decision = Decision(shown.approval_id, True, who, "", None, digest or shown.digest, answer=text)
    _report(_answer(config, decision), shown, as_json, text)


def _asked(kind: str, arguments: dict[str, Any]) -> str:
    """What a listing shows of a call's arguments, or of a question: its text and options."""
    if kind != "question":
        return json.dumps(arguments, ensure_ascii=False)
    options = arguments.get("options") or []
    return str(arguments.get("question", "")) + (f" [{' | '.join(options)}]" if options else "")


def _by(given: str | None) -> str:
    """Who answers: ``--by``, else the OS user; with a principal's token the server records the
    principal, so another name is refused here."""
    if given is not None and State.token is not None:
        fail(
            "--by names who answers with the server's token; a principal's token answers as"
            " that principal",
            "leave out --by",
            EXIT_USAGE,
        )
    return given or getpass.getuser()


class _Shown(msgspec.Struct, frozen=True):
    """The approval answered, as this command shows it (no tool: it is no longer pending)."""

    approval_id: str
    tool: str = ""
    arguments: dict[str, Any] = {}
    digest: str = ""


def _shown(config: OwlClawConfig, given: str) -> _Shown:
    """The approval ``given`` names (its id, or a unique prefix of one) with the arguments it
    shows now and their digest."""
    from events.agent_state import UnknownApproval
    from owlclaw.reports.approvals import pending
    from owlclaw.runtime.approvals import agent_of, complete_approval_id

    with open_ledger(config) as (_, led):
        try:
            approval_id = complete_approval_id(led, given, led.agent_ids())
            agent_id = agent_of(led, approval_id, led.agent_ids())
        except UnknownApproval as e:
            fail(str(e), "`owlclaw approvals` lists the pending ones", EXIT_NOT_FOUND)
        found = [p for p in pending(led, [agent_id]) if p.approval_id == approval_id]
    if not found:
        return _Shown(approval_id)
    return _Shown(approval_id, found[0].tool, found[0].arguments, found[0].digest)


def _arguments(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        fail(f"--args is not JSON: {e}", ARGS_EXAMPLE, EXIT_USAGE)
    if not isinstance(value, dict):
        fail("--args must be a JSON object", ARGS_EXAMPLE, EXIT_USAGE)
    return value


def _answer(config: OwlClawConfig, decision: Decision) -> tuple[ApprovalAnswer, str]:
    """Through the agent's server when one serves it, else directly in the ledger."""
    from events.agent_state import ApprovalClosed, InvalidAnswer, UnknownApproval
    from owlclaw.cli.tools import app_tools
    from owlclaw.client import ServerRefused, ServerUnavailable
    from owlclaw.runtime.approvals import ToolArgumentsInvalid, agent_of, answer_directly

    with server_client(config) as client:
        try:
            return client.answer_approval(decision), "server"
        except ServerUnavailable:
            pass
        except ServerRefused as e:
            if e.code == "invalid_answer":
                fail(str(e), QUESTION_HINT, EXIT_USAGE)
            if e.code in CLOSED_CODES:
                fail(str(e), "`owlclaw approvals` lists what is still open", EXIT_FAILED)
            if e.code == "invalid_arguments":
                fail(str(e), "`owlclaw approvals` shows the call's arguments", EXIT_USAGE)
            if e.code != "unknown_approval":  # not one of the served agents': the ledger
                raise
    with open_ledger(config) as (_, led):
        try:
            agent = agent_of(led, decision.approval_id, led.agent_ids())
            tools = app_tools(led, agent, config.runtime.app_load_timeout_s, config.workspaces_path)
            return answer_directly(led, agent, decision, tools), "ledger"
        except UnknownApproval as e:
            fail(str(e), "`owlclaw approvals` lists the pending ones", EXIT_NOT_FOUND)
        except InvalidAnswer as e:
            fail(str(e), QUESTION_HINT, EXIT_USAGE)
        except ApprovalClosed as e:
            fail(str(e), "`owlclaw approvals` lists what is still open", EXIT_FAILED)
        except ToolArgumentsInvalid as e:
            fail(str(e), "`owlclaw approvals` shows the call's arguments", EXIT_USAGE)


def _report(
    answered: tuple[ApprovalAnswer, str], shown: _Shown, as_json: bool, text: str | None = None
) -> None:
    """``text``: a question's answer, as given."""
    answer, via = answered
    if as_json:
        print_json({**_fields(answer), "via": via})
        return
    kind = "call" if text is None else "question"
    out.print(
        f"{shown.tool} {_asked(kind, shown.arguments)} (digest {shown.digest})",
        highlight=False,
        markup=False,
    )
    if answer.status == "pending":
        out.print(
            f"[yellow]granted[/] approval {answer.approval_id} as {len(answer.granted_by)} of"
            f" {answer.approvals_required} approvers ({', '.join(answer.granted_by)}): the run"
            " stays parked until another approver grants it",
            highlight=False,
        )
        return
    how = (
        "the agent's server: the run resumes now"
        if via == "server"
        else ("the ledger directly: the run resumes when a host next activates the agent")
    )
    what = f"{answer.status}[/] approval" if text is None else "answered[/] question"
    out.print(
        f"[green]{what} {answer.approval_id} of {answer.agent_id} "
        f"(run {answer.run_id}) at log position {answer.position}, through {how}",
        highlight=False,
    )


def _fields(value: "PendingApproval | ApprovalAnswer") -> dict[str, Any]:
    fields: dict[str, Any] = msgspec.to_builtins(value)
    return fields
