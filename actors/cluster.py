"""Connecting a driver to Ray with what every OwlClaw worker process needs in its environment,
and disconnecting it (which stops a local cluster it started)."""

from __future__ import annotations

import os
import signal
import tempfile
import threading
from pathlib import Path

import ray
from ray._private import ray_constants

from actors.directory import NAMESPACE
from owlclaw.config import OwlClawConfig
from owlclaw.environ import overlaid

LOCAL_TEMP_DIR = Path(tempfile.gettempdir()) / f"owlclaw-ray-{os.getuid()}"
"""Where a local cluster keeps its sessions: not Ray's default /tmp/ray, so that neither a
``ray start`` there nor Ray's CLI takes OwlClaw's cluster for the machine's current one."""

PASSED_ON = (
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "HF_HUB_OFFLINE",
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_HOST",
)

WORKER_NICENESS = 0
"""The nice level of a local cluster's workers (Ray's default is 15); ``cluster.yaml`` sets the
same for a cluster's nodes (``RAY_worker_niceness``)."""

PROVIDER_SUFFIXES = ("_API_KEY", "_API_BASE", "_BASE_URL")
"""LLM provider settings litellm reads from the environment (OPENAI_API_KEY, ...)."""


def worker_env(config: OwlClawConfig) -> dict[str, str]:
    """Environment for agent actors: offline cost map, tracing (Langfuse keys, OTEL_*) and
    provider keys and the driver's OWLCLAW_* settings (the actors also receive the whole config;
    these cover libraries that read the environment themselves)."""
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env |= {
        k: v
        for k, v in os.environ.items()
        if k in PASSED_ON or k.startswith(("OWLCLAW_", "OTEL_")) or k.endswith(PROVIDER_SUFFIXES)
    }
    if config.runtime.scripts_dir:
        env["OWLCLAW_SCRIPTS_DIR"] = config.runtime.scripts_dir
    return env


def connect(config: OwlClawConfig, **init_options: object) -> None:
    """Join the cluster at ``config.ray_address`` (OWLCLAW_RAY_ADDRESS) or start a local one.

    Without a configured address the cluster is always a new one of OwlClaw's own (address
    "local"): ``ray.init()`` without one adopts whatever cluster the machine last recorded
    (a user's ``ray start``, another tool's, even through RAY_ADDRESS) and dies with it. It
    keeps its files in a temp directory of its own, runs without the dashboard (nothing here
    serves it) and listens on loopback only (``loopback_only``). Its workers, where agents
    run, keep normal CPU priority: Ray starts them at nice 15, and beside anything else busy
    on the machine (PostgreSQL, the Hatchet engine, the server) they got so little CPU that a
    run's model call and a sub-agent's start ran past their timeouts (``WORKER_NICENESS``).

    The caller's SIGTERM and SIGINT handlers are kept: ``ray.init`` replaces them with its own
    (and its core worker with one that aborts), so a SIGTERM would skip the caller's shutdown,
    leaving the embedded PostgreSQL and Ray's agent processes behind."""
    if ray.is_initialized():
        return
    env = worker_env(config)
    inherited: dict[str, str] = {}
    if config.ray_address is None:
        loopback_only()
        init_options.setdefault("include_dashboard", False)
        init_options.setdefault("_temp_dir", str(LOCAL_TEMP_DIR))
        init_options.setdefault("_system_config", {"worker_niceness": WORKER_NICENESS})
        inherited = env
    else:
        init_options["runtime_env"] = {"env_vars": env}
    on_main_thread = threading.current_thread() is threading.main_thread()
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    # A local cluster's raylet copies this process's environment and every worker it starts
    # inherits it. A runtime_env would carry it too, but no worker could then be one Ray started
    # ahead (theirs has none), so each agent host waited for a new worker process and the
    # runtime-env agent. Restored after: the next cluster this process starts (a test's) gets
    # its own.
    with overlaid(inherited):
        ray.init(
            address=config.ray_address or "local",
            namespace=NAMESPACE,
            **init_options,  # type: ignore[arg-type]
        )
    if on_main_thread:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)


def loopback_only() -> None:
    """Make the local cluster this process starts listen on 127.0.0.1 only: its control plane
    (GCS, raylet, workers, agents) has no authentication of its own that a network should meet.

    Ray replaces a loopback ``_node_ip_address`` with the machine's address, and its servers
    then listen on every interface. Its single-machine mode (its default on macOS and Windows,
    ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``) takes 127.0.0.1 as the node's address, so every
    server binds there. The variable is read when ``ray`` is imported, so this process's copy
    is set too; the processes the cluster starts inherit it."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False


def disconnect() -> None:
    """Leave the cluster; a local cluster this process started stops with its processes."""
    if ray.is_initialized():
        ray.shutdown()
