"""OwlClaw's local Ray cluster is its own: it never adopts a cluster someone else started on the
machine (a ``ray start``, RAY_ADDRESS), it listens on loopback only, its workers keep normal
CPU priority and inherit the agents' environment."""

from __future__ import annotations

import contextlib
import ipaddress
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.components import missing_component

pytestmark = [pytest.mark.integration, pytest.mark.xdist_group("ray")]

RAY_CURRENT = Path("/tmp/ray/ray_current_cluster")
"""Where ``ray start`` records the machine's current cluster (what ``ray.init()`` adopts)."""

OWN_CLUSTER = """
import os, ray
from actors.cluster import connect, disconnect
from owlclaw.config import OwlClawConfig
for ray_address in (None, os.environ["FOREIGN"]):
    if ray_address is not None:
        os.environ["RAY_ADDRESS"] = ray_address
    connect(OwlClawConfig(), num_cpus=1, log_to_driver=False)
    print(ray.get_runtime_context().gcs_address, flush=True)
    disconnect()
"""

WORKER_ENV = """
import os, ray
from actors.cluster import connect, disconnect
from owlclaw.config import OwlClawConfig, RuntimeConfig
NAMES = ("OWLCLAW_SCRIPTS_DIR", "LITELLM_LOCAL_MODEL_COST_MAP")
config = OwlClawConfig(runtime=RuntimeConfig(scripts_dir="/scripts/of/the/test"))
connect(config, num_cpus=1, log_to_driver=False)
@ray.remote
def env(): return [os.environ.get(k) for k in NAMES]
print(*ray.get(env.remote()), os.environ.get("OWLCLAW_SCRIPTS_DIR", "-"))
disconnect()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture
def foreign_cluster(tmp_path: Path) -> Iterator[str]:
    """A ``ray start --head`` cluster of someone else's, recorded as the machine's current one;
    its processes (and only they) are killed afterwards."""
    recorded = RAY_CURRENT.read_text() if RAY_CURRENT.is_file() else None
    head, why = None, ""
    for attempt in range(3):  # a start may lose a port it picked to a cluster starting beside it
        head, why = _start_head(tmp_path / f"ray-start-{attempt}.log")
        if head is not None:
            break
    try:
        if head is None:
            missing_component("a `ray start --head` cluster", why)
        yield RAY_CURRENT.read_text().strip()
    finally:
        if head is not None:
            _kill_session(head)
        if recorded is None:
            RAY_CURRENT.unlink(missing_ok=True)
        else:
            RAY_CURRENT.write_text(recorded)


def _start_head(log: Path) -> tuple[subprocess.Popen[bytes] | None, str]:
    """A head recorded as the machine's current cluster, or None and why it is not."""
    port = _free_port()
    ray_bin = Path(sys.executable).with_name("ray")
    with log.open("wb") as output:
        head = subprocess.Popen(
            [
                *(str(ray_bin), "start", "--head", f"--port={port}", "--num-cpus=1", "--block"),
                *("--include-dashboard=false", "--disable-usage-stats"),
            ],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=os.environ | {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"},  # it too on loopback
        )
    deadline = time.monotonic() + 120
    while not (RAY_CURRENT.is_file() and RAY_CURRENT.read_text().endswith(f":{port}")):
        if head.poll() is not None or time.monotonic() > deadline:
            ended = "exited" if head.returncode is not None else "was not recorded in 120 s"
            _kill_session(head)
            return None, f"`ray start --head` {ended}: {log.read_text()[-2000:]}"
        time.sleep(0.2)
    return head, ""


def _kill_session(head: subprocess.Popen[bytes]) -> None:
    """Kill the head and every process it started (its session's, even once it has exited)."""
    try:
        tree = [psutil.Process(head.pid), *psutil.Process(head.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(head.pid, signal.SIGKILL)
    for process in tree:
        with contextlib.suppress(psutil.NoSuchProcess):
            process.kill()
    psutil.wait_procs(tree, timeout=30)
    head.wait()


def test_a_foreign_cluster_on_the_machine_is_never_adopted(foreign_cluster: str) -> None:
    """Today's bug: ``ray.init(address=None)`` joined the recorded cluster (and RAY_ADDRESS);
    OwlClaw's agents then died with it."""
    env = os.environ | {"FOREIGN": foreign_cluster}
    env.pop("RAY_ADDRESS", None)
    done = python(OWN_CLUSTER, env)
    addresses = done.stdout.split()
    assert len(addresses) == 2
    for address in addresses:
        assert address != foreign_cluster
        assert address.startswith("127.0.0.1:")  # its own, on loopback
    assert RAY_CURRENT.read_text().strip() == foreign_cluster  # and it left the record alone


def test_the_local_cluster_listens_on_loopback_only(ray_cluster: None) -> None:
    """Every socket the cluster's processes (GCS, raylet, workers, agents) listen on, and this
    driver's, is on 127.0.0.0/8."""
    import ray

    @ray.remote
    def pid() -> int:
        return os.getpid()

    assert ray.get(pid.remote()) != os.getpid()  # a worker process is up
    me = psutil.Process()
    listening = [
        (process.name(), conn.laddr.ip, conn.laddr.port)
        for process in [me, *me.children(recursive=True)]
        for conn in _connections(process)
        if conn.status == psutil.CONN_LISTEN
    ]
    names = {name for name, _, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening  # the cluster is this process's
    outside = [(n, ip, port) for n, ip, port in listening if not _loopback(ip)]
    assert outside == []


def test_the_local_clusters_workers_run_at_normal_priority(ray_cluster: None) -> None:
    """Agents run in Ray's workers, which Ray starts at nice 15: beside any busy process on the
    machine they starved until model calls timed out. OwlClaw's local cluster starts them at 0."""
    import ray

    @ray.remote
    def niceness() -> int:
        return os.nice(0)

    assert ray.get(niceness.remote()) == 0


def _connections(process: psutil.Process) -> list[Any]:
    try:
        return list(process.net_connections(kind="inet"))
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return []


def _loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def test_the_local_clusters_workers_inherit_the_agents_environment() -> None:
    """``worker_env`` (the configured scripts, litellm's offline cost map) reaches the workers
    without a runtime_env, which kept them from being the ones Ray starts ahead; the driver's
    own environment is as it was (``owlclaw`` sets the cost map in it when imported)."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OWLCLAW_SCRIPTS_DIR", "LITELLM_LOCAL_MODEL_COST_MAP", "RAY_ADDRESS")
    }
    done = python(WORKER_ENV, env)
    assert done.stdout.split() == ["/scripts/of/the/test", "True", "-"]


def python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``code`` run by a new Python process with ``env``, which must succeed."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done
