"""send_message: a run's message to a person or system, through a channel its app configures.

The tool only records MessageSent on the run (committed with the call's outcome); the outbox
view (projections.outbox) delivers it, at least once, named by its message id so the receiver
can drop repeats. So a crash between the commit and the send loses nothing, and a resumed run
that calls again records the same message id. Channels are the ``[tools.channels.<name>]``
tables of the app's owlclaw.toml; header values are named by environment variable, never
written there or in the ledger.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec

from events import catalog as ev
from owlclaw.tools.errors import ToolError
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

MAX_TEXT_CHARS = 4000
EnvName = Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
HeaderName = Annotated[str, msgspec.Meta(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")]


class ChannelConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One ``[tools.channels.<name>]`` table: where and how its messages are delivered."""

    url: Annotated[str, msgspec.Meta(pattern=r"^https?://")]
    """Recorded with every message: no credentials in it (they go in ``headers_env``)."""
    kind: Literal["webhook"] = "webhook"
    headers_env: dict[HeaderName, EnvName] = {}
    """Header name -> NAME of the environment variable holding its value (read at delivery)."""
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 10.0
    """Time limit of one delivery attempt."""
    attempts: Annotated[int, msgspec.Meta(ge=1, le=20)] = 5
    """Tries (exponential backoff with jitter) before MessageDeliveryFailed is recorded."""

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.username is not None or parts.password is not None:
            raise ValueError(
                "the url is recorded with each message: put credentials in headers_env"
            )
        if not parts.hostname:
            raise ValueError(f"the url {self.url!r} names no host")
        if "idempotency-key" in {name.lower() for name in self.headers_env}:
            raise ValueError("Idempotency-Key is set by the outbox (the message id)")


class SendMessage(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    channel: Annotated[
        str, msgspec.Meta(min_length=1, max_length=64, description="Name of a configured channel")
    ]
    text: Annotated[
        str,
        msgspec.Meta(
            min_length=1,
            max_length=MAX_TEXT_CHARS,
            description=f"The message (at most {MAX_TEXT_CHARS} characters)",
        ),
    ]


@dataclass(frozen=True)
class SendMessageTool:
    spec: ToolSpec
    channels: Mapping[str, ChannelConfig]

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        assert isinstance(params, SendMessage)
        channel = self.channels.get(params.channel)
        if channel is None:
            known = ", ".join(sorted(self.channels)) or "none configured"
            return ToolError(
                error=f"unknown channel {params.channel!r}; channels: {known}",
                error_code="UNKNOWN_CHANNEL",
            )
        message_id = message_id_for(ctx.idempotency_key)
        ctx.scope.run.record(
            ev.MessageSent,
            message_id=message_id,
            agent_id=ctx.agent_id,
            run_id=ctx.run_id,
            channel=params.channel,
            kind=channel.kind,
            url=channel.url,
            text=params.text,
            headers_env=dict(channel.headers_env),
            timeout_s=channel.timeout_s,
            attempts=channel.attempts,
        )
        return {"message_id": message_id, "channel": params.channel, "queued": True}


def message_id_for(idempotency_key: str) -> str:
    """The call's message id: the same call (also resumed after a crash) sends the same one."""
    return str(uuid.uuid5(uuid.UUID(idempotency_key), "send_message"))


def message_tools(channels: Mapping[str, ChannelConfig]) -> dict[str, Tool]:
    spec = ToolSpec(
        "send_message",
        "Send a message through one of the configured channels "
        f"({', '.join(sorted(channels)) or 'none configured'}). It is queued and delivered "
        "shortly; the result has its message_id.",
        SendMessage,
        category="message",
        dangerous=True,
        effect_in_ledger=True,
    )
    return {"send_message": SendMessageTool(spec, dict(channels))}
