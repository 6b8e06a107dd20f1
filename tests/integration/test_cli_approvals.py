"""Approvals as an operator answers them: `owlclaw approvals` / `approve` / `deny` and the
webhook, against `owlclaw run` on the embedded default."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from owlclaw.bench import free_port
from tests.apps import make_app
from tests.cli import owlclaw, owlclaw_json, start_run, user_env
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-serve")]

HANDLERS = """
from pathlib import Path
from owlclaw import Registry

registry = Registry()


@registry.capability("Place an order.")
def place_order(symbol: str, amount: float) -> dict:
    with Path(__file__).with_name("orders.txt").open("a") as f:
        f.write(f"{symbol} {amount}\\n")
    return {"placed": symbol, "amount": amount}
"""
SCRIPT = {
    "steps": [
        {"tool_calls": [{"name": "place_order", "arguments": {"symbol": "ACME", "amount": 5000}}]}
    ],
    "final": "done",
}


def stop(server: subprocess.Popen[str]) -> None:
    server.send_signal(signal.SIGTERM)
    server.wait(60)


def statuses(env: dict[str, str], cwd: Path) -> dict[str, str]:
    """Run id -> how it stands, from the agent's runs in `owlclaw ledger --json`."""
    events = owlclaw_json(env, "ledger", "trader", "--all", cwd=cwd)["events"]
    runs: dict[str, str] = {}
    for e in events:
        if e["stream"] != events[0]["stream"]:
            runs[e["stream"]] = e["type"]
    return runs


def test_parked_answered_from_the_cli_with_the_server_killed_and_through_the_webhook(
    tmp_path: Path,
) -> None:
    """On shared placement: an error an agent's host raises in its Ray actor (the second
    answer's ApprovalClosed) reaches the CLI and the webhook as itself, in one line."""
    env = user_env(
        tmp_path / ".owlclaw",
        free_port(),
        OWLCLAW_PLACEMENT="shared",
        OWLCLAW_HOSTS="1",
        OWLCLAW_SERVER_TOKEN="t",
    )
    app = make_app(
        tmp_path / "trader",
        config='[agent]\nmodels = ["scripted/order"]\n\n'
        '[governance]\nask_if = { place_order = "amount > 1000" }\n',
    )
    (app / "handlers.py").write_text(HANDLERS)
    (app / "scripts").mkdir()
    (app / "scripts" / "order.json").write_text(json.dumps(SCRIPT))
    orders = app / "orders.txt"

    server, log = start_run(env, tmp_path, "trader")
    try:
        assert server.poll() is None, log.read_text()
        parked = owlclaw_json(env, "trigger", "trader", cwd=tmp_path)
        assert parked["status"] == "parked", parked
        [waiting] = owlclaw_json(env, "approvals", cwd=tmp_path)
        assert waiting["tool"] == "place_order" and waiting["served"] is True
        assert waiting["arguments"] == {"symbol": "ACME", "amount": 5000.0}
        assert_listed_in_80_columns(env, tmp_path, waiting["approval_id"])
        server.kill()  # the host dies while the run is parked (its PostgreSQL is adopted next)
        server.wait()
    finally:
        if server.poll() is None:
            server.kill()
    assert not orders.exists()

    prefix = waiting["approval_id"][:8]  # as `owlclaw approvals` prints it
    approved = owlclaw_json(env, "approve", prefix, "--note", "ok", cwd=tmp_path)
    assert approved["via"] == "ledger" and approved["status"] == "granted"
    assert approved["approval_id"] == waiting["approval_id"]

    server, log = start_run(env, tmp_path, "trader")
    try:
        assert server.poll() is None, log.read_text()
        run = parked["run_id"]
        wait_for(lambda: statuses(env, tmp_path)[run] == "RunCompleted", "the resumed run", 120)
        assert orders.read_text() == "ACME 5000.0\n"  # once, on the restarted host
        assert_answered_again_in_one_line(env, tmp_path, waiting["approval_id"])

        second = owlclaw_json(env, "trigger", "trader", cwd=tmp_path)
        assert second["status"] == "parked"
        [other] = owlclaw_json(env, "approvals", "trader", cwd=tmp_path)
        answers = [
            answer(env, other["approval_id"], other["digest"], note="not today") for _ in range(2)
        ]
        assert answers[0][0] == 200 and answers[0][1]["status"] == "denied"
        assert answers[1][0] == 409 and answers[1][1]["code"] == "approval_closed"
        assert "\n" not in answers[1][1]["error"], answers[1][1]["error"]
        assert answer(env, "no-such-approval", "")[0] == 404
        wait_for(
            lambda: statuses(env, tmp_path)[second["run_id"]] == "RunCompleted", "denied run", 60
        )
        assert orders.read_text() == "ACME 5000.0\n"  # the denied call never ran
        stop(server)
    finally:
        if server.poll() is None:
            server.kill()


def assert_answered_again_in_one_line(env: dict[str, str], cwd: Path, approval_id: str) -> None:
    """A second answer is refused in an error line and a hint: the host's ApprovalClosed, not
    the Ray actor's traceback around it."""
    again = owlclaw(env, "approve", approval_id, cwd=cwd)
    assert again.returncode == 1 and "already granted" in again.stderr
    assert len(again.stderr.strip().splitlines()) == 2, again.stderr
    assert "ray::" not in again.stderr and "Traceback" not in again.stderr


def assert_listed_in_80_columns(env: dict[str, str], cwd: Path, approval_id: str) -> None:
    """`owlclaw approvals` at 80 columns: the id a user copies (a unique prefix) is whole, the
    expiry reads at a glance."""
    table = owlclaw(env | {"COLUMNS": "80"}, "approvals", cwd=cwd).stdout
    assert max(len(line) for line in table.splitlines()) <= 80, table
    assert f"│ {approval_id[:8]} " in table, table
    assert "in 23 h" in table or "in 1 d" in table, table


def answer(env: dict[str, str], approval_id: str, digest: str, note: str = "") -> tuple[int, Any]:
    response = httpx.post(
        f"http://127.0.0.1:{env['OWLCLAW_SERVER_PORT']}/approvals/{approval_id}",
        json={"decision": "deny", "by": "risk-desk", "note": note, "digest": digest},
        headers={"Authorization": "Bearer t"},
        trust_env=False,
        timeout=30,
    )
    return response.status_code, response.json()
