"""POST one JSON body at least once: the views that send (approval notices, the outbox) retry
with exponential backoff and jitter (tenacity), and name the body with an ``Idempotency-Key``
header so that a receiver drops what a retry or a crash-and-resend repeats. httpx and tenacity
are imported when a body is sent (0.2 s): ``owlclaw status`` reads these views and sends nothing."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:
    import httpx


@dataclass(frozen=True)
class Delivered:
    status: int
    attempts: int


class Undelivered(Exception):
    """Every attempt failed (or none could be made); names how many and the last error."""

    def __init__(self, attempts: int, error: str):
        super().__init__(f"not delivered after {attempts} attempt(s): {error}")
        self.attempts = attempts
        self.error = error


def post_json(
    url: str,
    body: Mapping[str, Any],
    *,
    idempotency_key: str,
    headers: Mapping[str, str] | None = None,
    timeout_s: float,
    attempts: int,
) -> Delivered:
    """POST ``body`` until a 2xx answer, at most ``attempts`` times; raises Undelivered."""
    import httpx
    from tenacity import (
        Retrying,
        retry_if_exception_type,
        stop_after_attempt,
        wait_exponential_jitter,
    )

    retrying = Retrying(
        stop=stop_after_attempt(attempts),
        wait=wait_exponential_jitter(multiplier=0.2, max=10.0, jitter=0.2),
        retry=retry_if_exception_type(httpx.HTTPError),
        reraise=True,
    )
    sent_headers = {
        **(headers or {}),
        "Content-Type": "application/json",
        "Idempotency-Key": idempotency_key,
    }
    content = msgspec.json.encode(body)
    try:
        with httpx.Client(timeout=timeout_s, trust_env=False) as client:
            for attempt in retrying:
                with attempt:
                    response = client.post(url, content=content, headers=sent_headers)
                    response.raise_for_status()
    except httpx.HTTPError as e:
        raise Undelivered(retrying.statistics["attempt_number"], describe(e)) from e
    return Delivered(response.status_code, retrying.statistics["attempt_number"])


def describe(error: httpx.HTTPError) -> str:
    import httpx

    if isinstance(error, httpx.HTTPStatusError):
        return f"HTTP {error.response.status_code} from {error.request.url}"
    return f"{type(error).__name__}: {error}"
