"""Configuration: defaults, owlclaw.toml, OWLCLAW_* overrides, errors that name the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlclaw.config import ConfigError, load_config


def test_defaults_without_file_or_environment(tmp_path: Path) -> None:
    config = load_config(tmp_path / "missing.toml", environ={})
    assert config.database_url is None
    assert config.ledger.snapshot_interval == 100


def test_environment_overrides_the_file(tmp_path: Path) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text('data_dir = "/srv/owl"\n[ledger]\nsnapshot_interval = 50\n')
    config = load_config(toml, environ={"OWLCLAW_SNAPSHOT_INTERVAL": "25"})
    assert config.data_dir == "/srv/owl"
    assert config.ledger.snapshot_interval == 25


def test_the_archive_directory_is_under_the_data_dir_unless_configured(tmp_path: Path) -> None:
    default = load_config(tmp_path / "none.toml", environ={"OWLCLAW_DATA_DIR": str(tmp_path)})
    assert default.archive_path == tmp_path / "archive"
    assert default.ledger.archive_after_days is None
    environ = {"OWLCLAW_ARCHIVE_DIR": str(tmp_path / "cold"), "OWLCLAW_ARCHIVE_AFTER_DAYS": "90"}
    configured = load_config(tmp_path / "none.toml", environ=environ)
    assert configured.archive_path == tmp_path / "cold"
    assert configured.ledger.archive_after_days == 90
    with pytest.raises(ConfigError, match="archive_after_days"):
        load_config(tmp_path / "none.toml", environ={"OWLCLAW_ARCHIVE_AFTER_DAYS": "0"})


def test_shared_hosts_default_to_the_cores_at_most_four(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for cores, hosts in ((1, 1), (2, 2), (16, 4)):
        monkeypatch.setattr("os.cpu_count", lambda cores=cores: cores)
        toml = tmp_path / "owlclaw.toml"
        toml.write_text('[runtime]\nplacement = "shared"\n')
        assert load_config(toml, environ={}).runtime.hosts == hosts
    config = load_config(tmp_path / "missing.toml", environ={"OWLCLAW_HOSTS": "12"})
    assert config.runtime.hosts == 12


@pytest.mark.parametrize(
    ("text", "environ", "field"),
    [
        ("[ledger]\nsnapshot_interval = 1\n", {}, "snapshot_interval"),
        ("", {"OWLCLAW_SNAPSHOT_INTERVAL": "many"}, "snapshot_interval"),
        ("databse_url = 'x'\n", {}, "databse_url"),
        ("[runtime]\nrun_timeout_s = -1\n", {}, "run_timeout_s"),
        ("[runtime]\nparallel_tool_calls = 0\n", {}, "parallel_tool_calls"),
        ("[runtime]\nparallel_tool_calls = 'all'\n", {}, "parallel_tool_calls"),
        ("[runtime]\nparallel_tool_call = 4\n", {}, "parallel_tool_call"),
        ("", {"OWLCLAW_MAX_FUNCTION_CALLS": "0"}, "max_function_calls"),
        ("", {"OWLCLAW_HOSTS": "0"}, "hosts"),
        ("[ledger]\nencrypt = 'maybe'\n", {}, "encrypt"),
        ("", {"OWLCLAW_LEDGER_ENCRYPT": "yes please"}, "encrypt"),
    ],
)
def test_invalid_values_name_the_field(
    tmp_path: Path, text: str, environ: dict[str, str], field: str
) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError, match=field):
        load_config(toml, environ=environ)


def test_encryption_is_on_unless_switched_off(tmp_path: Path) -> None:
    toml = tmp_path / "owlclaw.toml"
    assert load_config(toml, environ={}).ledger.encrypt is True
    toml.write_text("[ledger]\nencrypt = false\n")
    assert load_config(toml, environ={}).ledger.encrypt is False
    assert load_config(toml, environ={"OWLCLAW_LEDGER_ENCRYPT": "true"}).ledger.encrypt is True


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text("data_dir = \n")
    with pytest.raises(ConfigError, match=r"owlclaw\.toml"):
        load_config(toml, environ={})


def test_the_docs_document_every_setting() -> None:
    """The configuration reference (docs/configuration.md) lists every key (dotted) and every
    OWLCLAW_* variable."""
    import msgspec

    from owlclaw.app import AgentSettings
    from owlclaw.config import ENV_FIELDS, ENV_PREFIX, OwlClawConfig
    from owlclaw.tools.governance import Governance

    reference = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()

    def keys(struct: type[msgspec.Struct], prefix: str = "") -> list[str]:
        found = []
        for field in msgspec.structs.fields(struct):
            kind = field.type
            if isinstance(kind, type) and issubclass(kind, msgspec.Struct):
                found += keys(kind, f"{prefix}{field.name}.")
            else:
                found.append(prefix + field.name)
        return found

    missing = [f"`{k}`" for k in keys(OwlClawConfig) if f"`{k}`" not in reference]
    missing += [ENV_PREFIX + v for v in ENV_FIELDS if ENV_PREFIX + v not in reference]
    missing += [f"[agent] {k}" for k in keys(AgentSettings) if f"`[agent] {k}`" not in reference]
    missing += [k for k in keys(Governance) if k not in reference]
    assert not missing, f"docs/configuration.md lacks {missing}"
