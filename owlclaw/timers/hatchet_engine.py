"""A local Hatchet engine on our PostgreSQL, for the embedded default and the tests.

The hatchet-embedded sidecar module is not served by the Go module proxy reachable here, so the
engine is built from the ``github.com/hatchet-dev/hatchet`` module itself (``hatchet-migrate``,
``hatchet-admin``, ``hatchet-lite``; see scripts/build-hatchet.sh) and started the way Hatchet's
own lite image starts it: migrate, quickstart config, mint a token, run. It listens on loopback
ports; production points ``HATCHET_CLIENT_TOKEN`` at a real Hatchet server instead.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from psycopg.conninfo import conninfo_to_dict

HATCHET_VERSION = "v0.104.7"
BINARIES = ("hatchet-migrate", "hatchet-admin", "hatchet-lite")


class HatchetUnavailable(RuntimeError):
    """The engine binaries are missing or the engine did not start; the message says which."""


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


@dataclass
class HatchetEngine:
    process: subprocess.Popen[bytes]
    client_env: dict[str, str]
    """HATCHET_CLIENT_* variables for clients and workers of this engine."""
    log_path: Path

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def start_engine(database_url: str, workdir: Path, bin_dir: Path) -> HatchetEngine:
    """Migrate the engine's database, configure it and start ``hatchet-lite`` (loopback)."""
    missing = [b for b in BINARIES if not (bin_dir / b).is_file()]
    if missing:
        raise HatchetUnavailable(
            f"Hatchet engine binaries missing in {bin_dir}: {', '.join(missing)}"
            " (build them with scripts/build-hatchet.sh)"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "static").mkdir(exist_ok=True)
    (workdir / "static" / "index.html").write_text("<html><body>Hatchet engine</body></html>")
    grpc, api, frontend, proxy = (_free_port() for _ in range(4))
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
        "LITE_STATIC_ASSET_DIR": str(workdir / "static"),
        "LITE_FRONTEND_PORT": str(frontend),
        "LITE_RUNTIME_PORT": str(proxy),
    }
    config = workdir / "config"
    admin = bin_dir / "hatchet-admin"
    _step(env, workdir, bin_dir / "hatchet-migrate")
    quickstart = ("quickstart", "--skip", "certs", "--generated-config-dir", str(config))
    _step(env, workdir, admin, *quickstart, "--overwrite=false")
    token = _step(env, workdir, admin, "token", "create", "--config", str(config))
    log_path = workdir / "hatchet-lite.log"
    process = subprocess.Popen(
        [str(bin_dir / "hatchet-lite"), "--config", str(config)],
        env=env,
        cwd=workdir,
        stdout=log_path.open("ab"),
        stderr=subprocess.STDOUT,
    )
    engine = HatchetEngine(
        process,
        {
            "HATCHET_CLIENT_TOKEN": token.strip(),
            "HATCHET_CLIENT_HOST_PORT": f"127.0.0.1:{grpc}",
            "HATCHET_CLIENT_SERVER_URL": f"http://127.0.0.1:{api}",
            "HATCHET_CLIENT_TLS_STRATEGY": "none",
        },
        log_path,
    )
    _wait_listening(engine, [grpc, api], timeout=60)
    return engine


def _step(env: dict[str, str], cwd: Path, binary: Path, *args: str) -> str:
    done = subprocess.run(
        [str(binary), *args], check=False, env=env, cwd=cwd, capture_output=True, timeout=300
    )
    if done.returncode != 0:
        raise HatchetUnavailable(f"{binary.name} {' '.join(args)} failed: {done.stderr[-2000:]!r}")
    return done.stdout.decode()


def _wait_listening(engine: HatchetEngine, ports: list[int], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for port in ports:
        while True:
            if engine.process.poll() is not None:
                raise HatchetUnavailable(
                    f"hatchet-lite exited: {engine.log_path.read_text()[-2000:]}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    engine.stop()
                    raise HatchetUnavailable(
                        f"hatchet-lite did not listen on {port} within {timeout:g} s"
                    ) from None
                time.sleep(0.2)
