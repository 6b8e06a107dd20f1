"""Connecting a driver to Ray with what every OwlClaw worker process needs in its environment,
and disconnecting it (which stops a local cluster it started)."""

from __future__ import annotations

import os
import signal
import threading

import ray

from actors.directory import NAMESPACE
from owlclaw.config import OwlClawConfig

PASSED_ON = (
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "HF_HUB_OFFLINE",
    "LANGFUSE_PUBLIC_KEY",
    "LANGFUSE_SECRET_KEY",
    "LANGFUSE_HOST",
)

PROVIDER_SUFFIXES = ("_API_KEY", "_API_BASE", "_BASE_URL")
"""LLM provider settings litellm reads from the environment (OPENAI_API_KEY, ...)."""


def worker_env(config: OwlClawConfig) -> dict[str, str]:
    """Environment for agent actors: offline cost map, tracing and provider keys and the
    driver's OWLCLAW_* settings (the actors also receive the whole config; these cover
    libraries that read the environment themselves)."""
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    env |= {
        k: v
        for k, v in os.environ.items()
        if k in PASSED_ON or k.startswith("OWLCLAW_") or k.endswith(PROVIDER_SUFFIXES)
    }
    if config.runtime.scripts_dir:
        env["OWLCLAW_SCRIPTS_DIR"] = config.runtime.scripts_dir
    return env


def connect(config: OwlClawConfig, **init_options: object) -> None:
    """Join the cluster at ``config.ray_address`` (OWLCLAW_RAY_ADDRESS) or start a local one.

    A local cluster runs without the dashboard (nothing here serves it). The caller's SIGTERM
    and SIGINT handlers are kept: ``ray.init`` replaces them with its own (and its core worker
    with one that aborts), so a SIGTERM would skip the caller's shutdown, leaving the
    embedded PostgreSQL and Ray's agent processes behind."""
    if ray.is_initialized():
        return
    if config.ray_address is None:  # a local cluster: keep its traffic on loopback
        init_options.setdefault("_node_ip_address", "127.0.0.1")
        init_options.setdefault("include_dashboard", False)
    on_main_thread = threading.current_thread() is threading.main_thread()
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    ray.init(
        address=config.ray_address,
        namespace=NAMESPACE,
        runtime_env={"env_vars": worker_env(config)},
        **init_options,  # type: ignore[arg-type]
    )
    if on_main_thread:
        for sig, handler in kept.items():
            if handler is not None:
                signal.signal(sig, handler)


def disconnect() -> None:
    """Leave the cluster; a local cluster this process started stops with its processes."""
    if ray.is_initialized():
        ray.shutdown()
