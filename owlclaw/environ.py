"""This process's environment with some variables set for a while, then as it was."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager


@contextmanager
def overlaid(env: Mapping[str, str]) -> Iterator[None]:
    """``os.environ`` with ``env`` over it until the block ends; each variable then gets its
    value back, or goes if it had none."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
