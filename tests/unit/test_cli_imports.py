"""What any ``owlclaw`` command loads before it runs: its commands' modules, not the ledger's
database driver, the views, the HTTP client, the model or the cluster (a reading command asks a
running server and imports those only when it needs them)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("psycopg", "projections", "httpx", "litellm", "ray", "onnxruntime", "numpy", "asyncio")


def imported_after(code: str) -> list[str]:
    probe = (
        f"import json, sys; {code}; "
        f"print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=120
    )
    names: list[str] = json.loads(done.stdout)
    return names


def test_the_command_line_loads_none_of_the_heavy_packages() -> None:
    assert imported_after("import owlclaw.cli") == []


def test_the_ledger_is_imported_when_first_named() -> None:
    assert "psycopg" not in imported_after("import events")
    assert "psycopg" in imported_after("from events import Ledger")


def test_a_name_the_events_package_does_not_have_is_refused() -> None:
    import events

    with pytest.raises(AttributeError, match="no attribute 'Ledgr'"):
        events.Ledgr  # noqa: B018
