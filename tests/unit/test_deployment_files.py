"""cluster.yaml is a valid Ray cluster-launcher config (checked with Ray's own schema)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def validated(config: dict[str, Any]) -> None:
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(config))


def test_cluster_yaml_passes_rays_schema() -> None:
    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    validated(config)
    nodes = config["available_node_types"]
    assert config["head_node_type"] in nodes and nodes["agents"]["max_workers"] >= 1
    assert any("owlclaw" in command for command in config["setup_commands"])


def test_a_misspelled_key_fails_the_same_check() -> None:
    import jsonschema

    config = yaml.safe_load((ROOT / "cluster.yaml").read_text())
    config["max_workerz"] = config.pop("max_workers")
    with pytest.raises(jsonschema.ValidationError, match="max_workerz"):
        validated(config)


def test_agent_actors_get_the_environment_their_libraries_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from actors.cluster import worker_env
    from owlclaw.config import OwlClawConfig, RuntimeConfig

    monkeypatch.setenv("OWLCLAW_DATABASE_URL", "postgresql://db.internal/owlclaw")
    monkeypatch.setenv("LANGFUSE_PUBLIC_KEY", "pk")
    monkeypatch.setenv("UNRELATED_SECRET", "x")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    env = worker_env(OwlClawConfig(runtime=RuntimeConfig(scripts_dir="/scripts")))
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert env["OWLCLAW_DATABASE_URL"] == "postgresql://db.internal/owlclaw"
    assert env["OWLCLAW_SCRIPTS_DIR"] == "/scripts" and env["LANGFUSE_PUBLIC_KEY"] == "pk"
    assert env["OPENAI_API_KEY"] == "sk-test"
    assert "UNRELATED_SECRET" not in env
