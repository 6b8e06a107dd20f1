"""What every ``owlclaw`` command shares: the Typer apps, consoles, error handling, ledger access.

Data commands take ``--json``. User mistakes print one line with a hint and exit non-zero
(no traceback unless ``--debug``). Exit codes: 1 failure (a run failed, verification failed),
2 usage (bad option value), 3 not found (agent, run, app directory), 4 database or Hatchet
unavailable, or a ledger written by a newer OwlClaw, 5 invalid configuration or app, 6 no
``owlclaw run`` server reachable, 7 server refused the token.
"""

import atexit
import errno
import json
import os
import shutil
import socket
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn, TypeVar

import msgspec
import typer
from rich.console import Console
from rich.markup import escape

from owlclaw.config import ConfigError, OwlClawConfig, load_config

if TYPE_CHECKING:
    from events import Ledger
    from owlclaw.client import ServerClient
    from owlclaw.database import Database

app = typer.Typer(no_args_is_help=True, add_completion=False, help="OwlClaw agent runtime.")
bench_app = typer.Typer(no_args_is_help=True, help="Measure OwlClaw on this machine.")
app.add_typer(bench_app, name="bench")
projections_app = typer.Typer(no_args_is_help=True, help="Read models of the ledger.")
app.add_typer(projections_app, name="projections")
timers_app = typer.Typer(no_args_is_help=True, help="The timer service.")
app.add_typer(timers_app, name="timers")

out = Console()
err = Console(stderr=True)

EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_DATABASE, EXIT_CONFIG = 1, 2, 3, 4, 5
EXIT_NO_SERVER, EXIT_UNAUTHORIZED = 6, 7

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
JsonOption = Annotated[bool, typer.Option("--json", help="Print machine-readable JSON.")]


class State:
    debug = False
    token: str | None = None
    """A principal's token for the commands that go through the server (else the server's)."""


@app.callback()
def _main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks.")] = False,
    token: Annotated[
        str | None,
        typer.Option(
            "--token",
            envvar="OWLCLAW_TOKEN",
            help="Your principal's token, for the commands that go through `owlclaw run`"
            " (default: the server's token).",
        ),
    ] = None,
) -> None:
    State.debug = debug
    State.token = token or None


def server_client(config: OwlClawConfig, timeout_s: float = 30.0) -> "ServerClient":
    """A client of the configured server, sending ``--token`` / OWLCLAW_TOKEN when given."""
    from owlclaw.client import ServerClient

    return ServerClient(config, timeout_s, token=State.token)


SERVED_TIMEOUT_S = 120.0
"""How long a command the server does for the CLI (a recall, a run's verification) may take."""


def ask_server(
    config: OwlClawConfig, ask: "Callable[[ServerClient], T]", timeout_s: float = SERVED_TIMEOUT_S
) -> T | None:
    """The running ``owlclaw run``'s answer (its warm embedder and views, its loaded code: what
    this process would otherwise import and start); None when nothing listens at the configured
    address (the connection is refused) or the server is still starting, and the caller does
    the work itself. A server that answers with any other error, drops the connection or does
    not answer in time is reported (ServerRefused, ServerUnavailable), never redone here: it is
    there, and may still be doing what was asked."""
    if not _listening(config):
        return None  # the HTTP client is not even imported
    from owlclaw.client import NoServer, ServerRefused

    with server_client(config, timeout_s=timeout_s) as client:
        try:
            return ask(client)
        except NoServer:
            return None
        except ServerRefused as e:
            if e.code == "starting":  # it has done nothing yet
                return None
            raise


def _listening(config: OwlClawConfig) -> bool:
    """Whether something accepts connections at the server's address."""
    try:
        with socket.create_connection((config.server.host, config.server.port), timeout=1.0):
            return True
    except OSError:
        return False


def fail(message: str, hint: str, code: int) -> NoReturn:
    err.print(
        f"[bold red]error:[/] {escape(message)}\n[dim]hint: {escape(hint)}[/]",
        highlight=False,
        soft_wrap=True,  # one line, whatever the terminal width
    )
    raise typer.Exit(code)


def exit_served(code: int = 0) -> NoReturn:
    """End a process whose services have all stopped, skipping Python's teardown of its modules.

    With torch and litellm loaded, that teardown (garbage collection over ~1M objects, ~7,000
    modules) took 2.5 s of CPU after the service had stopped: every restart, and every test that
    stops a server, waited for it. The exit handlers still run first (the embedded server's
    stop, log and trace flushes), as multiprocessing's children do before ``os._exit``."""
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def handles_errors(fn: F) -> F:
    """Turn expected failures into one clear line and a stable exit code."""

    @wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except Exception as e:
            if State.debug:
                raise
            explain(e)
            raise

    return wrapper  # type: ignore[return-value]


def explain(e: Exception) -> None:
    """Exit with the line, hint and code for an expected failure; return for anything else."""
    from events import LedgerError, LedgerReadError
    from events.codec import NewerEventVersion
    from events.ledger_format import LedgerTooNew
    from owlclaw.client import ServerNotReady, ServerRefused, ServerUnavailable

    if isinstance(e, OSError) and e.errno == errno.EADDRINUSE:
        fail(f"the server's address is taken: {e}", "set OWLCLAW_SERVER_PORT", EXIT_USAGE)
    if isinstance(e, ServerUnavailable):
        starting = isinstance(e, ServerNotReady)
        hint = "see `owlclaw run`'s output, or wait longer (--wait-ready)" if starting else None
        fail(str(e), hint or "start the agent's server with `owlclaw run APP`", EXIT_NO_SERVER)
    if isinstance(e, ServerRefused):
        hint, code = REFUSALS.get(e.code, ("check the request", EXIT_USAGE))
        fail(str(e), hint, code)
    if isinstance(e, KeyError) and isinstance(e, LedgerError):
        fail(str(e), "list what exists with `owlclaw status`", EXIT_NOT_FOUND)
    if isinstance(e, LedgerTooNew) or (
        isinstance(e, LedgerReadError) and isinstance(e.cause, NewerEventVersion)
    ):
        fail(str(e), UPGRADE_HINT, EXIT_DATABASE)
    for kinds, hint, code in _failures():
        if isinstance(e, kinds):
            fail(str(e), hint, code)


UPGRADE_HINT = "pip install -U owlclaw, then run the command again (docs: ledger-lifecycle.md)"
"""What to do about a ledger a newer OwlClaw wrote: nothing here may read or write it."""

REFUSALS = {
    "unknown_agent": ("`owlclaw status` lists the served agents", EXIT_NOT_FOUND),
    "unknown_run": ("`owlclaw ledger AGENT` lists its runs", EXIT_NOT_FOUND),
    "starting": ("wait until `owlclaw status` shows the server up, then ask again", EXIT_NO_SERVER),
    "unauthorized": (
        "set OWLCLAW_TOKEN (or --token) to your principal's token, or unset it to use the server's",
        EXIT_UNAUTHORIZED,
    ),
    "forbidden": ("an admin grants roles with `owlclaw principals add`", EXIT_UNAUTHORIZED),
}
"""A server's refusals by code: the hint and exit code."""


def _failures() -> list[tuple[type[Exception] | tuple[type[Exception], ...], str, int]]:
    """Expected failures by type, first match wins: the hint and exit code (imported here:
    most commands never meet most of them)."""
    from events import LedgerError, LedgerUnavailable
    from events.erasure import NothingToErase
    from owlclaw.app import AppError, AppNotFound
    from owlclaw.database import DatabaseUnavailable
    from owlclaw.server.serving_locks import AlreadyServed
    from owlclaw.timers.hatchet_engine import HatchetUnavailable
    from projections.rebuild import RebuildRunning
    from projections.versions import ViewTooNew

    return [
        (ConfigError, "fix owlclaw.toml or the OWLCLAW_* variable named above", EXIT_CONFIG),
        (
            (DatabaseUnavailable, LedgerUnavailable),
            "is PostgreSQL running? check OWLCLAW_DATABASE_URL",
            EXIT_DATABASE,
        ),
        (
            AlreadyServed,
            "stop that server first (servers that join one Ray cluster, OWLCLAW_RAY_ADDRESS,"
            " may serve the same agents)",
            EXIT_USAGE,
        ),
        (HatchetUnavailable, "set HATCHET_CLIENT_* or timers.backend = builtin", EXIT_DATABASE),
        (
            ViewTooNew,
            "run that newer OwlClaw, or rebuild the view with this one:"
            " `owlclaw projections rebuild NAME`",
            EXIT_FAILED,
        ),
        (RebuildRunning, "see its progress with `owlclaw projections status`", EXIT_FAILED),
        (AppNotFound, "create one with `owlclaw init PATH`", EXIT_NOT_FOUND),
        (
            NothingToErase,
            "`owlclaw memory AGENT` lists memories, `owlclaw ledger AGENT` runs",
            EXIT_NOT_FOUND,
        ),
        (AppError, "fix the app directory named above", EXIT_CONFIG),
        (LedgerError, "run `owlclaw verify` to check the ledger", EXIT_FAILED),
    ]


@contextmanager
def open_ledger(config: OwlClawConfig | None = None) -> "Iterator[tuple[Database, Ledger]]":
    """The configured database and its ledger, on a pool of one connection: a command does one
    thing at a time (four more connections, opened beside its imports, cost ~17 ms), and the
    pool grows where one does more (a timer service)."""
    from events import Ledger
    from owlclaw.database import open_database

    config = config or load_config()
    database = open_database(config)
    with Ledger(
        database.url,
        snapshot_interval=config.ledger.snapshot_interval,
        archive_dir=config.archive_path,
        encrypt=config.ledger.encrypt,
        pool_size=1,
    ) as ledger:
        yield database, ledger


@contextmanager
def bench_database(name: str) -> Iterator[str]:
    """A scratch database on the configured server for one benchmark, dropped afterwards."""
    from owlclaw.database import open_database

    server = open_database(load_config())
    database = server.create_database(name)
    try:
        yield database.url
    finally:
        server.drop_database(name)


def command_name() -> str:
    """How the user runs this ``owlclaw`` from where they are: ``owlclaw`` when that name on
    their PATH is this one, else its path (``.venv/bin/owlclaw`` after ``make demo``, whose venv
    is not activated), so that a printed hint works as printed."""
    script = Path(sys.executable).with_name("owlclaw")
    found = shutil.which("owlclaw")
    if found is not None and Path(found).resolve() == script.resolve():
        return "owlclaw"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)


def print_json(data: Any) -> None:
    sys.stdout.write(msgspec.json.encode(data).decode() + "\n")


def summary(fields: dict[str, Any], width: int = 90) -> str:
    text = json.dumps(fields, ensure_ascii=False, default=str)
    return text if len(text) <= width else text[: width - 1] + "…"
