"""With `owlclaw run` up, `memory --recall`, `replay --verify` and the reading commands are the
server's work: the CLI process imports neither the embedding model, the runtime nor the
database driver, answers as it would alone, and the server enforces its token and roles; with
no server there, the same commands do the work themselves."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from events import Ledger
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.bench import free_port
from owlclaw.bench.cli import AGENT, MEMORIES, QUERY, served_env, write_app
from owlclaw.client import ServerClient, ServerRefused
from owlclaw.config import OwlClawConfig, ServerConfig
from owlclaw.database import Database
from tests.cli import start_run, stop_run

pytestmark = pytest.mark.integration

EMBEDDER = "onnxruntime"
"""What the local embedding model imports (projections.embedders)."""
RUNTIME = "owlclaw.runtime.agent_runtime"
"""What verifying a run imports."""
DRIVER = "psycopg"
"""What reading the ledger in the CLI's own process imports."""
READS = [
    ["ledger", AGENT],
    ["runs", AGENT],
    ["schedules"],
    ["approvals"],
    ["memory", AGENT],
    ["explain", AGENT, "1"],
]
"""The reading commands whose answer is the same served or not (``status`` says whether a
server runs)."""


@dataclass
class Setup:
    env: dict[str, str]
    cwd: Path
    server: subprocess.Popen[str]
    tokens: dict[str, str]
    """A principal's token by name."""


def owlclaw(setup: Setup, *args: str, token: str | None = None) -> subprocess.CompletedProcess[str]:
    """``owlclaw ARGS`` in a new process whose imports are listed on stderr (-X importtime)."""
    env = setup.env | ({"OWLCLAW_TOKEN": token} if token else {})
    return subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "owlclaw", *args],
        env=env,
        cwd=setup.cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def imported(done: subprocess.CompletedProcess[str], module: str) -> bool:
    """Whether the process imported ``module`` (its -X importtime lines name each import)."""
    return any(
        line.rsplit("|", 1)[1].strip() == module
        for line in done.stderr.splitlines()
        if line.startswith("import time:")
    )


def errors(done: subprocess.CompletedProcess[str]) -> str:
    """stderr without the import lines."""
    return "\n".join(line for line in done.stderr.splitlines() if "import time:" not in line)


@pytest.fixture(scope="module")
def setup(db: Database, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    """The bench's agent served, with its 10-step run recorded, and three principals."""
    root = tmp_path_factory.mktemp("served")
    port = free_port()
    env = served_env(db, root / "data", port) | {"HF_HUB_OFFLINE": "1"}
    env.pop("OWLCLAW_TOKEN", None)
    tokens = {}
    with Ledger(db.url) as led:
        store = PrincipalStore(led)
        for name, grant in [
            ("reader", f"viewer:{AGENT}"),
            ("elsewhere", "viewer:other.*"),
            ("approver", "approver"),
        ]:
            _, tokens[name] = store.add(name, [parse_grant(grant)], by="local:test")
    app = write_app(root)
    server, log = start_run(env, root, str(app))
    assert server.poll() is None, log.read_text()
    config = OwlClawConfig(data_dir=str(root / "data"), server=ServerConfig(port=port))
    with ServerClient(config) as client:
        client.wait_ready(120)
        client.submit(AGENT, None, {}, wait=True)
    try:
        yield Setup(env, root, server, tokens)
    finally:
        stop_run(server)


def test_recall_is_the_servers(setup: Setup) -> None:
    done = owlclaw(setup, "memory", AGENT, "--recall", QUERY, "--limit", "3", "--json")
    assert done.returncode == 0, errors(done)
    recalled = json.loads(done.stdout)["recall"]
    assert recalled["query"] == QUERY
    assert len(recalled["memories"]) == 3
    assert all(m["content"].startswith("Lesson") for m in recalled["memories"])
    assert not imported(done, EMBEDDER)  # ranked by the server's embedder
    text = owlclaw(setup, "memory", AGENT, "--recall", QUERY)
    assert text.returncode == 0 and f"{AGENT} recalls" in text.stdout


def test_verify_is_the_servers(setup: Setup) -> None:
    done = owlclaw(setup, "replay", AGENT, "1", "--verify", "--json")
    assert done.returncode == 0, errors(done)
    report = json.loads(done.stdout)["verify"]
    assert report["matched"] is True and report["compared"] > 10
    assert not imported(done, RUNTIME) and not imported(done, "litellm")
    text = owlclaw(setup, "replay", AGENT, "1", "--verify")
    assert text.returncode == 0 and "replay matches" in text.stdout


def test_a_principal_needs_its_role_on_the_agent(setup: Setup) -> None:
    reader = setup.tokens["reader"]
    assert owlclaw(setup, "memory", AGENT, "--recall", QUERY, token=reader).returncode == 0
    assert owlclaw(setup, "replay", AGENT, "1", "--verify", token=reader).returncode == 0
    for name, role in [("elsewhere", "viewer"), ("approver", "viewer")]:
        for args in (["memory", AGENT, "--recall", QUERY], ["replay", AGENT, "1", "--verify"]):
            refused = owlclaw(setup, *args, token=setup.tokens[name])
            assert refused.returncode == 7, errors(refused)
            assert f"needs role {role} on agent '{AGENT}'" in errors(refused)
            assert not imported(refused, EMBEDDER)  # refused, not redone here
    unknown = owlclaw(setup, "memory", AGENT, "--recall", QUERY, token="not-a-token")
    assert unknown.returncode == 7 and "wrong bearer token" in errors(unknown)


def test_unknown_agent_and_run_as_without_a_server(setup: Setup, db: Database) -> None:
    served = owlclaw(setup, "memory", "nobody", "--recall", QUERY)
    no_run = owlclaw(setup, "replay", AGENT, "9", "--verify")
    alone = setup.env | {"OWLCLAW_SERVER_PORT": str(free_port())}
    local = subprocess.run(
        [sys.executable, "-m", "owlclaw", "memory", "nobody", "--recall", QUERY],
        env=alone,
        cwd=setup.cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert served.returncode == local.returncode == 3
    assert "unknown agent 'nobody'" in errors(served)
    assert "unknown agent 'nobody'" in local.stderr
    assert no_run.returncode == 3 and f"agent {AGENT} has no run 9" in errors(no_run)


def test_without_a_server_the_cli_does_the_work(setup: Setup) -> None:
    alone = Setup(
        setup.env | {"OWLCLAW_SERVER_PORT": str(free_port())}, setup.cwd, setup.server, {}
    )
    recalled = owlclaw(alone, "memory", AGENT, "--recall", QUERY, "--json")
    assert recalled.returncode == 0, errors(recalled)
    assert len(json.loads(recalled.stdout)["recall"]["memories"]) == min(5, MEMORIES)
    assert imported(recalled, EMBEDDER)  # its own embedder
    verified = owlclaw(alone, "replay", AGENT, "1", "--verify", "--json")
    assert verified.returncode == 0, errors(verified)
    assert json.loads(verified.stdout)["verify"]["matched"] is True
    assert imported(verified, RUNTIME) and not imported(verified, "litellm")


def alone(setup: Setup) -> Setup:
    """The same database and directory, no server listening."""
    return Setup(setup.env | {"OWLCLAW_SERVER_PORT": str(free_port())}, setup.cwd, setup.server, {})


@pytest.mark.parametrize("args", READS, ids=lambda a: a[0])
def test_a_reading_command_is_the_servers_and_answers_as_alone(
    setup: Setup, args: list[str]
) -> None:
    served = owlclaw(setup, *args, "--json")
    assert served.returncode == 0, errors(served)
    assert not imported(served, DRIVER)  # the server read it
    local = owlclaw(alone(setup), *args, "--json")
    assert local.returncode == 0, errors(local)
    assert imported(local, DRIVER)
    assert json.loads(served.stdout) == json.loads(local.stdout)
    text = owlclaw(setup, *args)
    assert text.returncode == 0 and "Traceback" not in text.stderr, errors(text)


def test_status_is_the_servers(setup: Setup) -> None:
    served = owlclaw(setup, "status", "--json")
    assert served.returncode == 0, errors(served)
    assert not imported(served, DRIVER)
    report = json.loads(served.stdout)
    local = json.loads(owlclaw(alone(setup), "status", "--json").stdout)
    assert report["server"]["agents"][AGENT]["runs"] == 1 and local["server"]["running"] is False
    for part in ("database", "registered_agents", "active_runs", "pending_timers"):
        assert report[part] == local[part], part
    assert [p["name"] for p in report["projections"]] == [p["name"] for p in local["projections"]]
    [agent] = report["agents"]
    assert (agent["agent_id"], agent["runs"], agent["app_error"]) == (AGENT, 1, None)


def test_a_principal_reads_what_its_roles_cover(setup: Setup) -> None:
    reader, elsewhere = setup.tokens["reader"], setup.tokens["elsewhere"]
    for args in (["runs", AGENT], ["ledger", AGENT], ["explain", AGENT, "1"]):
        assert owlclaw(setup, *args, token=reader).returncode == 0
        refused = owlclaw(setup, *args, token=elsewhere)
        assert refused.returncode == 7, errors(refused)
        assert f"needs role viewer on agent '{AGENT}'" in errors(refused)
        assert not imported(refused, DRIVER)  # refused, not read here instead
    listed = owlclaw(setup, "approvals", "--json", token=elsewhere)
    assert listed.returncode == 0 and json.loads(listed.stdout) == []  # none of its agents'
    status = owlclaw(setup, "status", "--json", token=elsewhere)
    assert status.returncode == 0, errors(status)
    assert json.loads(status.stdout)["server"]["agents"] == {}  # filtered by the server
    assert imported(status, DRIVER)  # every agent's counts: not the server's to show it


def test_an_unknown_agent_is_named_with_the_known_ones(setup: Setup) -> None:
    for where in (setup, alone(setup)):
        for args in (["runs", "nobody"], ["ledger", "nobody"], ["approvals", "nobody"]):
            done = owlclaw(where, *args)
            assert done.returncode == 3, errors(done)
            assert "unknown agent 'nobody'" in errors(done)
        runs = owlclaw(where, "runs", "nobody")
        assert f"known agents: {AGENT}" in " ".join(errors(runs).split())
    no_run = owlclaw(setup, "explain", AGENT, "9")
    assert no_run.returncode == 3 and "`owlclaw ledger AGENT` lists its runs" in errors(no_run)


def test_a_number_out_of_range_is_refused(setup: Setup) -> None:
    port = int(setup.env["OWLCLAW_SERVER_PORT"])
    config = OwlClawConfig(data_dir=setup.env["OWLCLAW_DATA_DIR"], server=ServerConfig(port=port))
    with ServerClient(config) as client:
        for ask, said in [
            (lambda: client.runs(AGENT, 1001), "limit '1001': a whole number from 1 to 1000"),
            (lambda: client.ledger(AGENT, 0, 0), "limit '0': a whole number from 1"),
            (lambda: client.manifest(AGENT, 1, 0), "step '0': a whole number from 1"),
            (lambda: client.memory(AGENT, None, 21), "k '21': a whole number from 1 to 20"),
        ]:
            with pytest.raises(ServerRefused) as refused:
                ask()
            assert (refused.value.status, refused.value.code) == (400, "bad_request")
            assert str(refused.value) == said
        assert [r.run_no for r in client.runs(AGENT, 1000).rows] == [1]
