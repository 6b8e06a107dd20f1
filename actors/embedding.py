"""One embedding model per node, shared by the host actors on it.

The local model brings torch and sentence-transformers (~300 MB resident once loaded); loaded in
every host that recalls, it would multiply by the hosts of a node. Hosts embed a recall's query
through ``NodeEmbedder`` instead: the ``Embedder`` protocol over the node's one embedding actor
(``projections.embedders`` holds the in-process implementations it runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import NAMESPACE
from projections.embedders import EmbeddingUnavailable, embedder_for


@ray.remote(max_restarts=-1)
class EmbedderActor:
    """Holds the in-process embedder of one model, loaded on its first call."""

    def __init__(self, model: str, dimensions: int):
        self.embedder = embedder_for(model, dimensions)

    def embed(self, texts: list[str]) -> list[list[float]]:
        return self.embedder.embed(texts)

    def pid(self) -> int:
        import os

        return os.getpid()


class NodeEmbedder:
    """The ``Embedder`` of ``model`` served by this node's embedding actor (started by the
    first host that embeds; detached, so it outlives that host and serves the next ones).
    Its failures, and the model's, raise ``EmbeddingUnavailable``."""

    def __init__(self, model: str, dimensions: int):
        self.model = model
        self.dimensions = dimensions
        self._actor: Any = None

    def actor(self) -> Any:
        """The node's embedding actor of this model, found or started."""
        if self._actor is None:
            node = ray.get_runtime_context().get_node_id()
            self._actor = EmbedderActor.options(  # type: ignore[attr-defined]
                name=actor_name(node, self.model),
                namespace=NAMESPACE,
                lifetime="detached",
                get_if_exists=True,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(self.model, self.dimensions)
        return self._actor

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        try:
            vectors: list[list[float]] = ray.get(self.actor().embed.remote(list(texts)))
        except ray.exceptions.RayError as e:
            raise EmbeddingUnavailable(f"the node's embedder of {self.model} failed: {e}") from e
        return vectors


def actor_name(node_id: str, model: str) -> str:
    return f"embedder:{node_id}:{model}"
