"""``[mcp.servers.<name>]``: what an app may configure, and what it is refused, by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from owlclaw.app import AppError, load_app
from owlclaw.mcp.config import McpServer, mcp_servers


def servers(**tables: dict[str, Any]) -> dict[str, McpServer]:
    return mcp_servers({"mcp": {"servers": tables}}, "app/owlclaw.toml")


def test_a_stdio_and_an_http_server_parse_with_their_defaults() -> None:
    parsed = servers(
        files={"command": "npx", "args": ["server-filesystem", "/tmp"], "env": {"A": "1"}},
        remote={"url": "https://mcp.example/mcp", "headers_env": {"Authorization": "TOKEN"}},
    )
    assert parsed["files"].args == ("server-filesystem", "/tmp")
    assert parsed["files"].include == ("*",) and parsed["files"].exclude == ()
    assert parsed["remote"].headers_env == {"Authorization": "TOKEN"}
    assert parsed["remote"].timeout_s == 30.0 and parsed["remote"].connect_timeout_s == 30.0
    assert mcp_servers({}) == {}


@pytest.mark.parametrize(
    ("name", "table", "says"),
    [
        ("both", {"command": "x", "url": "http://h/mcp"}, "exactly one of command"),
        ("neither", {"include": ["*"]}, "exactly one of command"),
        ("ftp", {"url": "ftp://h/mcp"}, "http:// or https://"),
        ("http-args", {"url": "http://h/mcp", "args": ["-v"]}, "args and env are for a command"),
        ("cmd-headers", {"command": "x", "headers_env": {"A": "B"}}, "headers_env is for a url"),
        ("double__under", {"command": "x"}, "single '_'"),
        ("trailing_", {"command": "x"}, "single '_'"),
        ("has.dot", {"command": "x"}, "prefixes its tools' names"),
        ("typo", {"command": "x", "timeout": 5}, "timeout"),
        ("zero", {"command": "x", "timeout_s": 0}, "timeout_s"),
        ("no-start", {"command": "x", "connect_timeout_s": -1}, "connect_timeout_s"),
    ],
)
def test_a_misconfigured_server_is_refused_naming_it(
    name: str, table: dict[str, Any], says: str
) -> None:
    with pytest.raises(AppError) as refused:
        servers(**{name: table})
    assert "app/owlclaw.toml" in str(refused.value) and says in str(refused.value)
    assert name in str(refused.value)


def test_an_unknown_field_of_the_mcp_table_is_refused() -> None:
    with pytest.raises(AppError, match="server"):
        mcp_servers({"mcp": {"server": {}}})


def test_the_connection_key_differs_with_the_settings_only() -> None:
    one = servers(a={"command": "x", "args": ["1"]})["a"]
    same = servers(a={"command": "x", "args": ["1"]})["a"]
    other = servers(a={"command": "x", "args": ["2"]})["a"]
    assert one.key == same.key != other.key


def test_an_app_may_have_an_mcp_table(tmp_path: Path) -> None:
    (tmp_path / "SOUL.md").write_text("soul")
    (tmp_path / "IDENTITY.md").write_text("identity")
    (tmp_path / "owlclaw.toml").write_text('[mcp.servers.time]\ncommand = "mcp-server-time"\n')
    app = load_app(tmp_path)
    assert mcp_servers(app.config)["time"].command == "mcp-server-time"


def test_header_values_are_read_from_the_environment_and_a_missing_one_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from owlclaw.mcp.connection import headers

    server = servers(r={"url": "https://h/mcp", "headers_env": {"Authorization": "R_TOKEN"}})["r"]
    monkeypatch.delenv("R_TOKEN", raising=False)
    with pytest.raises(LookupError, match="R_TOKEN"):
        headers(server)
    monkeypatch.setenv("R_TOKEN", "Bearer s3cret")
    assert headers(server) == {"Authorization": "Bearer s3cret"}
