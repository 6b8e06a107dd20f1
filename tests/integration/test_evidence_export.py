"""`owlclaw keys init`, `owlclaw export` of a real recorded run, `owlclaw verify --bundle` with
no database to reach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from events import Ledger
from events.streams import agent_stream_id, run_stream_id
from owlclaw.database import Database
from tests.audited_run import record
from tests.cli import owlclaw

pytestmark = pytest.mark.integration


def test_an_exported_run_verifies_offline_and_an_edit_is_named(
    fresh_db: Database, tmp_path: Path
) -> None:
    with Ledger(fresh_db.url) as ledger:
        record(ledger)
        record(ledger)
        run_rows = list(ledger.chains.chain_rows([run_stream_id("audited", 2)]))
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("OWLCLAW_")},
        "OWLCLAW_DATA_DIR": str(tmp_path / "data"),
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
    }
    keys = owlclaw(env, "keys", "init", "--json", cwd=tmp_path)
    assert keys.returncode == 0, keys.stderr
    public = json.loads(keys.stdout)["public_key"]
    again = owlclaw(env, "keys", "init", cwd=tmp_path)
    assert again.returncode == 5 and "a signing key already exists" in again.stderr

    export = subprocess.run(
        [sys.executable, "-m", "owlclaw", "export", "audited", "--run", "2"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert export.returncode == 0, export.stderr
    lines = export.stdout.split(b"\n")[:-1]
    manifest = json.loads(lines[-2])
    streams = [str(agent_stream_id("audited")), str(run_stream_id("audited", 2))]
    assert [s["stream"] for s in manifest["streams"]] == streams
    exported = [json.loads(x) for x in lines[:-2] if json.loads(x)["stream"] == streams[1]]
    assert [(e["version"], e["state"].encode(), e["hash"]) for e in exported] == [
        (r[1], r[3], r[6].hex()) for r in run_rows
    ]
    bundle = tmp_path / "bundle.jsonl"
    bundle.write_bytes(export.stdout)

    offline = {
        k: v for k, v in env.items() if k not in ("OWLCLAW_DATABASE_URL", "OWLCLAW_DATA_DIR")
    }
    offline["OWLCLAW_DATABASE_URL"] = f"postgresql://nobody@/none?host={tmp_path}/no-server"
    ok = owlclaw(offline, "verify", "--bundle", str(bundle), "--pubkey", public, cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert f"ok: {len(lines) - 2} events in 2 streams of audited" in " ".join(ok.stdout.split())

    decision = next(i for i, x in enumerate(lines) if b'"topic":"ToolCallRequested"' in x)
    event = json.loads(lines[decision])
    event["state"] = event["state"].replace('"tool":"', '"tool":"x')  # its arguments are sealed
    lines[decision] = json.dumps(event).encode()
    bundle.write_bytes(b"".join(x + b"\n" for x in lines))
    bad = owlclaw(
        offline, "verify", "--bundle", str(bundle), "--pubkey", public, "--json", cwd=tmp_path
    )
    assert bad.returncode == 1, bad.stderr
    problems = json.loads(bad.stdout)["problems"]
    assert {
        "line": decision + 1,
        "stream": event["stream"],
        "version": event["version"],
        "message": "content does not match its hash (the event was altered)",
    } in [{k: p[k] for k in ("line", "stream", "version", "message")} for p in problems]
