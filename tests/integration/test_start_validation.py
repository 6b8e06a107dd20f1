"""``owlclaw run`` validates every app before it starts anything: an invalid one is refused with
exit code 5 and one error line per invalid app naming its file and field, with no database,
probe or other process left behind; a valid app still starts."""

from __future__ import annotations

import signal
from pathlib import Path

import psutil
import pytest

from owlclaw.bench import free_port
from tests.apps import make_app
from tests.cli import owlclaw, start_run, user_env
from tests.postgres import postgres_on

pytestmark = pytest.mark.integration

REGISTRY = "from owlclaw import Registry\nregistry = Registry()\n"


def processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        if text in " ".join(proc.info["cmdline"] or []):
            found.append(proc)
    return found


def test_invalid_apps_are_refused_at_start_with_exit_5_and_nothing_left_running(
    tmp_path: Path,
) -> None:
    env = user_env(
        tmp_path / ".owlclaw",
        free_port(),
        OWLCLAW_PLACEMENT="local",
        OWLCLAW_APP_LOAD_TIMEOUT_S="1",
    )
    make_app(tmp_path / "good")
    trader = make_app(
        tmp_path / "trader",
        config='[governance.rate_limits.place_order]\ncalls = "two"\nper_seconds = 60\n',
    )
    looper = make_app(tmp_path / "looper")
    (looper / "handlers.py").write_text(REGISTRY + "while True: pass\n")  # one line

    result = owlclaw(env, "run", "good", "trader", "looper", cwd=tmp_path, timeout=60)

    assert result.returncode == 5, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [
        f"error: {trader.resolve() / 'owlclaw.toml'}: [governance]"
        " rate_limits.place_order.calls: Expected `int`, got `str`",
        f"error: {looper.resolve() / 'handlers.py'} did not finish importing within 1 s"
        " (runtime.app_load_timeout_s); it was at line 3",
    ]
    assert result.stderr.strip().splitlines()[-1].startswith("hint: ")
    assert "Traceback" not in result.stderr and "serving" not in result.stdout
    assert not (tmp_path / ".owlclaw" / "pg").exists()  # the database was never started
    assert not postgres_on((tmp_path / ".owlclaw" / "pg").resolve())
    assert not processes_mentioning(str(looper / "handlers.py"))  # the probe is gone


def test_a_valid_app_with_governance_and_handlers_still_starts(tmp_path: Path) -> None:
    env = user_env(tmp_path / ".owlclaw", free_port(), OWLCLAW_PLACEMENT="local")
    trader = make_app(
        tmp_path / "trader",
        config="[governance.rate_limits.place_order]\ncalls = 2\nper_seconds = 60\n",
    )
    (trader / "handlers.py").write_text(
        REGISTRY + '@registry.capability("Place an order.")\n'
        "def place_order(symbol: str) -> str:\n    return symbol\n"
    )
    server, log = start_run(env, tmp_path, "trader")
    try:
        assert server.poll() is None, log.read_text()
        server.send_signal(signal.SIGTERM)
        assert server.wait(30) == 0, log.read_text()
    finally:
        if server.poll() is None:
            server.kill()
