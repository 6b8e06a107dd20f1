"""One embedding model per node, shared by the host actors on it.

The local model takes ~410 MB resident once loaded (onnxruntime); loaded in every host that
recalls, it would multiply by the hosts of a node. Hosts embed a recall's
query through ``NodeEmbedder`` instead: the ``Embedder`` protocol over the node's one embedding
actor of the model (``projections.embedders`` holds the in-process implementations it runs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import ray

from actors.node import node_actor
from projections.embedders import EmbeddingUnavailable, embedder_for


@ray.remote(max_restarts=-1)
class EmbedderActor:
    """Holds the in-process embedder of one model, loaded on its first call."""

    def __init__(self, model: str, dimensions: int):
        self.embedder = embedder_for(model, dimensions)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed(texts)

    def pid(self) -> int:
        return os.getpid()


class NodeEmbedder:
    """The ``Embedder`` of ``model`` served by this node's embedding actor of that model. Its
    failures, and the model's, raise ``EmbeddingUnavailable``."""

    def __init__(self, model: str, dimensions: int):
        self.model = model
        self.dimensions = dimensions
        self._actor: Any = None

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        if self._actor is None:
            self._actor = node_actor(EmbedderActor, kind(self.model), self.model, self.dimensions)
        try:
            # Called from a worker thread of an async host actor: waiting on the reference's
            # future blocks only this thread (ray.get would do the same, but warn that it
            # "blocks the event loop" in the operator's log).
            vectors: list[list[float]] = self._actor.embed.remote(list(texts)).future().result()
        except ray.exceptions.RayError as e:
            raise EmbeddingUnavailable(f"the node's embedder of {self.model} failed: {e}") from e
        return vectors


def kind(model: str) -> str:
    """The embedding actor's kind for ``model`` (its name is ``<kind>:<node>``)."""
    return f"embedder-{model}"
