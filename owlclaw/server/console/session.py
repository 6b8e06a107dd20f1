"""The console's session cookie: who logged in, without their token.

The cookie is ``<sha256 of the token>.<HMAC-SHA256 of that digest>``, keyed by a secret derived
from the server's token. It is no bearer token (the webhook wants the token itself); the ledger's
copies of the digests forge none (the MAC needs the server's token); and each request looks the
digest up again, so a session ends as soon as its principal is revoked or its token rotated, and
every session when the server's token changes. Being stateless, sessions survive a restart.
"""

from __future__ import annotations

import hashlib
import hmac

from owlclaw.access.tokens import token_sha256

CONTEXT = b"owlclaw console session"


def session_key(server_token: str) -> bytes:
    """The key sessions are signed with: the server's token's, never the token itself."""
    return hmac.new(server_token.encode(), CONTEXT, hashlib.sha256).digest()


def _mac(key: bytes, digest: str) -> str:
    return hmac.new(key, digest.encode(), hashlib.sha256).hexdigest()


def issue(key: bytes, token: str) -> str:
    """The cookie value of a session opened with ``token``."""
    digest = token_sha256(token)
    return f"{digest}.{_mac(key, digest)}"


def token_digest(key: bytes, cookie: str) -> str | None:
    """The token digest a cookie this key signed names; None for any other value."""
    digest, dot, mac = cookie.partition(".")
    if not dot or not mac.isascii():
        return None
    return digest if hmac.compare_digest(mac.encode(), _mac(key, digest).encode()) else None
