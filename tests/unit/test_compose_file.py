"""docker-compose.yml is checked the way `docker compose config` would: the Compose
specification's JSON schema (tests/data/compose_spec.json, from docker-compose 1.29.2), then
the references between its parts, then that OwlClaw's settings in it are real settings."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = re.compile(r"\$\{(\w+)(?::?[-?][^}]*)?\}")


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    return data


def validate(document: dict[str, Any]) -> None:
    import jsonschema

    schema = json.loads((ROOT / "tests" / "data" / "compose_spec.json").read_text())
    jsonschema.Draft201909Validator(schema).validate(document)


def test_the_file_follows_the_compose_specification(compose: dict[str, Any]) -> None:
    validate(compose)


def test_a_misspelled_service_key_is_caught(compose: dict[str, Any]) -> None:
    import jsonschema

    broken = json.loads(json.dumps(compose))
    broken["services"]["owlclaw"]["enviroment"] = {}
    with pytest.raises(jsonschema.ValidationError, match="enviroment"):
        validate(broken)


def test_it_has_the_production_parts(compose: dict[str, Any]) -> None:
    services = compose["services"]
    assert services["postgres"]["image"].startswith("pgvector/pgvector:")
    assert services["hatchet"]["image"].endswith("hatchet-lite:v0.104.7")
    assert services["langfuse-web"]["image"].startswith("langfuse/langfuse:")
    assert services["owlclaw"]["build"] == "." and (ROOT / "Dockerfile").is_file()
    assert services["owlclaw"]["command"][0] == "run"


def test_references_resolve(compose: dict[str, Any]) -> None:
    services = compose["services"]
    declared_volumes = set(compose["volumes"])
    for name, service in services.items():
        for dependency in service.get("depends_on", {}):
            assert dependency in services, f"{name} depends on unknown {dependency}"
        for volume in service.get("volumes", []):
            source = volume.split(":")[0]
            assert source.startswith(".") or source in declared_volumes, (name, source)
        for port in service.get("ports", []):
            assert port.startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"


def test_owlclaw_talks_to_services_that_exist_with_settings_that_exist(
    compose: dict[str, Any],
) -> None:
    from owlclaw.config import ENV_FIELDS, ENV_PREFIX

    services = compose["services"]
    env = services["owlclaw"]["environment"]
    for key in env:
        if key.startswith(ENV_PREFIX):
            assert key.removeprefix(ENV_PREFIX) in ENV_FIELDS, f"{key} is not a setting"
    hosts = [
        urlparse(env["OWLCLAW_DATABASE_URL"]).hostname,
        env["HATCHET_CLIENT_HOST_PORT"].split(":")[0],
        urlparse(env["HATCHET_CLIENT_SERVER_URL"]).hostname,
        urlparse(env["LANGFUSE_HOST"]).hostname,
    ]
    assert all(host in services for host in hosts), hosts
    assert env["OWLCLAW_SERVER_HOST"] == "0.0.0.0"  # inside its container; published on loopback
    assert services["owlclaw"]["ports"] == ["127.0.0.1:8765:8765"]


def test_every_variable_it_reads_is_documented(compose: dict[str, Any]) -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    deployment = (ROOT / "docs" / "deployment.md").read_text()
    variables = set(VARIABLE.findall(text))
    assert variables, "the file reads no variables?"
    undocumented = sorted(v for v in variables if v not in deployment)
    assert not undocumented, f"docs/deployment.md does not mention {undocumented}"
