"""The real components a test needs (PostgreSQL, Ray, Hatchet, a browser, the embedding model):
with ``CI=true`` a missing one is a failure; locally it is a clear skip."""

from __future__ import annotations

import os
import shutil

import pytest

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def missing_component(what: str, why: object) -> None:
    """Fail in CI, skip locally, always naming the component."""
    message = f"{what} is not available: {why}"
    if IN_CI:
        pytest.fail(message)
    pytest.skip(message)


def require_bwrap() -> str:
    """exec's sandbox needs bubblewrap on the host; the path of its ``bwrap``."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        missing_component("bubblewrap (bwrap)", "not on PATH (Debian: apt-get install bubblewrap)")
    assert bwrap is not None
    return bwrap
