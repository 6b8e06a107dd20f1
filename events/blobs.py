"""The content-addressed blobs of a ledger (``ledger.blobs``): payloads an event refers to by
their sha256 (an MCP tool's image), kept beside the log instead of inside an event.

The key is the bytes' own hash, so the same bytes are stored once, and a reader checks what it
gets back against the key: a blob altered in the database is refused, as an altered event breaks
its stream's hash chain.
"""

from __future__ import annotations

import hashlib
import re

from eventsourcing.persistence import PersistenceError

from events.errors import BlobCorrupted, UnknownBlob
from events.ledger_store import LedgerStore

SHA256 = re.compile(r"^[0-9a-f]{64}$")
"""A blob's key: a sha256 in lowercase hex."""


class LedgerBlobs:
    """Store bytes by their sha256 and read them back, checked."""

    def __init__(self, store: LedgerStore):
        self._store = store

    def put(self, data: bytes, media_type: str) -> str:
        """Store ``data`` (idempotent: bytes already stored stay as they are); its sha256."""
        sha256 = hashlib.sha256(data).hexdigest()
        try:
            self._store.recorder.insert_blob(sha256, media_type, data)
        except PersistenceError as e:
            raise self._store.unavailable(f"cannot store blob {sha256}: {e}") from e
        return sha256

    def get(self, sha256: str) -> tuple[str, bytes]:
        """The media type and bytes stored under ``sha256``: UnknownBlob if there are none,
        BlobCorrupted if they no longer hash to it."""
        if not SHA256.match(sha256):
            raise UnknownBlob(f"{sha256!r} is not a sha256 (64 lowercase hex digits)")
        try:
            found = self._store.recorder.select_blob(sha256)
        except PersistenceError as e:
            raise self._store.unavailable(f"cannot read blob {sha256}: {e}") from e
        if found is None:
            raise UnknownBlob(f"no blob {sha256} in the ledger")
        media_type, data = found
        if hashlib.sha256(data).hexdigest() != sha256:
            raise BlobCorrupted(f"blob {sha256}: its stored bytes no longer hash to it")
        return media_type, data
