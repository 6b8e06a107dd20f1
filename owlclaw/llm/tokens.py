"""Token counts of prompt text with the model's own tokenizer, through litellm: the prompt's
budgets are in the model's tokens, not a characters-per-token guess.

litellm picks the tokenizer from the model string (tiktoken for OpenAI models, Hugging Face
tokenizers for Llama, DeepSeek, older Claude, Cohere); a model it does not know (``scripted/``,
``ollama/...``), or a Hugging Face tokenizer it cannot fetch offline, is counted with its
default tokenizer (tiktoken's cl100k_base)."""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import lru_cache

TokenCount = Callable[[str], int]
"""The tokens of a text for one model."""


@lru_cache(maxsize=64)
def token_counter(model: str) -> TokenCount:
    """The counter of ``model``'s tokens (litellm imported on first use: it costs seconds)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    def count(text: str) -> int:
        return int(litellm.token_counter(model=model, text=text)) if text else 0

    return count
