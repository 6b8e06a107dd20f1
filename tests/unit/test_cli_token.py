"""The CLI through the server with a principal's token (``--token`` / OWLCLAW_TOKEN): the server
checks that principal's roles, and its 403 is printed as one line naming the missing role, with
no traceback; a principal answering an approval leaves ``by`` to the server."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from aiohttp import web
from typer.testing import CliRunner

from events import Ledger
from owlclaw.access.roles import parse_grant
from owlclaw.access.store import PrincipalStore
from owlclaw.bench import free_port
from owlclaw.cli import app
from owlclaw.cli.common import EXIT_UNAUTHORIZED, EXIT_USAGE
from owlclaw.config import OwlClawConfig
from owlclaw.server.service import Service
from owlclaw.server.webhook import make_app


@contextmanager
def served() -> Iterator[tuple[int, str]]:
    """The webhook (no agents) on a loopback port, in a thread; its port and a viewer's token."""
    service = Service(OwlClawConfig(), [])
    service.principals = PrincipalStore(Ledger.in_memory())
    _, token = service.principals.add("vera", [parse_grant("viewer")], by="test")
    service.ready = True
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(make_app(service, "server-secret"))
    loop.run_until_complete(runner.setup())
    port = free_port()
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield port, token
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
        loop.run_until_complete(runner.cleanup())
        loop.close()


def test_a_principals_token_is_sent_and_a_refusal_printed_without_a_traceback(
    tmp_path: Path,
) -> None:
    with served() as (port, token):
        env = {"OWLCLAW_SERVER_PORT": str(port), "OWLCLAW_DATA_DIR": str(tmp_path)}
        runner = CliRunner()
        by_env = runner.invoke(
            app, ["tools", "desk", "--disable", "exec"], env=env | {"OWLCLAW_TOKEN": token}
        )
        by_option = runner.invoke(
            app, ["--token", token, "tools", "desk", "--disable", "exec"], env=env
        )
        wrong = runner.invoke(app, ["--token", "owl_nope", "status"], env=env)
    for refused in (by_env, by_option):
        assert refused.exit_code == EXIT_UNAUTHORIZED
        assert "vera may not tools.change: it needs role operator on agent 'desk'" in (
            refused.output
        )
        assert "Traceback" not in refused.output and refused.exception is not None
        assert isinstance(refused.exception, SystemExit)
    assert wrong.exit_code == EXIT_UNAUTHORIZED
    assert "missing or wrong bearer token" in wrong.output
    assert "OWLCLAW_TOKEN" in wrong.output  # the hint


def test_a_principal_may_not_answer_as_someone_else(tmp_path: Path) -> None:
    refused = CliRunner().invoke(
        app,
        ["--token", "owl_x", "approve", "abc", "--by", "mallory"],
        env={"OWLCLAW_DATA_DIR": str(tmp_path)},
    )  # refused before anything is looked up
    assert refused.exit_code == EXIT_USAGE
    assert "a principal's token answers as that principal" in refused.output
