"""OwlClaw: an event-sourced actor runtime for autonomous LLM agents."""

import os
from typing import TYPE_CHECKING, Any

# litellm fetches a model cost map from the internet at import unless told not to; every
# OwlClaw process (CLI, Ray workers, tests) imports this package first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

if TYPE_CHECKING:
    from owlclaw.tools.capabilities import Registry
    from owlclaw.tools.tool import ToolContext

__all__ = ["Registry", "ToolContext"]


def __getattr__(name: str) -> Any:
    """``Registry`` and ``ToolContext`` (an app's handlers.py imports them), imported on first
    use: every OwlClaw process imports this package, and the tools' schemas (jsonschema, the
    app loader) cost a CLI command ~0.25 s it mostly does not need."""
    if name == "Registry":
        from owlclaw.tools.capabilities import Registry

        return Registry
    if name == "ToolContext":
        from owlclaw.tools.tool import ToolContext

        return ToolContext
    raise AttributeError(f"module 'owlclaw' has no attribute {name!r}")
