"""Principals' API tokens: 256 random bits, kept only as their sha256.

A fast hash is enough here, unlike for passwords: a slow KDF protects guessable secrets, and a
token of 256 random bits cannot be guessed at any hashing speed. So a leaked table (or the
ledger, which records the digests) gives no one a token, and each request is authenticated by
one sha256 and one indexed lookup."""

from __future__ import annotations

import hashlib
import secrets

PREFIX = "owl_"
"""Marks an OwlClaw principal's token (in logs, secret scanners)."""


def new_token() -> str:
    """A fresh token, shown once: ``owl_`` and 32 random bytes, URL-safe base64."""
    return PREFIX + secrets.token_urlsafe(32)


def token_sha256(token: str) -> str:
    """What is stored of a token: its sha256, lowercase hex."""
    return hashlib.sha256(token.encode()).hexdigest()
