"""The README's 5-minute tour, command by command, as subprocesses on a fresh data directory:
init, run (Ray actors), trigger, ledger --json, add a capability, memory, schedule, replay;
plus the webhook's own contract and a clean Ctrl-C."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from owlclaw.bench import free_port
from tests.cli import owlclaw, owlclaw_json, runs_of, tools_called, user_env
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray-serve")]

ESCALATE = """

@registry.capability("Escalate a ticket to the on-call engineer.")
def escalate(ticket_id: str) -> dict[str, object]:
    return {"escalated": ticket_id}
"""


class Tour:
    """The user's home with the app, and its `owlclaw run` server, started on demand."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home, self.env = home, env
        self.url = f"http://127.0.0.1:{env['OWLCLAW_SERVER_PORT']}"
        self.server: subprocess.Popen[str] | None = None
        self.starts = 0

    @property
    def log(self) -> Path:
        return self.home / f"run-{self.starts}.log"

    def serve(self) -> Tour:
        """Start `owlclaw run my-agent` unless it serves already (a test may have stopped it)."""
        if self.server is not None and self.server.poll() is None:
            return self
        self.starts += 1
        with self.log.open("w") as log:
            self.server = subprocess.Popen(
                [sys.executable, "-m", "owlclaw", "run", "my-agent"],
                env=self.env,
                cwd=self.home,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
            )
        server = self.server
        wait_for(
            lambda: "serving" in self.log.read_text() or server.poll() is not None,
            "`owlclaw run` to serve",
            timeout_s=180,
        )
        assert server.poll() is None, self.log.read_text()
        return self

    def stop(self) -> None:
        if self.server is not None and self.server.poll() is None:
            self.server.kill()
            self.server.wait()

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return owlclaw(self.env, *args, cwd=self.home)

    def json(self, *args: str) -> Any:
        return owlclaw_json(self.env, *args, cwd=self.home)

    def ledger(self) -> list[dict[str, Any]]:
        events: list[dict[str, Any]] = self.json("ledger", "my-agent", "--all")["events"]
        return events

    def token(self) -> str:
        return (self.home / ".owlclaw" / "server.token").read_text().strip()


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tour]:
    """`owlclaw init my-agent` in a fresh home; its server is stopped after the module."""
    home = tmp_path_factory.mktemp("tour-user")
    env = user_env(home / ".owlclaw", free_port())
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"  # the tour's activated venv
    made = owlclaw(env, "init", "my-agent", cwd=home)
    assert made.returncode == 0, made.stderr
    t = Tour(home, env)
    yield t
    t.stop()


@pytest.fixture
def tour(home: Tour) -> Tour:
    return home.serve()


@pytest.fixture(scope="module")
def first_run(home: Tour) -> subprocess.CompletedProcess[str]:
    """The tour's first run (the app as `init` made it), as `owlclaw trigger` printed it."""
    result = home.serve()("trigger", "my-agent", "--focus", "check the ticket queue")
    assert result.returncode == 0, result.stdout + result.stderr
    return result


@pytest.fixture(scope="module")
def escalating_run(home: Tour, first_run: object) -> dict[str, Any]:
    """After the first run, the user adds a capability to handlers.py: the next run's result."""
    handlers = home.home / "my-agent" / "handlers.py"
    handlers.write_text(handlers.read_text() + ESCALATE)
    run: dict[str, Any] = home.serve().json(
        "trigger", "my-agent", "--focus", "check the ticket queue"
    )
    return run


@pytest.fixture(scope="module")
def scheduling_run(home: Tour, escalating_run: object) -> dict[str, Any]:
    """A run (with today's code) that schedules a follow-up; returned once it is registered."""
    run: dict[str, Any] = home.serve().json("trigger", "my-agent", "--focus", "follow up later")
    [schedule_id] = [
        e["data"]["schedule_id"]
        for e in home.ledger()
        if e["type"] == "ScheduleRequested" and e["data"]["owner_run_id"] == run["run_id"]
    ]
    wait_for(
        lambda: any(
            e["type"] == "ScheduleRegistered" and e["data"]["schedule_id"] == schedule_id
            for e in home.ledger()
        ),
        f"ScheduleRegistered of {schedule_id}",
    )
    return run


def test_init_scaffolds_a_loadable_app(home: Tour) -> None:
    app = home.home / "my-agent"
    for name in ("SOUL.md", "IDENTITY.md", "owlclaw.toml", "handlers.py"):
        assert (app / name).is_file()
    assert (app / "capabilities" / "notify_team" / "SKILL.md").is_file()
    assert (app / "scripts" / "my-agent.json").is_file()
    again = home("init", "my-agent")
    assert again.returncode == 5
    assert "already exists" in again.stderr


def test_trigger_runs_the_agent_and_the_ledger_shows_it(
    tour: Tour, first_run: subprocess.CompletedProcess[str]
) -> None:
    assert "→ notify_team(" in first_run.stdout and "completed:" in first_run.stdout
    started = re.search(r"run (\d+) started by webhook", first_run.stdout)
    assert started, first_run.stdout
    [run] = [
        r for r in runs_of(tour.ledger()).values() if r[0]["data"]["run_no"] == int(started[1])
    ]
    assert run[0]["data"]["trigger"] == "webhook"
    assert run[0]["data"]["focus"] == "check the ticket queue"
    assert tools_called(run) == ["query_state", "notify_team", "remember", "log_decision"]
    notify = next(
        e for e in run if e["type"] == "ToolCallSucceeded" and e["data"]["tool"] == "notify_team"
    )
    assert notify["data"]["result"] == {"sent": True, "urgency": "high", "characters": 58}
    assert run[-1]["type"] == "RunCompleted"


def test_memory_recalls_what_the_run_remembered(tour: Tour, first_run: object) -> None:
    memory = tour.json("memory", "my-agent", "--recall", "ticket queue")
    contents = [m["content"] for m in memory["recall"]["memories"]]
    assert "A queue above 10 tickets with a 40+ minute wait needed a team ping." in contents
    assert memory["warning"] is None
    assert "needed a team ping" in Path(memory["memory_md"]).read_text()


def test_the_server_embeds_through_the_nodes_embedding_actor(tour: Tour, first_run: object) -> None:
    """With agents on Ray, the server's memory projection uses the model the node's hosts share
    (its actor loaded it at start); a second copy in the server would cost ~800 MB."""
    assert tour.server is not None
    maps = Path(f"/proc/{tour.server.pid}/maps").read_text()
    assert "site-packages/ray/" in maps  # the check can see a loaded library
    assert "site-packages/onnxruntime/" not in maps


def test_a_capability_added_to_handlers_is_visible_to_the_next_run(
    tour: Tour, escalating_run: dict[str, Any]
) -> None:
    assert escalating_run["status"] == "completed"
    visible = next(s for s in escalating_run["steps"] if s["type"] == "VisibleToolsResolved")
    assert "escalate" in visible["tools"] and "notify_team" in visible["tools"]
    identities = [e for e in tour.ledger() if e["type"] == "IdentityLoaded"]
    assert len(identities) == 2
    assert identities[0]["data"]["code_sha256"] != identities[1]["data"]["code_sha256"]


def test_schedule_then_replay(tour: Tour, scheduling_run: dict[str, Any]) -> None:
    assert [s["tool"] for s in scheduling_run["steps"] if s["type"] == "ToolCallRequested"] == [
        "schedule_once"
    ]
    schedules = tour.json("schedules", "my-agent")
    assert [(s["focus"], s["status"]) for s in schedules] == [
        ("check the ticket queue", "registered")
    ]
    run_no = next(s["run_no"] for s in scheduling_run["steps"] if s["type"] == "RunStarted")
    replay = tour("replay", "my-agent", str(run_no), "--verify")
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "replay matches" in replay.stdout
    before_escalate = tour("replay", "my-agent", "1", "--verify")  # today's code has one more tool
    assert before_escalate.returncode == 1
    assert "DIFFERS step 2 (VisibleToolsResolved)" in before_escalate.stdout  # as listed
    assert "escalate" in before_escalate.stdout


def test_trigger_without_wait_returns_the_accepted_run(tour: Tour) -> None:
    accepted = tour.json("trigger", "my-agent", "--no-wait", "--payload", '{"ticket": 7}')
    run_id = accepted["run_id"]

    def ledger_once_completed() -> list[dict[str, Any]] | None:
        events = tour.ledger()
        done = any(e["stream"] == run_id and e["type"] == "RunCompleted" for e in events)
        return events if done else None

    ledger = wait_for(ledger_once_completed, f"RunCompleted of run {run_id}")
    [started] = [e for e in ledger if e["stream"] == run_id and e["type"] == "RunStarted"]
    assert started["data"]["payload"] == {"ticket": 7}


def test_webhook_contract(tour: Tour) -> None:
    trigger = f"{tour.url}/agents/my-agent/trigger"
    assert httpx.post(trigger, json={}).status_code == 401
    auth = {"Authorization": f"Bearer {tour.token()}"}
    wrong = httpx.post(trigger, json={"focus": 3}, headers=auth)
    assert wrong.status_code == 400 and wrong.json()["code"] == "bad_request"
    unknown = httpx.post(f"{tour.url}/agents/nobody/trigger", json={}, headers=auth)
    assert unknown.status_code == 404 and unknown.json()["code"] == "unknown_agent"
    waited = httpx.post(
        trigger, json={"focus": "check the ticket queue", "wait": True}, headers=auth, timeout=60
    )
    assert waited.status_code == 200 and waited.json()["result"]["status"] == "completed"
    event = httpx.post(
        f"{tour.url}/agents/my-agent/events", json={"payload": {"ticket": 9}}, headers=auth
    )
    assert event.status_code == 202
    [inbound] = [e for e in tour.ledger() if e["type"] == "InboundReceived"]
    assert inbound["data"] == {"source": "webhook", "payload": {"ticket": 9}, "by": "server-token"}
    spoof = httpx.post(
        f"{tour.url}/agents/my-agent/events",
        json={"source": "agent:boss", "payload": {"pay": 1}},
        headers=auth,
    )
    assert spoof.status_code == 400 and "reserved for messages between agents" in spoof.text
    assert [e for e in tour.ledger() if e["type"] == "InboundReceived"] == [inbound]


def test_cli_errors_against_the_running_server(tour: Tour) -> None:
    unknown = tour("trigger", "nobody")
    assert unknown.returncode == 3
    assert unknown.stderr.startswith("error: agent 'nobody' is not served here")
    bad = tour("trigger", "my-agent", "--payload", "{not json")
    assert bad.returncode == 2 and "--payload is not valid JSON" in bad.stderr
    not_object = tour("trigger", "my-agent", "--payload", "[1, 2]")
    assert not_object.returncode == 2 and "must be a JSON object" in not_object.stderr
    assert "Traceback" not in unknown.stderr + bad.stderr + not_object.stderr


def test_status_reports_agents_timers_and_projections(tour: Tour, scheduling_run: object) -> None:
    status = tour.json("status")
    assert status["server"]["agents"]["my-agent"]["runs"] >= 1
    assert status["server"]["placement"] == "shared"
    assert status["pending_timers"] >= 1
    assert {p["name"] for p in status["projections"]} == {
        "agents",
        "audit",
        "runs",
        "memory",
        "schedules",
        "approval_notifications",
        "outbox",
    }
    assert [a["agent_id"] for a in status["agents"]] == ["my-agent"]
    [agent] = status["agents"]
    assert agent["runs_today"] >= 1 and agent["next_timer"] is not None


TIME_SERVER = """
[mcp.servers.time]
command = "python"
args = ["-m", "mcp_server_time", "--local-timezone", "UTC"]
"""


def test_an_mcp_server_in_owlclaw_toml_lends_the_agent_its_tools(
    tour: Tour, scheduling_run: object
) -> None:
    """The README's MCP step: the reference time server from PyPI, named in the app's
    owlclaw.toml, shown ready by `owlclaw tools` and called by the next run (after the replays
    above, which would otherwise see its tools as new)."""
    toml = tour.home / "my-agent" / "owlclaw.toml"
    toml.write_text(toml.read_text() + TIME_SERVER)
    shown = tour.json("tools", "my-agent")["mcp_servers"]["time"]
    assert (
        shown["status"].startswith("ready (mcp-time") and "time__get_current_time" in shown["tools"]
    )
    run = tour.json("trigger", "my-agent", "--focus", "what time is it")
    assert run["status"] == "completed", run
    [called] = [
        e["data"] for e in runs_of(tour.ledger())[run["run_id"]] if e["type"] == "ToolCallSucceeded"
    ]
    assert called["tool"] == "time__get_current_time"
    assert called["result"]["structured"]["timezone"] == "UTC"


def test_ctrl_c_stops_the_server_cleanly(tour: Tour) -> None:
    assert tour.server is not None
    tour.server.send_signal(signal.SIGINT)
    assert tour.server.wait(timeout=120) == 0
    log = tour.log.read_text()
    assert "stopping" in log and "Traceback" not in log
    gone = tour("trigger", "my-agent", "--wait-ready", "0")
    assert gone.returncode == 6 and "no `owlclaw run` answers" in gone.stderr
    assert json.loads(tour("status", "--json").stdout)["server"]["running"] is False
