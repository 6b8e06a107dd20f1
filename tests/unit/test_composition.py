"""The composition root's choices from the configuration: the memory view's embedder for a
placement, whether the local Hatchet engine starts, and the memory view's files."""

from __future__ import annotations

import msgspec
import pytest

from actors.embedding import NodeEmbedder
from owlclaw.compose.memory import memory_options
from owlclaw.compose.write import starts_hatchet_engine, views_embedder
from owlclaw.config import MemoryConfig, OwlClawConfig, RuntimeConfig, TimersConfig


def test_agents_on_ray_share_the_nodes_embedder_of_the_configured_model() -> None:
    memory = MemoryConfig(embedding_model="openai/text-embedding-3-small", embedding_dimensions=8)
    config = OwlClawConfig(runtime=RuntimeConfig(placement="shared"), memory=memory)

    embedder = views_embedder(config)

    assert isinstance(embedder, NodeEmbedder)
    assert (embedder.model, embedder.dimensions) == ("openai/text-embedding-3-small", 8)


def test_agents_hosted_here_leave_the_view_its_own_model() -> None:
    assert views_embedder(OwlClawConfig(runtime=RuntimeConfig(placement="local"))) is None


def test_the_local_hatchet_engine_starts_only_for_hatchet_without_an_engine_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    hatchet = OwlClawConfig(timers=TimersConfig(backend="hatchet"))
    builtin = msgspec.structs.replace(hatchet, timers=TimersConfig(backend="builtin"))
    monkeypatch.delenv("HATCHET_CLIENT_TOKEN", raising=False)
    assert starts_hatchet_engine(hatchet)
    assert not starts_hatchet_engine(builtin)
    monkeypatch.setenv("HATCHET_CLIENT_TOKEN", "an external engine's token")
    assert not starts_hatchet_engine(hatchet)


def test_the_memory_view_writes_memory_files_unless_told_not_to() -> None:
    config = OwlClawConfig(data_dir="/srv/owlclaw")

    assert memory_options(config)["memory_dir"] == config.memory_path
    assert memory_options(config, files=False)["memory_dir"] is None
