"""The memory view and its recall store from the configuration.

Apart from ``read`` because a Ray host actor (``actors.ray_host``) opens its own recall store in
its process, and actors sit below the views' composition (they are what ``write`` places).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

from events import Ledger
from owlclaw.background import load_in_background
from owlclaw.config import OwlClawConfig
from projections import MemoryStore, MemoryView
from projections.embedders import Embedder, embedder_for


def memory_options(
    config: OwlClawConfig, embedder: Embedder | None = None, *, files: bool = True
) -> dict[str, Any]:
    """The memory view's constructor options; ``embedder`` replaces its in-process model (a Ray
    process's: the node's shared embedder of that model); ``files``: the view keeps each
    agent's MEMORY.md current (False: the rows only, as a bench that times the view wants)."""
    memory = config.memory
    if embedder is None:
        embedder = embedder_for(memory.embedding_model, memory.embedding_dimensions)
    return {
        "embedder": embedder,
        "size_limit": memory.memory_md_limit_bytes,
        "memory_dir": config.memory_path if files else None,
    }


def open_memory_view(
    ledger: Ledger, config: OwlClawConfig, embedder: Embedder | None = None, *, files: bool = True
) -> MemoryView:
    """The memory view as configured, its tables created (``embedder``, ``files``: see
    ``memory_options``)."""
    view = MemoryView(ledger, **memory_options(config, embedder, files=files))
    view.create_table()
    return view


def open_recall(
    ledger: Ledger, config: OwlClawConfig, embedder: Embedder | None = None, *, files: bool = True
) -> MemoryStore:
    """Recall over the memory view (its tables created); the projection runner fills it."""
    view = open_memory_view(ledger, config, embedder, files=files)
    return MemoryStore(view, half_life_days=config.memory.half_life_days)


class LoadedInBackground:
    """An embedder whose model loads in the background while the server already serves: once
    the load has started, ``embed`` (a recall's query, a remembered memory's indexing) waits for
    it; nothing else does. Before ``start``, ``embed`` loads the model itself, as before."""

    def __init__(self, embedder: Embedder):
        self.model = embedder.model
        self.dimensions = embedder.dimensions
        self._embedder = embedder
        self._loading: Future[object] | None = None

    def start(self, before: Callable[[], object] = lambda: None) -> Future[object]:
        """Load the model in a daemon thread, after ``before()`` (a test holds the load there)."""

        def load() -> object:
            before()
            return self._embedder.embed(["warm-up"])

        self._loading = load_in_background(load, "embedding-model")
        return self._loading

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._loading is not None:
            wait([self._loading])  # a failed load: the embedder's own call below says why
        return self._embedder.embed(texts)
