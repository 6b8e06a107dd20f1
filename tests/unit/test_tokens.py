"""Prompt tokens are counted with the tokenizer litellm picks, without importing litellm in the
agent hosts for the models tiktoken counts (owlclaw/llm/tokens.py)."""

from __future__ import annotations

import os
import subprocess
import sys

from owlclaw.llm.tokens import tiktoken_encoding, token_counter

TEXT = "Hello, 世界! The quick brown fox — 12345 <|endoftext|> over\n\n  tabs\tand émojis 🦉 " * 3


def test_counting_a_tiktoken_model_does_not_import_litellm() -> None:
    code = (
        "import sys\n"
        "from owlclaw.llm.tokens import token_counter\n"
        "for model in ('scripted/demo', 'gpt-4o', 'openai/gpt-4', 'ollama/llama3.2'):\n"
        "    assert token_counter(model)('hello world') > 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'litellm'))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run(
        [sys.executable, "-c", code], check=False, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_counts_are_litellms_for_every_model_it_lists() -> None:
    import litellm

    models = [*litellm.model_cost, "scripted/demo", "ollama/llama3.2", "my-model"]
    counted = [m for m in models if tiktoken_encoding(m) is not None]
    assert "scripted/demo" in counted and "gpt-4o" in counted
    assert "claude-sonnet-4-5" not in counted  # litellm's Hugging Face tokenizer: litellm counts
    differ = [
        m for m in counted if token_counter(m)(TEXT) != litellm.token_counter(model=m, text=TEXT)
    ]
    assert differ == []


def test_the_models_only_litellm_can_count_are_counted_by_litellm() -> None:
    import litellm

    for model in ("claude-sonnet-4-5", "deepseek-chat", "azure/my-deployment", "gpt-9-preview"):
        assert tiktoken_encoding(model) is None
        assert token_counter(model)(TEXT) == litellm.token_counter(model=model, text=TEXT)
    assert token_counter("scripted/demo")("") == 0
