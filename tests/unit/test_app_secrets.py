"""Which variables are an app's secrets: ``[secrets] env`` (each set and long enough, or the
app is refused at start), the variables its configuration reads credentials from, and the
process's variables named like provider keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlclaw.app import AppError, load_app
from owlclaw.runtime.secrets import check_declared, secret_values
from owlclaw.server.validation import InvalidApps, validate_apps
from tests.apps import make_app

CONFIG = """
[secrets]
env = ["CRM_TOKEN"]

[tools.channels.ops]
url = "https://hooks.example.com/ops"
headers_env = { Authorization = "OPS_HOOK_AUTH" }

[mcp.servers.crm]
url = "https://crm.example.com/mcp"
headers_env = { Authorization = "CRM_MCP_AUTH" }

[mcp.servers.local]
command = "crm-mcp"
env = { CRM_API_KEY = "literal-key-123", LOG_LEVEL = "verbose-debugging" }

[a2a.peers.billing]
url = "https://billing.example.com"
headers_env = { Authorization = "BILLING_PEER_AUTH" }
"""
ENVIRON = {
    "CRM_TOKEN": "crm-token-0123456789",
    "OPS_HOOK_AUTH": "Bearer ops-hook-secret",
    "CRM_MCP_AUTH": "Bearer crm-mcp-secret",
    "BILLING_PEER_AUTH": "Bearer billing-secret",
    "OPENAI_API_KEY": "sk-openai-abcdefgh",
    "HOME": "/home/someone-long",
    "MAX_TOKENS": "4096",
}


def test_an_apps_secrets_are_declared_implicit_and_provider_keys(tmp_path: Path) -> None:
    app = load_app(make_app(tmp_path / "desk", config=CONFIG))
    assert secret_values(app, ENVIRON) == {
        "CRM_TOKEN": "crm-token-0123456789",
        "OPS_HOOK_AUTH": "Bearer ops-hook-secret",
        "CRM_MCP_AUTH": "Bearer crm-mcp-secret",
        "BILLING_PEER_AUTH": "Bearer billing-secret",
        "OPENAI_API_KEY": "sk-openai-abcdefgh",
        "mcp.local.CRM_API_KEY": "literal-key-123",
    }


def test_without_an_app_only_the_processs_provider_keys_are_secrets() -> None:
    assert secret_values(None, ENVIRON) == {"OPENAI_API_KEY": "sk-openai-abcdefgh"}


def test_a_declared_secret_that_is_not_set_refuses_the_app_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = make_app(tmp_path / "desk", config='[secrets]\nenv = ["CRM_TOKEN"]\n')
    monkeypatch.delenv("CRM_TOKEN", raising=False)
    with pytest.raises(InvalidApps) as caught:
        validate_apps([root], load_timeout_s=30)
    [problem] = caught.value.problems
    assert "[secrets] env names CRM_TOKEN, not set in the environment" in problem
    monkeypatch.setenv("CRM_TOKEN", "crm-token-0123456789")
    assert [a.agent_id for a in validate_apps([root], load_timeout_s=30)] == ["desk"]


def test_a_declared_secret_too_short_to_redact_refuses_the_app(tmp_path: Path) -> None:
    app = load_app(make_app(tmp_path / "desk", config='[secrets]\nenv = ["PIN"]\n'))
    with pytest.raises(AppError, match="the value of PIN has fewer than 8 characters"):
        check_declared(app, {"PIN": "1234"})


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('[secrets]\nenvs = ["X"]\n', "[secrets]: unknown key 'envs' (did you mean 'env'?)"),
        ('[secrets]\nenv = ["NOT-A-NAME"]\n', "[secrets] env"),
        ('[secret]\nenv = ["X"]\n', "unknown table 'secret' (did you mean 'secrets'?)"),
    ],
)
def test_an_invalid_secrets_table_refuses_the_app(
    tmp_path: Path, config: str, expected: str
) -> None:
    root = make_app(tmp_path / "desk", config=config)
    with pytest.raises(InvalidApps) as caught:
        validate_apps([root], load_timeout_s=30)
    assert expected in caught.value.problems[0]
