"""A local Hatchet engine on our PostgreSQL, for the embedded default and the tests.

The hatchet-embedded sidecar module is not served by the Go module proxy reachable here, so the
engine is built from the ``github.com/hatchet-dev/hatchet`` module itself (``hatchet-migrate``,
``hatchet-admin``, ``hatchet-engine``, ``hatchet-api``; see scripts/build-hatchet.sh) and started
the way Hatchet's own lite image starts it: migrate, quickstart config, mint a token, run. It
listens on loopback ports; production points ``HATCHET_CLIENT_TOKEN`` at a real Hatchet server.

The engine and the API run as two processes, not as ``hatchet-lite``: lite returns from main on
SIGINT/SIGTERM while its engine is still shutting down, so the engine never deletes its scheduler
partition nor deactivates its ticker, and after a restart on the same database the tenant stays
on the dead partition until Hatchet's one-minute rebalance (fires came 22-31 s late).
``hatchet-engine`` returns only after that cleanup, and ``stop`` waits for it.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

from owlclaw.connections import HATCHET_API, HATCHET_ENGINE

HATCHET_VERSION = "v0.104.7"
BINARIES = ("hatchet-migrate", "hatchet-admin", "hatchet-engine", "hatchet-api")
STOP_S = 30.0
"""How long the engine gets to clean up on SIGTERM (its own deletes time out after 10 s)."""


class HatchetUnavailable(RuntimeError):
    """The engine binaries are missing or the engine did not start; the message says which."""


def missing_binaries(bin_dir: Path) -> list[str]:
    """The engine binaries not built in ``bin_dir`` (none: the engine can start)."""
    return [b for b in BINARIES if not (bin_dir / b).is_file()]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def go_database_url(libpq: str) -> str:
    """The libpq connection string of our database as a URL the Go engine (pgx) accepts."""
    p = conninfo_to_dict(libpq)
    user, dbname = p.get("user", "postgres"), p.get("dbname", "hatchet")
    password = f":{p['password']}" if p.get("password") else ""
    host, port = str(p.get("host", "localhost")), p.get("port")
    if host.startswith("/"):  # a unix socket directory
        query = f"host={host}" + (f"&port={port}" if port else "")
        return f"postgres://{user}{password}@localhost/{dbname}?sslmode=disable&{query}"
    address = f"{host}:{port}" if port else host
    return f"postgres://{user}{password}@{address}/{dbname}?sslmode=disable"


class HatchetEngine:
    """The engine's two processes on one database; ``restart`` runs them again on the same
    ports, so workers and clients reconnect as they would to a restarted server."""

    def __init__(self, env: dict[str, str], workdir: Path, bin_dir: Path, token: str):
        self.env = env
        self.workdir = workdir
        self.bin_dir = bin_dir
        self.log_path = workdir / "hatchet.log"
        """Both processes log here."""
        self.client_env = {
            "HATCHET_CLIENT_TOKEN": token,
            "HATCHET_CLIENT_HOST_PORT": env["SERVER_GRPC_BROADCAST_ADDRESS"],
            "HATCHET_CLIENT_SERVER_URL": env["SERVER_URL"],
            "HATCHET_CLIENT_TLS_STRATEGY": "none",
        }
        """HATCHET_CLIENT_* variables for clients and workers of this engine."""
        self._start()

    def _start(self) -> None:
        def run(binary: str, pools: dict[str, str]) -> subprocess.Popen[bytes]:
            return subprocess.Popen(
                [str(self.bin_dir / binary), "--config", str(self.workdir / "config")],
                env={**self.env, **pools},
                cwd=self.workdir,
                stdout=self.log_path.open("ab"),
                stderr=subprocess.STDOUT,
            )

        self.engine = run("hatchet-engine", HATCHET_ENGINE.env())
        self.api = run("hatchet-api", HATCHET_API.env())
        self._wait_listening(timeout=60)

    def running(self) -> bool:
        return self.engine.poll() is None and self.api.poll() is None

    def stop(self) -> None:
        """SIGTERM both and wait: the engine deletes its scheduler partition and deactivates its
        ticker before it exits, so an engine started next on the database schedules at once."""
        for process in (self.engine, self.api):
            process.terminate()
        for process in (self.engine, self.api):
            try:
                process.wait(timeout=STOP_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def restart(self) -> None:
        """Stop both processes cleanly and start them again (same database, ports and token)."""
        self.stop()
        self._start()

    def _wait_listening(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        for port in (int(self.env["SERVER_GRPC_PORT"]), int(self.env["SERVER_PORT"])):
            while True:
                if not self.running():
                    self.stop()
                    raise HatchetUnavailable(
                        f"the Hatchet engine exited: {self.log_path.read_text()[-2000:]}"
                    )
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        self.stop()
                        raise HatchetUnavailable(
                            f"the Hatchet engine did not listen on {port} within {timeout:g} s"
                        ) from None
                    time.sleep(0.2)


def start_engine(database_url: str, workdir: Path, bin_dir: Path) -> HatchetEngine:
    """Migrate the engine's database, configure it and start ``hatchet-engine`` and
    ``hatchet-api`` (loopback), their pools sized by the connection budget."""
    if missing := missing_binaries(bin_dir):
        raise HatchetUnavailable(
            f"Hatchet engine binaries missing in {bin_dir}: {', '.join(missing)}"
            " (build them with scripts/build-hatchet.sh)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    grpc, api = _free_port(), _free_port()
    env = {
        **os.environ,
        "DATABASE_URL": go_database_url(database_url),
        "SERVER_AUTH_COOKIE_DOMAIN": "localhost",
        "SERVER_AUTH_COOKIE_INSECURE": "t",
        "SERVER_AUTH_COOKIE_SECRETS": f"{secrets.token_hex(16)} {secrets.token_hex(16)}",
        "SERVER_GRPC_INSECURE": "t",
        "SERVER_GRPC_BIND_ADDRESS": "127.0.0.1",
        "SERVER_GRPC_PORT": str(grpc),
        "SERVER_GRPC_BROADCAST_ADDRESS": f"127.0.0.1:{grpc}",
        "SERVER_PORT": str(api),
        "SERVER_URL": f"http://127.0.0.1:{api}",
        "SERVER_HEALTHCHECK": "f",
        "SERVER_MSGQUEUE_KIND": "postgres",
        "SERVER_SECURITY_CHECK_ENABLED": "f",
    }
    config = workdir / "config"
    admin = bin_dir / "hatchet-admin"
    _step(env, workdir, bin_dir / "hatchet-migrate")
    quickstart = ("quickstart", "--skip", "certs", "--generated-config-dir", str(config))
    _step(env, workdir, admin, *quickstart, "--overwrite=false")
    token = _step(env, workdir, admin, "token", "create", "--config", str(config))
    return HatchetEngine(env, workdir, bin_dir, token.strip())


def _step(env: dict[str, str], cwd: Path, binary: Path, *args: str) -> str:
    done = subprocess.run(
        [str(binary), *args], check=False, env=env, cwd=cwd, capture_output=True, timeout=300
    )
    if done.returncode != 0:
        raise HatchetUnavailable(f"{binary.name} {' '.join(args)} failed: {done.stderr[-2000:]!r}")
    return done.stdout.decode()
