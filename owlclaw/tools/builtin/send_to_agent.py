"""send_to_agent: a message to another agent of the deployment, through that agent's own
writer; with ``expect_reply`` the run parks (durably, like a sub-agent wait) until the answer
of the run the message started comes back, or the reply deadline passes (``NO_REPLY``).

An agent has the tool only when its ``[governance] message_agents`` names the agents (globs) it
may message; any other target is refused, as is an agent that does not exist, and a message
that would exceed ``message_max_hops`` messages in a chain (loops between agents end there).
The message id comes from the call's idempotency key, so a resumed call delivers the same
message, which its target does not accept twice.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Annotated, Any

import msgspec

from events import catalog as ev
from events.agent_state import NO_REPLY
from events.streams import now
from owlclaw.app import AGENT_ID
from owlclaw.messages import AgentMessage
from owlclaw.tools.builtin.params import Params
from owlclaw.tools.errors import Parked, ToolError
from owlclaw.tools.governance import Governance
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

NAME = "send_to_agent"
MAX_MESSAGE_CHARS = 4000


class SendToAgent(Params):
    agent_id: Annotated[
        str,
        msgspec.Meta(
            pattern=AGENT_ID.pattern, description="The agent to message (one you may message)"
        ),
    ]
    message: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=MAX_MESSAGE_CHARS,
            description=f"What to tell it (at most {MAX_MESSAGE_CHARS} characters)",
        ),
    ]
    expect_reply: Annotated[
        bool,
        msgspec.Meta(
            description="Wait for its reply (the answer of the run your message starts) as the "
            "result; false: send and go on"
        ),
    ] = False


def message_id_for(idempotency_key: str) -> str:
    """The call's message id: the same call, also resumed after a crash, sends the same one."""
    return str(uuid.uuid5(uuid.UUID(idempotency_key), NAME))


def _error(message: str, code: str, **kind: Any) -> ToolError:
    return ToolError(error=message, error_code=code, **kind)


@dataclass(frozen=True)
class SendToAgentTool:
    spec: ToolSpec
    governance: Governance

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        assert isinstance(params, SendToAgent)
        scope, message_id = ctx.scope, message_id_for(ctx.idempotency_key)
        awaited = scope.agent.state.replies.get(message_id)
        if awaited is None:
            sent = await self._send(params, ctx, message_id)
            if isinstance(sent, ToolError) or not params.expect_reply:
                return sent
            awaited = scope.agent.state.replies[message_id]
        if not awaited.answered:
            scope.run.record(ev.RunParked, call_id=ctx.call_id, message_id=message_id)
            raise Parked(message_id)
        if awaited.status == NO_REPLY:
            return _error(
                f"agent {params.agent_id!r} did not reply within "
                f"{self.governance.reply_timeout_s:g} s",
                "NO_REPLY",
                kind="timeout",
            )
        assert scope.mail is not None
        reply = await scope.mail.reply(scope.agent, awaited.reply_version)
        return {
            "agent_id": params.agent_id,
            "message_id": message_id,
            "status": reply.status,
            "reply": reply.reply,
        }

    async def _send(self, params: SendToAgent, ctx: ToolContext, message_id: str) -> Any:
        """Check the target and the hop count, deliver, and record AgentMessageSent."""
        scope, target, rules = ctx.scope, params.agent_id, self.governance
        if scope.mail is None:
            return _error("messages to agents need a host (owlclaw run)", "MESSAGING_UNAVAILABLE")
        if not rules.may_message(target):
            return _error(
                f"you may not message agent {target!r}: [governance] message_agents allows "
                f"{', '.join(rules.message_agents)}",
                "AGENT_NOT_ALLOWED",
            )
        if not await scope.mail.exists(target):
            return _error(f"there is no agent {target!r}", "UNKNOWN_AGENT")
        hops, version, request_hash = await scope.mail.origin(scope.agent, ctx.run_id, ctx.call_id)
        if hops + 1 > rules.message_max_hops:
            return _error(
                f"this message would be number {hops + 1} in a chain of messages between "
                f"agents; at most {rules.message_max_hops} ([governance] message_max_hops)",
                "HOP_LIMIT",
            )
        to_run = await scope.mail.send(
            AgentMessage(
                agent_id=target,
                message_id=message_id,
                from_agent_id=ctx.agent_id,
                from_run_id=ctx.run_id,
                call_id=ctx.call_id,
                request_version=version,
                request_hash=request_hash,
                text=params.message,
                expect_reply=params.expect_reply,
                hops=hops + 1,
            )
        )
        timeout = timedelta(seconds=rules.reply_timeout_s)
        scope.agent.record(
            ev.AgentMessageSent,
            message_id=message_id,
            run_id=ctx.run_id,
            call_id=ctx.call_id,
            to_agent_id=target,
            text=params.message,
            expect_reply=params.expect_reply,
            hops=hops + 1,
            request_version=version,
            request_hash=request_hash,
            reply_by=now() + timeout if params.expect_reply else None,
            to_run_id=to_run,
        )
        return {
            "agent_id": target,
            "message_id": message_id,
            "status": "sent",
            "run_id": str(to_run) if to_run else None,
            "hops": hops + 1,
        }


def agent_message_tools(governance: Governance) -> dict[str, Tool]:
    """send_to_agent when governance names agents it may message; else nothing."""
    if not governance.message_agents:
        return {}
    spec = ToolSpec(
        NAME,
        "Send a message to another agent ("
        f"{', '.join(governance.message_agents)}); with expect_reply you wait for its reply, "
        "the answer of the run your message starts.",
        SendToAgent,
        idempotent=True,  # one message id per call: a resumed call sends it again, accepted once
        parallel_safe=False,  # messages go out in the order the model wrote them
        timeout_s=60.0,
        category="agents",
    )
    return {NAME: SendToAgentTool(spec, governance)}
