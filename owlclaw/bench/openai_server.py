"""A loopback OpenAI-compatible chat completions server for ``owlclaw bench runtime --openai``.

It answers like a model that calls one tool ``steps`` times and then answers: the step is the
number of assistant messages in the request (so it keeps no state per conversation, as the
scripted provider). It notes when each request arrives, per conversation (keyed by the first
user message), in its own clock: a step is the gap between two arrivals of one conversation,
measured the same way whichever client sends them. It runs in a process of its own
(``python -m owlclaw.bench.openai_server``) so that it does not share the client's GIL.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import msgspec
from aiohttp import web

TOOL = "log_decision"
PROMPT_TOKENS, COMPLETION_TOKENS = 100, 20
_LISTENING = "listening on "


class Conversation(msgspec.Struct):
    """What the server saw of one conversation."""

    arrivals: list[float] = []
    """``time.perf_counter()`` in the server when each request arrived, in ms."""
    last_request: dict[str, Any] = {}
    """The latest request body (its messages hold the whole conversation so far)."""


def completion(request: dict[str, Any], steps: int, number: int) -> dict[str, Any]:
    """The chat completion answering ``request``: a call to ``log_decision`` while fewer than
    ``steps`` assistant messages were sent, then a final message."""
    step = sum(1 for m in request.get("messages", []) if m.get("role") == "assistant")
    message: dict[str, Any]
    if step < steps:
        arguments = msgspec.json.encode({"reasoning": f"step {step}", "decision_type": "other"})
        message = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": f"call_{number}",
                    "type": "function",
                    "function": {"name": TOOL, "arguments": arguments.decode()},
                }
            ],
        }
    else:
        message = {"role": "assistant", "content": "done"}
    return {
        "id": f"chatcmpl-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": request.get("model", ""),
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if step < steps else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": PROMPT_TOKENS,
            "completion_tokens": COMPLETION_TOKENS,
            "total_tokens": PROMPT_TOKENS + COMPLETION_TOKENS,
        },
    }


def conversation_key(request: dict[str, Any]) -> str:
    """The conversation a request belongs to: its first user message."""
    users = (m for m in request.get("messages", []) if m.get("role") == "user")
    first: dict[str, Any] = next(users, {})
    return str(first.get("content", ""))


def make_app(steps: int) -> web.Application:
    """The server's routes: ``POST /v1/chat/completions`` and ``GET /bench/conversations``."""
    conversations: dict[str, Conversation] = {}
    answered = 0

    async def chat(request: web.Request) -> web.Response:
        nonlocal answered
        arrived = time.perf_counter() * 1000
        body = msgspec.json.decode(await request.read())
        seen = conversations.setdefault(conversation_key(body), Conversation())
        seen.arrivals.append(arrived)
        seen.last_request = body
        answered += 1
        return web.Response(
            body=msgspec.json.encode(completion(body, steps, answered)),
            content_type="application/json",
        )

    async def seen(_: web.Request) -> web.Response:
        return web.Response(
            body=msgspec.json.encode(conversations), content_type="application/json"
        )

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/bench/conversations", seen)
    return app


async def _serve(steps: int) -> None:
    runner = web.AppRunner(make_app(steps), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"{_LISTENING}http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.Event().wait()


@contextmanager
def serving(steps: int) -> Iterator[str]:
    """The server started in a process of its own; its base URL (``http://127.0.0.1:N/v1``)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "owlclaw.bench.openai_server", "--steps", str(steps)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line.startswith(_LISTENING):
            raise RuntimeError(f"the bench's OpenAI server did not start (it said {line!r})")
        yield line.removeprefix(_LISTENING).strip()
    finally:
        process.terminate()
        process.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, required=True, help="Tool calls before the answer.")
    asyncio.run(_serve(parser.parse_args().steps))


if __name__ == "__main__":
    main()
