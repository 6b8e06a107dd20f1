"""Registers OwlClaw's offline providers (``scripted/``, ``replay/``) with litellm, once per
process."""

from __future__ import annotations

import os
import threading
from typing import Any

_lock = threading.Lock()
_registered = False


def litellm_with_offline_providers() -> Any:
    """litellm, imported lazily (seconds, ~200 MB), with the offline providers registered."""
    global _registered  # noqa: PLW0603 - registration is process-wide in litellm itself
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    with _lock:
        if not _registered:
            from owlclaw.llm import replay, scripted

            ours = {scripted.PROVIDER: scripted, replay.PROVIDER: replay}
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
