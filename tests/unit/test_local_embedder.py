"""The local model gives the vectors of its former transformers + torch implementation.

``tests/data/minilm_reference.json`` holds that implementation's vectors (its ``generated_by``
says which), for texts of mixed lengths: two past the 256-token limit, empty and blank ones,
non-Latin scripts, emoji, code, control and zero-width characters.
"""

from __future__ import annotations

import base64
import json
import math
import struct
import subprocess
import sys
from pathlib import Path

from projections.embedders import LOCAL_MODEL, Embedder, LocalEmbedder

REFERENCE = Path(__file__).parent.parent / "data" / "minilm_reference.json"
TOLERANCE = 1e-4  # in cosine


def _reference() -> tuple[list[str], list[list[float]]]:
    data = json.loads(REFERENCE.read_text())
    assert data["model"] == LOCAL_MODEL
    vectors = [list(struct.unpack("<384f", base64.b64decode(v))) for v in data["vectors"]]
    return data["texts"], vectors


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


def test_vectors_match_the_reference_in_one_batch(local_embedder: Embedder) -> None:
    texts, expected = _reference()
    got = local_embedder.embed(texts)
    assert len(got) == len(texts)
    for text, vector, want in zip(texts, got, expected, strict=True):
        assert len(vector) == 384
        assert abs(math.fsum(x * x for x in vector) - 1) < 1e-5, text[:40]
        assert _cosine(vector, want) >= 1 - TOLERANCE, text[:40]


def test_vectors_match_the_reference_one_text_at_a_time(local_embedder: Embedder) -> None:
    """Without the batch's padding."""
    texts, expected = _reference()
    for text, want in zip(texts, expected, strict=True):
        [vector] = local_embedder.embed([text])
        assert _cosine(vector, want) >= 1 - TOLERANCE, text[:40]


def test_the_local_models_threads_wait_without_spinning(local_embedder: Embedder) -> None:
    """Spinning pool threads took the core the agents and PostgreSQL needed (embedders.py)."""
    assert isinstance(local_embedder, LocalEmbedder)
    _, session = local_embedder._load()
    options = session.get_session_options()
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_loading_the_local_model_leaves_torch_unimported(local_embedder: Embedder) -> None:
    """Where an older install left torch, transformers or sentence-transformers beside it."""
    code = (
        "import sys; from projections.embedders import LocalEmbedder; "
        "LocalEmbedder().embed(['x']); "
        "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers', 'sklearn')"
        " if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
