"""A served app whose handlers.py stops importing keeps running its previous code, and every place
an operator looks says so, with the error's first line: the trigger's output, ``owlclaw
status``, ``/status`` and the console's agents page; until the file imports again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from owlclaw.bench import free_port
from owlclaw.messages import Result, Submit
from tests.apps import make_app
from tests.browser import Console, logged_in
from tests.cli import owlclaw, owlclaw_json, start_run, stop_run, user_env

pytestmark = pytest.mark.integration

HANDLERS = """from owlclaw import Registry
registry = Registry()


@registry.capability("Page the on-call engineer.")
def page_oncall(reason: str) -> str:
    return "paged: " + reason
"""
BROKEN = HANDLERS + "\ndef half_saved(:\n"


def test_the_cli_and_status_say_the_agent_runs_its_previous_code(tmp_path: Path) -> None:
    env = user_env(
        tmp_path / ".owlclaw", free_port(), OWLCLAW_PLACEMENT="local", OWLCLAW_SERVER_TOKEN="t"
    )
    app = make_app(tmp_path / "desk", config='[agent]\nmodels = ["scripted/desk"]\n')
    (app / "scripts").mkdir()
    (app / "scripts" / "desk.json").write_text('[{"content": "nothing to page"}]')
    (app / "handlers.py").write_text(HANDLERS)
    server, log = start_run(env, tmp_path, str(app))
    try:
        assert server.poll() is None, log.read_text()
        first = owlclaw(env, "trigger", "desk", cwd=tmp_path)
        assert first.returncode == 0 and "warning" not in first.stderr, first.stderr
        (app / "handlers.py").write_text(BROKEN)

        broken = owlclaw(env, "trigger", "desk", cwd=tmp_path)
        assert broken.returncode == 0, broken.stderr
        assert "warning: desk runs its previous code: kept the previous identity:" in broken.stderr
        assert "SyntaxError" in broken.stderr
        as_json = owlclaw_json(env, "trigger", "desk", cwd=tmp_path)
        assert "SyntaxError" in as_json["app_warning"]
        status = owlclaw(env, "status", cwd=tmp_path)
        assert "previous code" in status.stdout and "SyntaxError" in status.stdout, status.stdout
        served = httpx.get(
            f"http://127.0.0.1:{env['OWLCLAW_SERVER_PORT']}/status",
            headers={"Authorization": "Bearer t"},
            trust_env=False,
            timeout=30,
        ).json()
        assert "SyntaxError" in served["agents"]["desk"]["app_warning"]

        (app / "handlers.py").write_text(HANDLERS)  # saved whole again
        fixed = owlclaw(env, "trigger", "desk", cwd=tmp_path)
        assert fixed.returncode == 0 and "warning" not in fixed.stderr, fixed.stderr
        assert "previous code" not in owlclaw(env, "status", cwd=tmp_path).stdout
    finally:
        stop_run(server)


def test_the_console_agents_page_says_the_agent_runs_its_previous_code(
    console: Callable[..., Console], tmp_path: Path
) -> None:
    app = make_app(tmp_path / "desk")
    (app / "handlers.py").write_text(HANDLERS)
    c = console(app)
    service = c.service
    c.call(
        service.ask(
            Result(
                agent_id="desk",
                run_id=c.call(service.ask(Submit(agent_id="desk", trigger="webhook"))),
            )
        )
    )
    (app / "handlers.py").write_text(BROKEN)
    c.call(
        service.ask(
            Result(
                agent_id="desk",
                run_id=c.call(service.ask(Submit(agent_id="desk", trigger="webhook"))),
            )
        )
    )
    page = logged_in(c.page, c.url, c.token)
    warning = page.locator("[data-app-warning]")
    assert "running its previous code: kept the previous identity:" in warning.inner_text()
    assert "SyntaxError" in warning.inner_text()
    c.screenshot("agents-previous-code")
