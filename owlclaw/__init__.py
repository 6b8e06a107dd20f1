"""OwlClaw: an event-sourced actor runtime for autonomous LLM agents."""

import os

# litellm fetches a model cost map from the internet at import unless told not to; every
# OwlClaw process (CLI, Ray workers, tests) imports this package first.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from owlclaw.tools.capabilities import Registry
from owlclaw.tools.tool import ToolContext

__all__ = ["Registry", "ToolContext"]
