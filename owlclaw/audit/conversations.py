"""Conversations between agents, followed through the ledger (``owlclaw ledger
--conversation``) and their links checked (``owlclaw verify``).

A message is recorded twice: AgentMessageSent on its sender, InboundReceived from
``agent:<sender>`` on its target, which carries the row hash of the sender's call; a reply
(AgentReplyReceived on the sender) carries the row hash of the end of the run that answered.
Checking a link compares that claimed hash with the row it names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from uuid import UUID

from events import Ledger, UnknownAgent
from events import catalog as ev
from events.hashchain import LinkProblem
from owlclaw.tools.agent_mail import SOURCE_PREFIX

Claim = tuple[str, str, UUID, int, str]
"""(where it is recorded, the agent whose row it names, that row's stream, version, hash)."""
_NOWHERE = UUID(int=0)
"""The stream a message that names no row claims (no stream has this id)."""


@dataclass(frozen=True)
class Said:
    """One message or reply of a conversation, as its agents recorded it."""

    at: datetime
    kind: str
    """``message``, ``reply``, or ``no reply`` (the sender's deadline passed)."""
    from_agent: str
    to_agent: str
    text: str
    message_id: str
    link: str
    """``ok``, what is wrong with its link, or ``-`` (a no-reply has none)."""


def _claims(agent_id: str, events: Iterable[ev.LedgerEvent]) -> list[Claim]:
    """The links the agent's stream claims. An inbound event from ``agent:...`` that is not
    what send_to_agent records (posted to the webhook under that source) claims a link to no
    row, so it is reported."""
    claims: list[Claim] = []
    for e in events:
        where = f"agent {agent_id} version {e.originator_version}"
        if isinstance(e, ev.InboundReceived) and e.source.startswith(SOURCE_PREFIX):
            p: dict[str, Any] = e.payload
            try:
                stream, version = UUID(str(p["from_run_id"])), int(p["request_version"])
                claim = (where, str(p["from_agent_id"]), stream, version, str(p["request_hash"]))
            except (KeyError, TypeError, ValueError):
                claim = (where, e.source.removeprefix(SOURCE_PREFIX), _NOWHERE, 0, "")
            claims.append(claim)
        elif isinstance(e, ev.AgentReplyReceived) and e.from_run_id is not None:
            claims.append((where, e.from_agent_id, e.from_run_id, e.reply_version, e.reply_hash))
    return claims


def check_links(ledger: Ledger, agent_ids: Iterable[str]) -> tuple[int, list[LinkProblem]]:
    """How many links the agents' streams claim, and those that do not hold."""
    claims = [c for a in agent_ids for c in _claims(a, ledger.stream(_stream(ledger, a)))]
    stored = ledger.chains.event_hashes([(stream, version) for _, _, stream, version, _ in claims])
    problems = []
    for where, agent, stream, version, claimed in claims:
        found = stored.get((stream, version))
        if found is None or found.hex() != claimed:
            names = f"agent {agent} run {stream} version {version}"
            problems.append(LinkProblem(where, names, claimed, found.hex() if found else None))
    return len(claims), problems


def _stream(ledger: Ledger, agent_id: str) -> UUID:
    return ledger.load_agent(agent_id).id


def conversation(ledger: Ledger, agent_id: str) -> list[Said]:
    """Every message and reply between ``agent_id`` and the agents it talked with, and theirs
    with others, following the messages from agent to agent; oldest first. A message shows the
    state of its link as its target recorded it (``not delivered``: the target has no record)."""
    seen: set[str] = set()
    todo = [agent_id]
    replies: list[Said] = []
    sent: dict[str, tuple[str, ev.AgentMessageSent]] = {}
    received: dict[str, Said] = {}
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        try:
            events = ledger.stream(_stream(ledger, current))
        except UnknownAgent:
            continue
        broken = {p.where for p in check_links(ledger, [current])[1]}
        for e in events:
            link = "BROKEN" if f"agent {current} version {e.originator_version}" in broken else "ok"
            if isinstance(e, ev.AgentMessageSent):
                sent[e.message_id] = (current, e)
                todo.append(e.to_agent_id)
            elif isinstance(e, ev.InboundReceived) and e.source.startswith(SOURCE_PREFIX):
                sender = e.source.removeprefix(SOURCE_PREFIX)
                message_id = str(e.payload.get("message_id", ""))
                text = str(e.payload.get("text", ""))
                received[message_id] = Said(
                    e.timestamp, "message", sender, current, text, message_id, link
                )
                todo.append(sender)
            elif isinstance(e, ev.AgentReplyReceived):
                todo.append(e.from_agent_id)
                answered = e.from_run_id is not None
                kind, link = ("reply", link) if answered else ("no reply", "-")
                replies.append(
                    Said(e.timestamp, kind, e.from_agent_id, current, e.reply, e.message_id, link)
                )
    said = replies + [r for m, r in received.items() if m not in sent]
    for message_id, (sender, m) in sent.items():
        delivered = received.get(message_id)
        link = delivered.link if delivered is not None else "not delivered"
        said.append(Said(m.timestamp, "message", sender, m.to_agent_id, m.text, message_id, link))
    return sorted(said, key=lambda s: s.at)
