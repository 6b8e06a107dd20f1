"""What an MCP tool's result becomes: the value the model is told and the ledger records, or
the structured error the model sees when the server reports one (``isError``).

Text is kept as text and ``structuredContent`` as it is. Images, audio and binary resources
are recorded by what identifies them (type, MIME type, sha256, size) and whether their bytes
were kept in the ledger's blob store (``stored``), never inline: the ledger keeps what the
model saw, and a base64 image is neither readable to it nor worth an event's space. The tool
stores the ``payloads`` ``within`` the ledger cap before its outcome is recorded, so a
``stored`` reference never dangles.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from owlclaw.tools.errors import ToolError

TOOL_ERROR = "TOOL_ERROR"
"""The code of an error the server's tool reported (``isError``): the model's to act on."""
OCTET_STREAM = "application/octet-stream"
"""The media type of a binary resource whose server gave none."""


@dataclass(frozen=True)
class Payload:
    """The bytes of an image, audio block or binary resource: what the blob store keeps."""

    data: bytes
    media_type: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def payloads(result: types.CallToolResult) -> list[Payload]:
    """The result's images, audio and binary resources, in order (none for an error)."""
    if result.is_error:
        return []
    found = []
    for content in result.content:
        match content:
            case types.ImageContent() | types.AudioContent():
                found.append(Payload(decoded(content.data), content.mime_type))
            case types.EmbeddedResource(resource=types.BlobResourceContents() as resource):
                found.append(Payload(decoded(resource.blob), resource.mime_type or OCTET_STREAM))
    return found


def within(found: Sequence[Payload], cap: int) -> list[Payload]:
    """The distinct payloads, in order, while their sizes together fit ``cap`` bytes (the
    ledger cap): the first that does not fit and those after it are recorded by digest only."""
    kept: dict[str, Payload] = {}
    total = 0
    for payload in found:
        if payload.sha256 in kept:
            continue
        total += len(payload.data)
        if total > cap:
            break
        kept[payload.sha256] = payload
    return list(kept.values())


def converted(result: types.CallToolResult, stored: Container[str] = frozenset()) -> Any:
    """The result as the model is told it (text alone when there is only text), or a
    ToolError carrying the server's text when the tool reported an error. ``stored``: the
    sha256 of the payloads the blob store holds."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    if result.is_error:
        message = "\n".join(texts) or "the tool reported an error without a message"
        return ToolError(error=message, error_code=TOOL_ERROR)
    others = [block(b, stored) for b in result.content if not isinstance(b, types.TextContent)]
    if result.structured_content is None and not others:
        return "\n".join(texts)
    value: dict[str, Any] = {}
    if texts:
        value["text"] = "\n".join(texts)
    if result.structured_content is not None:
        value["structured"] = result.structured_content
    if others:
        value["content"] = others
    return value


def block(content: types.ContentBlock, stored: Container[str]) -> dict[str, Any]:
    """A content block other than text, as recorded."""
    match content:
        case types.ImageContent() | types.AudioContent():
            kept = {"type": content.type, "mimeType": content.mime_type}
            return kept | digest(content.data, stored)
        case types.ResourceLink():
            link = {"type": "resource_link", "uri": content.uri, "name": content.name}
            return link | ({"mimeType": content.mime_type} if content.mime_type else {})
        case types.EmbeddedResource():
            resource = content.resource
            kept = {"type": "resource", "uri": resource.uri}
            if resource.mime_type:
                kept["mimeType"] = resource.mime_type
            if isinstance(resource, types.TextResourceContents):
                return kept | {"text": resource.text}
            return kept | digest(resource.blob, stored)
    return {"type": str(getattr(content, "type", "unknown"))}


def digest(data: str, stored: Container[str]) -> dict[str, Any]:
    """The sha256 and size of base64 data, and whether the blob store holds its bytes."""
    raw = decoded(data)
    sha256 = hashlib.sha256(raw).hexdigest()
    return {"sha256": sha256, "bytes": len(raw), "stored": sha256 in stored}


def decoded(data: str) -> bytes:
    """The bytes of base64 data (its text when it is not valid base64)."""
    try:
        return base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        return data.encode()
