"""The principal the request being served authenticated as, for code that aiohttp's request does
not reach: the ASGI apps the webhook mounts (MCP, A2A) see only an ASGI scope. The webhook's
guard sets it around the request's handling; tasks started meanwhile (the MCP SDK serves each
request in one) inherit it. Unset, nobody authenticated: a call fails closed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from owlclaw.access.authorize import Principal

_CALLER: ContextVar[Principal] = ContextVar("owlclaw_caller")


class NoCaller(LookupError):
    """Code that acts for a principal ran outside an authenticated request."""


def caller() -> Principal:
    try:
        return _CALLER.get()
    except LookupError:
        raise NoCaller("no authenticated principal: the request did not pass the guard") from None


@contextmanager
def calling_as(principal: Principal) -> Iterator[None]:
    """``principal`` is the caller within the block."""
    token = _CALLER.set(principal)
    try:
        yield
    finally:
        _CALLER.reset(token)
