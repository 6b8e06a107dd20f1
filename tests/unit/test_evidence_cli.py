"""`owlclaw keys init`, `owlclaw verify --bundle` and `owlclaw export`'s key check, with no
database configured or reachable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from events import Ledger
from owlclaw.audit.evidence.export import export_bundle
from owlclaw.audit.evidence.keys import load_key
from owlclaw.cli import app
from tests.sample_run import AGENT_ID, record_sample_run


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    monkeypatch.chdir(tmp_path)
    return {
        "OWLCLAW_DATA_DIR": str(tmp_path / "data"),
        "OWLCLAW_DATABASE_URL": f"postgresql://nobody@/none?host={tmp_path}/no-server",
    }


def test_a_bundle_is_verified_by_the_cli_without_a_database(
    env: dict[str, str], tmp_path: Path
) -> None:
    runner = CliRunner()
    keys = runner.invoke(app, ["keys", "init", "--json"], env=env)
    assert keys.exit_code == 0, keys.output
    printed = json.loads(keys.stdout)
    ledger = Ledger.in_memory()
    record_sample_run(ledger)
    bundle = tmp_path / "bundle.jsonl"
    key = load_key(Path(printed["private_key_path"]))
    bundle.write_bytes(b"".join(export_bundle(ledger, AGENT_ID, [1], key)))

    args = ["verify", "--bundle", str(bundle), "--pubkey", printed["public_key"], "--json"]
    ok = runner.invoke(app, args, env=env)
    assert ok.exit_code == 0, ok.output
    assert json.loads(ok.stdout) | {"problems": []} == {
        "ok": True,
        "agent": AGENT_ID,
        "streams": 2,
        "events": len(bundle.read_bytes().splitlines()) - 2,
        "key_id": printed["key_id"],
        "problems": [],
    }
    bundle.write_bytes(bundle.read_bytes().replace(b"no_action", b"no_action!", 1))
    bad = runner.invoke(app, args[:-1], env=env)
    assert bad.exit_code == 1
    assert "content does not match its hash (the event was altered)" in bad.stdout


def test_export_without_a_signing_key_says_how_to_make_one(env: dict[str, str]) -> None:
    result = CliRunner().invoke(app, ["export", AGENT_ID], env=env)
    assert result.exit_code == 5
    assert "no signing key at" in result.stderr and "owlclaw keys init" in result.stderr
