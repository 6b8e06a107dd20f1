"""The Must-show of an app that never finishes importing: ``owlclaw run`` (local placement) of two
agents, one whose handlers.py loops forever at import. The service starts, the other agent runs,
the looping agent's runs fail at once with a recorded error naming the app, ``owlclaw status``
shows it failed, and SIGTERM stops everything the service started."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from tests.apps import make_app
from tests.cli import free_port, owlclaw, owlclaw_json, user_env
from tests.integration.test_process_lifecycle import postgres_on
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

LOOP = "from owlclaw import Registry\nregistry = Registry()\nwhile True: pass\n"  # one line


def test_a_service_with_an_app_that_hangs_at_import_serves_the_others_and_stops_on_sigterm(
    tmp_path: Path,
) -> None:
    env = user_env(
        tmp_path / ".owlclaw",
        free_port(),
        OWLCLAW_PLACEMENT="local",
        OWLCLAW_APP_LOAD_TIMEOUT_S="2",
    )
    good = make_app(tmp_path / "good", config='[agent]\nmodels = ["scripted/good"]\n')
    (good / "scripts").mkdir()
    (good / "scripts" / "good.json").write_text(json.dumps({"steps": [{"content": "ok"}]}))
    looper = make_app(tmp_path / "looper")
    handlers = (looper / "handlers.py").resolve()
    handlers.write_text(LOOP)
    log = tmp_path / "run.log"
    server = subprocess.Popen(
        [sys.executable, "-m", "owlclaw", "run", "good", "looper"],
        env=env,
        cwd=tmp_path,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        wait_for(lambda: "serving" in log.read_text() or server.poll() is not None, "serving", 180)
        assert server.poll() is None, log.read_text()

        served = owlclaw_json(env, "trigger", "good", cwd=tmp_path)
        assert served["status"] == "completed"

        failed = owlclaw(env, "trigger", "looper", "--json", cwd=tmp_path)
        assert failed.returncode == 1, failed.stderr
        [end] = [s for s in json.loads(failed.stdout)["steps"] if s["type"] == "RunFailed"]
        assert str(handlers) in end["error"]
        assert "did not finish importing within 2 s" in end["error"]
        assert end["duration_ms"] < 2000  # the recorded error, not a second probe

        agents = {a["agent_id"]: a for a in owlclaw_json(env, "status", cwd=tmp_path)["agents"]}
        assert agents["good"]["app_error"] is None
        assert str(handlers) in agents["looper"]["app_error"]
        assert "it was at line 3" in agents["looper"]["app_error"]
        table = owlclaw(env, "status", cwd=tmp_path).stdout
        assert "looper" in table and "failed" in table

        ledger = owlclaw_json(env, "ledger", "looper", cwd=tmp_path)
        [load_failed] = [e["data"] for e in ledger if e["type"] == "AppLoadFailed"]
        assert load_failed["app_dir"] == str(looper.resolve())
        assert f'File "{handlers}", line 3' in load_failed["details"]

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
