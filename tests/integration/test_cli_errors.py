"""Bad input to the CLI: one clear line (plus a hint), no traceback, an exit code scripts can
rely on (see owlclaw/cli/common.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlclaw.bench import free_port
from tests.cli import owlclaw, user_env

pytestmark = pytest.mark.integration


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return user_env(tmp_path / ".owlclaw", free_port())


def assert_one_clear_line(stderr: str, starts: str) -> None:
    lines = stderr.strip().splitlines()
    assert lines[0].startswith(f"error: {starts}"), stderr
    assert lines[-1].startswith("hint: ") and "Traceback" not in stderr


def test_database_unreachable(env: dict[str, str], tmp_path: Path) -> None:
    down = env | {"OWLCLAW_DATABASE_URL": f"postgresql://owlclaw@127.0.0.1:{free_port()}/x"}
    for args in (("status",), ("ledger", "trader"), ("runs", "trader"), ("verify",)):
        result = owlclaw(down, *args, cwd=tmp_path)
        assert result.returncode == 4, (args, result.stderr)
        assert_one_clear_line(result.stderr, "PostgreSQL at")


def test_missing_app_dir(env: dict[str, str], tmp_path: Path) -> None:
    result = owlclaw(env, "run", "no-such-app", cwd=tmp_path)
    assert result.returncode == 3
    assert_one_clear_line(result.stderr, "app directory not found")


def test_invalid_app_settings_name_the_field(env: dict[str, str], tmp_path: Path) -> None:
    assert owlclaw(env, "init", "bad", cwd=tmp_path).returncode == 0
    (tmp_path / "bad" / "owlclaw.toml").write_text('[agent]\nheartbeat_s = "often"\n')
    result = owlclaw(env, "run", "bad", cwd=tmp_path)
    assert result.returncode == 5
    assert_one_clear_line(
        result.stderr, f"{tmp_path / 'bad' / 'owlclaw.toml'}: [agent] heartbeat_s: Expected"
    )
    assert "heartbeat_s" in result.stderr


def test_invalid_agent_id_from_init(env: dict[str, str], tmp_path: Path) -> None:
    result = owlclaw(env, "init", "x", "--id", "no spaces please", cwd=tmp_path)
    assert result.returncode == 5
    assert_one_clear_line(result.stderr, "agent id 'no spaces please'")


def test_trigger_without_a_server(env: dict[str, str], tmp_path: Path) -> None:
    result = owlclaw(env, "trigger", "trader", "--wait-ready", "0", cwd=tmp_path)
    assert result.returncode == 6
    assert_one_clear_line(result.stderr, "no `owlclaw run` answers at http://127.0.0.1:")


def test_invalid_configuration_names_the_variable(env: dict[str, str], tmp_path: Path) -> None:
    result = owlclaw(env | {"OWLCLAW_SERVER_PORT": "99999"}, "status", cwd=tmp_path)
    assert result.returncode == 5
    assert_one_clear_line(
        result.stderr, "OWLCLAW_SERVER_PORT: [server] port: Expected `int` <= 65535"
    )


def test_unknown_agent_in_the_ledger(env: dict[str, str], tmp_path: Path) -> None:
    result = owlclaw(env, "ledger", "nobody", cwd=tmp_path)
    assert result.returncode == 3
    assert_one_clear_line(result.stderr, "")
    assert "nobody" in result.stderr


def test_a_taken_server_port_fails_before_anything_starts(
    env: dict[str, str], tmp_path: Path
) -> None:
    import socket

    assert owlclaw(env, "init", "app", cwd=tmp_path).returncode == 0
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        result = owlclaw(env | {"OWLCLAW_SERVER_PORT": port}, "run", "app", cwd=tmp_path)
    assert result.returncode == 2
    assert_one_clear_line(result.stderr, "the server's address is taken")
    assert not (tmp_path / ".owlclaw" / "pg").exists()  # the database was never started
