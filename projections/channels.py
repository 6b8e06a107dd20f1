"""How each kind of channel delivers one MessageSent: a function per kind that delivers it once
(with its retries), names it by its message id so the receiver can drop repeats, and returns
Delivered or raises Undelivered. Only ``webhook`` exists so far."""

from __future__ import annotations

import os
from collections.abc import Callable

from events import catalog as ev
from projections.delivery import Delivered, Undelivered, post_json

Deliver = Callable[[ev.MessageSent], Delivered]


def webhook(message: ev.MessageSent) -> Delivered:
    """POST the message as JSON, headers from the environment (read now, never recorded)."""
    missing = sorted(var for var in message.headers_env.values() if not os.environ.get(var))
    if missing:
        raise Undelivered(0, f"environment variable(s) not set: {', '.join(missing)}")
    body = {
        "message_id": message.message_id,
        "agent_id": message.agent_id,
        "run_id": str(message.run_id),
        "channel": message.channel,
        "text": message.text,
        "sent_at": message.timestamp.isoformat(),
    }
    return post_json(
        message.url,
        body,
        idempotency_key=message.message_id,
        headers={name: os.environ[var] for name, var in message.headers_env.items()},
        timeout_s=message.timeout_s,
        attempts=message.attempts,
    )


CHANNELS: dict[str, Deliver] = {"webhook": webhook}


def deliver(message: ev.MessageSent) -> Delivered:
    channel = CHANNELS.get(message.kind)
    if channel is None:
        raise Undelivered(
            0, f"unknown channel kind {message.kind!r} (known: {', '.join(CHANNELS)})"
        )
    return channel(message)
