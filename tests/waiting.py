"""Bounded waiting for something to happen (a ledger event, a status), instead of sleeping."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(check: Callable[[], T], what: str, timeout_s: float = 60.0, poll_s: float = 0.1) -> T:
    """The first truthy result of ``check()``; fails naming ``what`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        time.sleep(poll_s)
    return result


async def await_for(
    check: Callable[[], T], what: str, timeout_s: float = 60.0, poll_s: float = 0.1
) -> T:
    """``wait_for`` for asyncio tests: the event loop runs between checks, and each check runs
    in the loop's thread (a short blocking call), like the code under test."""
    deadline = time.monotonic() + timeout_s
    while not (result := check()):
        assert time.monotonic() < deadline, f"timed out after {timeout_s:g} s waiting for {what}"
        await asyncio.sleep(poll_s)
    return result


def wait_until(what: str, check: Callable[[], T], timeout_s: float = 60) -> T:
    """``wait_for`` with what it waits for first, which reads better before a long check."""
    return wait_for(check, what, timeout_s, poll_s=0.2)
