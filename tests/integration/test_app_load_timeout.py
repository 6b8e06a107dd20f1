"""An app whose handlers.py starts looping forever at import while ``owlclaw run`` (local
placement) serves it and another agent: the looping version is refused within its time limit and
the agent keeps serving with its previous code (an AgentWarning names the file and the line), the
other agent runs, and SIGTERM stops everything the service started. (An app
that loops at import when the service starts is refused at start: test_start_validation.)"""

from __future__ import annotations

import json
import signal
from pathlib import Path

import psutil
import pytest

from owlclaw.bench import free_port
from tests.apps import make_app
from tests.cli import owlclaw_json, start_run, user_env
from tests.postgres import postgres_on
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

REGISTRY = "from owlclaw import Registry\nregistry = Registry()\n"
LOOP = REGISTRY + "while True: pass\n"  # one line: the dump shows line 3 whatever it was doing


def test_a_served_app_changed_to_hang_at_import_keeps_its_previous_code_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    env = user_env(
        tmp_path / ".owlclaw",
        free_port(),
        OWLCLAW_PLACEMENT="local",
        OWLCLAW_APP_LOAD_TIMEOUT_S="2",
    )
    script = json.dumps({"steps": [{"content": "ok"}]})
    for name in ("good", "looper"):
        app = make_app(tmp_path / name, config='[agent]\nmodels = ["scripted/ok"]\n')
        (app / "scripts").mkdir()
        (app / "scripts" / "ok.json").write_text(script)
    handlers = (tmp_path / "looper" / "handlers.py").resolve()
    handlers.write_text(REGISTRY)
    server, log = start_run(env, tmp_path, "good", "looper")
    try:
        assert server.poll() is None, log.read_text()
        handlers.write_text(LOOP)

        served = owlclaw_json(env, "trigger", "good", cwd=tmp_path)
        assert served["status"] == "completed"
        kept = owlclaw_json(env, "trigger", "looper", cwd=tmp_path)
        assert kept["status"] == "completed"

        agents = {a["agent_id"]: a for a in owlclaw_json(env, "status", cwd=tmp_path)["agents"]}
        assert agents["looper"]["app_error"] is None

        ledger = owlclaw_json(env, "ledger", "looper", "--all", cwd=tmp_path)["events"]
        assert not [e for e in ledger if e["type"] == "AppLoadFailed"]
        [warning] = {e["data"]["message"] for e in ledger if e["type"] == "AgentWarning"}
        assert warning.startswith("kept the previous identity: ")
        assert f"{handlers} did not finish importing within 2 s" in warning
        assert "it was at line 3" in warning

        started = psutil.Process(server.pid).children(recursive=True)
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0, log.read_text()
    finally:
        if server.poll() is None:
            server.kill()

    def gone() -> bool:
        return not [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]

    wait_for(gone, "every process owlclaw run started to end", 10)
    pgdata = (tmp_path / ".owlclaw" / "pg").resolve()
    wait_for(lambda: not postgres_on(pgdata), "no postgres on the data dir", 10)
