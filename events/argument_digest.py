"""The digest that binds an approval to the exact arguments a person was shown.

Its own module because the Agent stream records it (ApprovalRequested, ApprovalGranted), the
runtime checks a call against it before executing, and every client that answers an approval
sends it back: one definition, so the three cannot drift apart."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import msgspec


def arguments_digest(arguments: Mapping[str, Any]) -> str:
    """sha256 (lowercase hex) of the arguments as canonical JSON: keys sorted at every level,
    no whitespace, UTF-8; so the same arguments give the same digest whatever their order."""
    return hashlib.sha256(msgspec.json.encode(arguments, order="sorted")).hexdigest()
