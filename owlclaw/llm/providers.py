"""Registers OwlClaw's offline provider (``scripted/``) with litellm, once per process,
and keeps litellm from logging calls that no callback of its will read."""

from __future__ import annotations

import os
import threading
from concurrent.futures import Future
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from owlclaw.background import load_in_background

_lock = threading.Lock()
_registered = False
_loading: Future[Any] | None = None


def litellm_loading() -> Future[Any]:
    """``litellm_with_offline_providers()``, started in the background on the first call (the
    import takes seconds of CPU: a server starts it once it serves, so that its first run does
    not pay it in full); the same future on every call."""
    global _loading  # noqa: PLW0603 - one import per process
    with _lock:
        if _loading is None:
            _loading = load_in_background(litellm_with_offline_providers, "litellm-import")
        return _loading


def litellm_with_offline_providers() -> Any:
    """litellm, imported lazily (seconds, ~200 MB), with the offline providers registered."""
    global _registered  # noqa: PLW0603 - registration is process-wide in litellm itself
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    with _lock:
        if not _registered:
            from owlclaw.llm import scripted

            ours = {scripted.PROVIDER: scripted}
            others = [p for p in litellm.custom_provider_map if p["provider"] not in ours]
            litellm.custom_provider_map = others + [
                {"provider": name, "custom_handler": module.make_handler()}
                for name, module in ours.items()
            ]
            litellm.suppress_debug_info = True
            _registered = True
            _warm_up(litellm)
    return litellm


def _warm_up(litellm: Any) -> None:
    """One offline completion at start-up: litellm's first call pays ~0.5 s of one-time set-up,
    which would otherwise land on the first real run (e.g. make the first timer fire late)."""
    from owlclaw.llm import scripted

    scripted.register_script("__warm_up__", [{"content": "ready"}])
    litellm.completion(model="scripted/__warm_up__", messages=[{"role": "user", "content": "hi"}])


_CALLBACK_LISTS = (
    "callbacks",
    "input_callback",
    "success_callback",
    "failure_callback",
    "service_callback",
    "audit_log_callbacks",
    "_async_input_callback",
    "_async_success_callback",
    "_async_failure_callback",
)


def unlogged(litellm: Any) -> AbstractContextManager[None]:
    """Where litellm calls skip its success and failure logging, while no litellm callback is
    set in this process (OwlClaw records calls in its ledger and traces them itself).

    That logging builds a payload per call on the event loop and in a thread of its own after
    the response; on 2 cores it contends for the GIL with the ledger thread committing the step
    (+4 ms per tool step measured by ``owlclaw bench runtime --openai``). litellm marks its own
    nested calls the same way (``internal_sub_call``); the response, its usage and its cost are
    unchanged."""
    context = getattr(litellm, "_internal_context", None)  # None: a stand-in (tests)
    if context is None or any(getattr(litellm, name, None) for name in _CALLBACK_LISTS):
        return nullcontext()
    sub_call: AbstractContextManager[None] = context.internal_sub_call()
    return sub_call
