"""Token counts of prompt text with the tokenizer litellm's ``token_counter`` picks for the model,
without importing litellm where it can be helped: litellm costs seconds and ~150 MB, and agent
hosts count every prompt (docs/limits.md, The system prompt's budget).

litellm counts a model with a Hugging Face tokenizer when it names a Claude model it lists (but
Claude 3), DeepSeek V3/V4, Llama 2/3 (or Replicate) or Cohere's Command R; otherwise with
tiktoken: an OpenAI model's own encoding, anything else (``scripted/``, ``ollama/...``, Gemini,
Claude 3) with cl100k_base. This module counts:

- a model tiktoken names an encoding for (``gpt-4o``, ``openai/gpt-4``), and any model whose
  name is not an OpenAI, Azure or Hugging Face-tokenized one, with tiktoken directly: the same
  encoding litellm picks, read from litellm's bundled encoding files (found without importing
  litellm, so it works offline as litellm does);
- every other model (names that may be Hugging Face-tokenized, Azure deployments, OpenAI
  models newer than tiktoken's table or that litellm's bundled model list files under OpenAI
  or Azure) with ``litellm.token_counter`` itself, importing litellm on first use.

tests/unit/test_tokens.py checks the first kind against litellm over its whole model list."""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiktoken import Encoding

TokenCount = Callable[[str], int]
"""The tokens of a text for one model."""

DEFAULT_ENCODING = "cl100k_base"
"""litellm's tokenizer for a model it has no other for."""

_HUGGING_FACE = re.compile(r"claude|deepseek|llama-[23]|replicate|command-r", re.IGNORECASE)
"""Names litellm may count with a Hugging Face tokenizer (a superset: what matches is counted
by litellm itself, which decides)."""
_OPENAI = re.compile(r"(^|/)(gpt|o\d|chatgpt|text-|davinci|babbage|codex|ft:)|^azure|^openai/")
"""Names litellm may resolve to an OpenAI model beyond tiktoken's table (a superset, as above)."""
_OPENAI_PROVIDERS = frozenset(
    {
        "openai",
        "text-completion-openai",
        "azure",
        "azure_text",
        "azure_ai",
        "vertex_ai-openai_models",
    }
)


@lru_cache(maxsize=64)
def token_counter(model: str) -> TokenCount:
    """The counter of ``model``'s tokens (module docstring: tiktoken, or litellm's)."""
    encoding = tiktoken_encoding(model)
    if encoding is None:
        return _litellm_counter(model)
    enc = _encoding(encoding)

    def count(text: str) -> int:
        return len(enc.encode(text, disallowed_special=())) if text else 0

    return count


def tiktoken_encoding(model: str) -> str | None:
    """The tiktoken encoding litellm counts ``model`` with, or None when only litellm can say
    (module docstring)."""
    if _HUGGING_FACE.search(model):
        return None
    from tiktoken.model import MODEL_TO_ENCODING

    name = model.removeprefix("openai/")
    if name in MODEL_TO_ENCODING:
        return MODEL_TO_ENCODING[name]
    if _OPENAI.search(model) or model in _openai_listed():
        return None
    return DEFAULT_ENCODING


@lru_cache(maxsize=1)
def _openai_listed() -> frozenset[str]:
    """The models litellm's bundled model list files under OpenAI or Azure (it may resolve them
    to an OpenAI model's encoding)."""
    path = _litellm_dir() / "model_prices_and_context_window_backup.json"
    listed = json.loads(path.read_text(encoding="utf-8"))
    return frozenset(
        name
        for name, entry in listed.items()
        if isinstance(entry, dict) and entry.get("litellm_provider") in _OPENAI_PROVIDERS
    )


@lru_cache(maxsize=8)
def _encoding(name: str) -> Encoding:
    """tiktoken's ``name`` from litellm's bundled files (as litellm sets TIKTOKEN_CACHE_DIR,
    unless CUSTOM_TIKTOKEN_CACHE_DIR says otherwise)."""
    custom = os.environ.get("CUSTOM_TIKTOKEN_CACHE_DIR")
    os.environ["TIKTOKEN_CACHE_DIR"] = custom or str(_bundled_tokenizers())
    import tiktoken

    return tiktoken.get_encoding(name)


def _bundled_tokenizers() -> Path:
    return _litellm_dir() / "litellm_core_utils" / "tokenizers"


def _litellm_dir() -> Path:
    """litellm's package directory, located without importing litellm."""
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("litellm is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _litellm_counter(model: str) -> TokenCount:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    def count(text: str) -> int:
        return int(litellm.token_counter(model=model, text=text)) if text else 0

    return count
