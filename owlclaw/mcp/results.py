"""What an MCP tool's result becomes: the value the model is told and the ledger records, or
the structured error the model sees when the server reports one (``isError``).

Text is kept as text and ``structuredContent`` as it is. Images, audio and binary resources
are recorded by what identifies them (type, MIME type, sha256, size), without their payload:
the ledger keeps what the model saw, and a base64 image is neither readable to it nor worth
the ledger's space.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import mcp_types as types

from owlclaw.tools.errors import ToolError

TOOL_ERROR = "TOOL_ERROR"
"""The code of an error the server's tool reported (``isError``): the model's to act on."""


def converted(result: types.CallToolResult) -> Any:
    """The result as the model is told it (text alone when there is only text), or a
    ToolError carrying the server's text when the tool reported an error."""
    texts = [b.text for b in result.content if isinstance(b, types.TextContent)]
    if result.is_error:
        message = "\n".join(texts) or "the tool reported an error without a message"
        return ToolError(error=message, error_code=TOOL_ERROR)
    others = [block(b) for b in result.content if not isinstance(b, types.TextContent)]
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


def block(content: types.ContentBlock) -> dict[str, Any]:
    """A content block other than text, as recorded."""
    match content:
        case types.ImageContent() | types.AudioContent():
            return {"type": content.type, "mimeType": content.mime_type, **digest(content.data)}
        case types.ResourceLink():
            link = {"type": "resource_link", "uri": content.uri, "name": content.name}
            return link | ({"mimeType": content.mime_type} if content.mime_type else {})
        case types.EmbeddedResource():
            resource = content.resource
            kept: dict[str, Any] = {"type": "resource", "uri": resource.uri}
            if resource.mime_type:
                kept["mimeType"] = resource.mime_type
            if isinstance(resource, types.TextResourceContents):
                return kept | {"text": resource.text}
            return kept | digest(resource.blob)
    return {"type": str(getattr(content, "type", "unknown"))}


def digest(data: str) -> dict[str, Any]:
    """The sha256 and size of base64 data (of its text when it is not valid base64)."""
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raw = data.encode()
    return {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
