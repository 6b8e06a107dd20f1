"""The node's shared actors: one per node and kind, found or started by whoever needs it first."""

from __future__ import annotations

from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors import NAMESPACE


def node_actor(actor_class: Any, kind: str, *args: Any) -> Any:
    """The actor ``<kind>:<this node>`` of ``actor_class``, started with ``args`` if it is not
    running: detached (it outlives the actor that started it and serves the next ones) and
    pinned to this node."""
    node = ray.get_runtime_context().get_node_id()
    return actor_class.options(
        name=f"{kind}:{node}",
        namespace=NAMESPACE,
        lifetime="detached",
        get_if_exists=True,
        scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
    ).remote(*args)
