"""What the GenAI conventions want of a model call, from what litellm takes and gives: the
provider's name (``gen_ai.provider.name``) and, when content is captured, the messages in the
conventions' form (a role and typed parts; ``gen_ai.input.messages``/``output.messages``)."""

from __future__ import annotations

from typing import Any

PROVIDERS = {
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "bedrock": "aws.bedrock",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "vertex_ai": "gcp.vertex_ai",
    "watsonx": "ibm.watsonx.ai",
    "xai": "x_ai",
}
"""litellm's provider prefixes whose conventional name differs (openai, anthropic, cohere,
groq, deepseek, perplexity are the same in both)."""


def provider_of(model: str) -> str | None:
    """The provider a litellm model name routes to by its prefix (``openai/gpt-4o``: openai);
    None for a bare name (litellm guesses those from its model list)."""
    prefix, slash, _ = model.partition("/")
    return PROVIDERS.get(prefix, prefix) if slash else None


def input_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [_message(m) for m in messages]


def output_messages(message: dict[str, Any], finish_reason: str | None) -> list[dict[str, Any]]:
    return [{**_message(message), "finish_reason": finish_reason or ""}]


def _message(message: dict[str, Any]) -> dict[str, Any]:
    """One chat message (OpenAI's form) as a role and its parts: text, tool calls, or a tool's
    response."""
    role = message.get("role", "assistant")
    parts: list[dict[str, Any]] = []
    content = message.get("content")
    if role == "tool":
        parts.append(
            {"type": "tool_call_response", "id": message.get("tool_call_id"), "response": content}
        )
    elif isinstance(content, str) and content:
        parts.append({"type": "text", "content": content})
    elif isinstance(content, list):
        parts += [
            {"type": "text", "content": p.get("text", "")}
            for p in content
            if isinstance(p, dict) and p.get("type") == "text"
        ]
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        parts.append(
            {
                "type": "tool_call",
                "id": call.get("id"),
                "name": function.get("name"),
                "arguments": function.get("arguments"),
            }
        )
    return {"role": role, "parts": parts}
