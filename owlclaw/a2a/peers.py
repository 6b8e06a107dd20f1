"""Remote A2A agents as tools: ``[a2a.peers.<name>]`` in an app's owlclaw.toml gives the agent a
tool ``a2a__<name>`` that sends one message to that agent (the SDK's ``ClientFactory``, which
resolves its card at ``url``) and returns the remote task: its id, state and answer. The tool
goes through the one tool pipeline (governance, rate limits, write-ahead ToolCallRequested,
time limit, recorded outcome), so the remote task id is in the ledger with the call.

A call is not idempotent: a crash mid-call records ToolOutcomeUnknown, never a second send.
Its message id is the call's idempotency key, so a peer that deduplicates on it (OwlClaw does)
would answer a resend with the same task. Header values (a bearer token) are read from the
environment at call time and never recorded.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlparse

import httpx
import msgspec

from owlclaw.struct_errors import describe
from owlclaw.tools.errors import ToolError
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool, ToolContext

if TYPE_CHECKING:
    from a2a.types import StreamResponse

TOOL_PREFIX = "a2a__"
PEER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,59}$")
"""A peer's tool name must be a valid function name (at most 64 characters with the prefix)."""


class Peer(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    url: str
    """The remote agent's base URL: its card is at ``<url>/.well-known/agent-card.json``."""
    headers_env: dict[str, str] = {}
    """Header name -> the environment variable that holds its value (``Authorization`` ->
    ``PEER_TOKEN``, whose value is ``Bearer ...``)."""
    timeout_s: Annotated[float, msgspec.Meta(gt=0)] = 300.0
    """How long one call may take, the remote run included."""


class A2AConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    peers: dict[str, Peer] = {}


def a2a_peers(config: Mapping[str, Any], source: str = "owlclaw.toml") -> dict[str, Peer]:
    """The ``[a2a]`` table's peers; ValueError naming ``source`` and what is wrong."""
    table = config.get("a2a", {})
    try:
        peers = msgspec.convert(table, A2AConfig).peers
    except msgspec.ValidationError as e:
        raise ValueError(f"{source}: {describe(e, A2AConfig, table, 'a2a')}") from e
    for name, peer in peers.items():
        where = f"{source}: [a2a.peers.{name}]"
        if not PEER_NAME.match(name):
            raise ValueError(f"{where}: a peer name is 1-59 letters, digits, '_' or '-'")
        parsed = urlparse(peer.url)
        if parsed.scheme not in ("http", "https") or not parsed.netloc:
            raise ValueError(f"{where} url: {peer.url!r} is not an http(s) URL")
    return peers


class PeerParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    message: Annotated[
        str, msgspec.Meta(min_length=1, description="What to ask or tell the remote agent.")
    ]


class PeerTool:
    """One remote A2A agent as a tool."""

    def __init__(self, name: str, peer: Peer):
        self.name = name
        self.peer = peer
        self.spec = ToolSpec(
            name=f"{TOOL_PREFIX}{name}",
            description=f"Send a message to the remote agent {name!r} (A2A, {peer.url}) and "
            "get its task back: its id, its state and its answer.",
            params=PeerParams,
            timeout_s=peer.timeout_s,
            category="a2a",
            dangerous=True,
        )

    def headers(self) -> dict[str, str] | ToolError:
        headers = {}
        for header, variable in self.peer.headers_env.items():
            value = os.environ.get(variable)
            if value is None:
                return ToolError(
                    error=f"the environment variable {variable} (header {header} of the A2A "
                    f"peer {self.name!r}) is not set",
                    error_code="A2A_HEADER_MISSING",
                    kind="system",
                )
            headers[header] = value
        return headers

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> dict[str, Any] | ToolError:
        from a2a.client import A2AClientError, ClientConfig, ClientFactory  # slow to import
        from a2a.types import Message, Part, Role, SendMessageRequest

        assert isinstance(params, PeerParams)
        headers = self.headers()
        if isinstance(headers, ToolError):
            return headers
        request = SendMessageRequest(
            message=Message(
                message_id=ctx.idempotency_key,
                role=Role.ROLE_USER,
                parts=[Part(text=params.message)],
            )
        )
        try:
            async with httpx.AsyncClient(headers=headers, timeout=self.peer.timeout_s) as http:
                factory = ClientFactory(ClientConfig(streaming=False, httpx_client=http))
                client = await factory.create_from_url(self.peer.url)
                last: StreamResponse | None = None
                async for response in client.send_message(request):
                    last = response
        except (A2AClientError, httpx.HTTPError) as e:
            return ToolError(
                error=f"the A2A peer {self.name!r} at {self.peer.url} failed: {e}",
                error_code="A2A_PEER_FAILED",
                kind="system",
            )
        if last is None:
            return ToolError(
                error=f"the A2A peer {self.name!r} answered nothing",
                error_code="A2A_PEER_FAILED",
                kind="system",
            )
        return {"peer": self.name, **outcome(last)}


def outcome(response: StreamResponse) -> dict[str, Any]:
    """What a peer's answer comes to: the task's id, context, state and text (the answer
    artifacts when it completed, else its status message), or a direct message's text."""
    from owlclaw.a2a.states import state_name

    if response.HasField("message"):
        message = response.message
        return {
            "task_id": message.task_id,
            "context_id": message.context_id,
            "state": "message",
            "answer": text_of(message.parts),
        }
    task = response.task
    parts = [part for artifact in task.artifacts for part in artifact.parts]
    return {
        "task_id": task.id,
        "context_id": task.context_id,
        "state": state_name(task.status.state),
        "answer": text_of(parts) or text_of(task.status.message.parts),
    }


def text_of(parts: Any) -> str:
    return "\n".join(part.text for part in parts if part.text)


def peer_tools(config: Mapping[str, Any], source: str = "owlclaw.toml") -> dict[str, Tool]:
    """The tools of the app's A2A peers by name (ValueError for an invalid ``[a2a]``)."""
    return {
        f"{TOOL_PREFIX}{name}": PeerTool(name, peer)
        for name, peer in a2a_peers(config, source).items()
    }
