"""The approvals page: the pending approvals of the served agents the logged-in principal may
read or answer, answered (approve or deny, with a note; a question with one of its options or
text) as that principal through the agent's writer; the parked run resumes.

Each is named by its id with the unique prefix ``owlclaw approvals`` prints (enough for
``owlclaw approve``) marked, and its times read at a glance, the exact time on hover."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime

from aiohttp import web

from events.agent_state import ApprovalClosed
from events.approvals import MAX_ANSWER_CHARS
from owlclaw.access.authorize import Action, Principal
from owlclaw.messages import Decision
from owlclaw.reports.approvals import PendingApproval, unique_prefixes
from owlclaw.reports.relative_time import relative
from owlclaw.server.console.access import may
from owlclaw.server.console.auth import principal_of
from owlclaw.server.console.flash import redirect_with, shown, take_flash
from owlclaw.server.console.render import render
from owlclaw.server.service import Service

BACK = "/ui/approvals"
MAX_NOTE = 2000


@dataclass(frozen=True)
class Listed:
    approval: PendingApproval
    prefix: str
    """The shortest prefix no other approval of the served agents starts with."""
    requested: str
    expires: str
    answerable: bool
    """The principal has ``approver`` on its agent."""


def expiry(expires_at: str, now: datetime) -> str:
    """``in 23 h``, or ``expired`` once past (the expiry worker denies it shortly)."""
    return "expired" if datetime.fromisoformat(expires_at) <= now else relative(expires_at, now)


def listing(service: Service, principal: Principal) -> list[Listed]:
    """The pending approvals of the served agents ``principal`` may read (``viewer``) or answer
    (``approver``), oldest first, with their prefixes and times."""
    assert service.ledger is not None
    pending = service.pending_approvals()
    known = [i for a in service.apps for i in service.ledger.load_agent(a).state.approvals]
    short = unique_prefixes([p.approval_id for p in pending], known)
    now = datetime.now(UTC)
    listed = []
    for p in pending:
        answerable = may(principal, Action.ANSWER_APPROVAL, p.agent_id)
        if answerable or may(principal, Action.READ_APPROVALS, p.agent_id):
            requested, expires = relative(p.requested_at, now), expiry(p.expires_at, now)
            listed.append(Listed(p, short[p.approval_id], requested, expires, answerable))
    return listed


def routes(service: Service) -> list[web.RouteDef]:
    async def approvals(request: web.Request) -> web.Response:
        pending = await asyncio.to_thread(listing, service, principal_of(request))
        flash = take_flash(request)
        response = render(
            request,
            "approvals.html",
            pending=pending,
            flash=flash,
            max_note=MAX_NOTE,
            max_answer=MAX_ANSWER_CHARS,
        )
        return shown(response, flash)

    async def answer(request: web.Request) -> web.Response:
        approval_id = request.match_info["approval_id"]
        form = await request.post()
        verdict = form.get("decision")
        if verdict not in ("approve", "deny", "answer"):
            raise redirect_with(BACK, "choose approve or deny", ok=False)
        answer = str(form.get("answer", "")) if verdict == "answer" else None
        note = str(form.get("note", "")).strip()
        if len(note) > MAX_NOTE:
            raise redirect_with(
                BACK, f"not answered: the note is over {MAX_NOTE} characters", ok=False
            )
        digest = str(form.get("digest", ""))  # of the arguments this page showed
        principal = principal_of(request)
        approve = verdict != "deny"
        decision = Decision(approval_id, approve, principal.name, note, None, digest, None, answer)
        try:
            answered = await service.answer_approval(decision, principal)
        except ApprovalClosed as e:  # also an unknown approval
            raise redirect_with(BACK, f"not answered: {e}", ok=False) from e
        status = answered.status if answer is None else f"answered {answer!r} to"
        raise redirect_with(
            BACK, f"{status} {approval_id} as {decision.by}; run {answered.run_id} resumes", ok=True
        )

    return [web.get("/approvals", approvals), web.post("/approvals/{approval_id}", answer)]
