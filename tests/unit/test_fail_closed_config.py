"""Configuration that names something unknown refuses the app, naming it and what was meant:
a misspelled table, key or tool name must never leave an agent ungoverned, and no tool may
silently replace another."""

from __future__ import annotations

from pathlib import Path

import pytest

from events import Ledger
from events import catalog as ev
from owlclaw.app import AppError, load_app
from owlclaw.config import ConfigError, load_config
from owlclaw.runtime.agent_runtime import AgentRuntime
from owlclaw.server.validation import InvalidApps, validate_app, validate_apps
from tests.apps import make_app
from tests.scripted import agent_events, play

PLACE_ORDER = (
    "from owlclaw import Registry\nregistry = Registry()\n\n"
    '@registry.capability("Place an order.")\n'
    "def place_order(symbol: str) -> str:\n    return 'placed ' + symbol\n"
)


def problem(root: Path) -> str:
    with pytest.raises(InvalidApps) as caught:
        validate_apps([root], load_timeout_s=30)
    [only] = caught.value.problems
    return only


# --- the service's owlclaw.toml ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[runtim]\nhosts = 2\n", "unknown table or key 'runtim' (did you mean 'runtime'?)"),
        (
            "databse_url = 'x'\n",
            "unknown table or key 'databse_url' (did you mean 'database_url'?)",
        ),
        ("[runtime]\nhostss = 2\n", "[runtime]: unknown key 'hostss' (did you mean 'hosts'?)"),
        ("[timers]\nbackend = 'builtin'\nleas_s = 5\n", "[timers]: unknown key 'leas_s'"),
        ("[server]\nport = 0\n", "[server] port: Expected `int` >= 1"),
    ],
)
def test_the_service_config_refuses_unknown_tables_and_keys_naming_the_nearest(
    tmp_path: Path, text: str, expected: str
) -> None:
    toml = tmp_path / "owlclaw.toml"
    toml.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(toml, environ={})
    assert str(caught.value).startswith(f"{toml}: ")
    assert expected in str(caught.value)


# --- an app's owlclaw.toml: its tables and keys ----------------------------------------------


def test_a_misspelled_governance_table_refuses_the_app(tmp_path: Path) -> None:
    root = make_app(tmp_path / "desk", config='[governence]\nask = ["place_order"]\n')
    (root / "handlers.py").write_text(PLACE_ORDER)
    message = problem(root)
    assert message.startswith(str(root.resolve() / "owlclaw.toml"))
    assert "unknown table 'governence' (did you mean 'governance'?)" in message
    with pytest.raises(AppError, match="governence"):  # the reloader's load refuses it too
        load_app(root)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (
            "[agent]\nheartbeat = 5\n",
            "[agent]: unknown key 'heartbeat' (did you mean 'heartbeat_s'?)",
        ),
        ("[governance]\nasks = []\n", "[governance]: unknown key 'asks' (did you mean 'ask'?)"),
        (
            "[governance.rate_limits.place_order]\ncalls = 1\nper_second = 60\n",
            "[governance] rate_limits.place_order: unknown key 'per_second' "
            "(did you mean 'per_seconds'?)",
        ),
        (
            "[tools]\nenabled = ['files']\n",
            "[tools]: unknown key 'enabled' (did you mean 'enable'?)",
        ),
        (
            "[tools.files]\nmax_file_byte = 5\n",
            "[tools] files: unknown key 'max_file_byte' (did you mean 'max_file_bytes'?)",
        ),
        ("[tools]\nenable = ['file']\n", "[tools] enable names unknown tools file"),
    ],
)
def test_unknown_keys_in_every_app_table_refuse_the_app(
    tmp_path: Path, config: str, expected: str
) -> None:
    root = make_app(tmp_path / "desk", config=config)
    (root / "handlers.py").write_text(PLACE_ORDER)
    assert expected in problem(root)


# --- tool names in governance ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ('allow = ["place_ordr"]', "allow: 'place_ordr' matches no tool of this app"),
        (
            'deny = ["remembr"]',
            "deny: 'remembr' matches no tool of this app (did you mean 'remember'?)",
        ),
        ('ask = ["place_orders"]', "(did you mean 'place_order'?)"),
        ('ask_if = { place_ordr = "amount > 5" }', "ask_if: 'place_ordr'"),
        (
            "rate_limits = { plac_order = { calls = 1, per_seconds = 60 } }",
            "rate_limits: 'plac_order'",
        ),
        ('deny = ["send_*"]', "deny: 'send_*' matches no tool of this app"),
        ('deny = ["exec"]', "'exec' is a pack tool this app does not enable"),
    ],
)
def test_a_governance_entry_that_names_no_tool_refuses_the_app(
    tmp_path: Path, config: str, expected: str
) -> None:
    root = make_app(tmp_path / "desk", config=f"[governance]\n{config}\n")
    (root / "handlers.py").write_text(PLACE_ORDER)
    message = problem(root)
    assert message.startswith(f"{root.resolve() / 'owlclaw.toml'}: [governance] ")
    assert expected in message
    assert "place_order" in message.rpartition("its tools: ")[2]  # what it could have named


def test_governance_naming_built_ins_capabilities_pack_tools_and_globs_validates(
    tmp_path: Path,
) -> None:
    root = make_app(
        tmp_path / "desk",
        config='[tools]\nenable = ["files"]\n[governance]\nask = ["place_order", "write_*"]\n'
        'deny = ["exec_*", "remember"]\nallow = ["read_file", "place_order", "recall"]\n',
    )
    (root / "handlers.py").write_text(PLACE_ORDER)
    with pytest.raises(InvalidApps, match="exec_"):  # a glob that matches nothing is refused
        validate_apps([root], load_timeout_s=30)
    (root / "owlclaw.toml").write_text(
        (root / "owlclaw.toml").read_text().replace('"exec_*", ', "")
    )
    assert validate_app(root, load_timeout_s=30).agent_id == "desk"


def test_governance_may_name_the_tools_of_the_apps_mcp_servers_before_they_run(
    tmp_path: Path,
) -> None:
    mcp = '[mcp.servers.files]\ncommand = "mcp-files"\n'
    root = make_app(
        tmp_path / "desk",
        config=f'[governance]\ndeny = ["files__write_*"]\nask = ["files__move"]\n{mcp}',
    )
    assert validate_app(root, load_timeout_s=30).agent_id == "desk"
    (root / "owlclaw.toml").write_text('[governance]\ndeny = ["tickets__close"]\n' + mcp)
    assert "deny: 'tickets__close' matches no tool of this app" in problem(root)


def test_a_misconfigured_mcp_server_refuses_the_app_at_start(tmp_path: Path) -> None:
    config = '[mcp.servers.files]\ncommand = "mcp-files"\nurl = "https://h/mcp"\n'
    root = make_app(tmp_path / "desk", config=config)
    message = problem(root)
    assert "[mcp.servers.files]" in message and "exactly one of command" in message


# --- tools named like another -----------------------------------------------------------------


def test_a_capability_named_like_a_built_in_refuses_the_app_naming_both(tmp_path: Path) -> None:
    root = make_app(tmp_path / "desk")
    (root / "handlers.py").write_text(PLACE_ORDER.replace("place_order", "remember"))
    assert (
        "the capability 'remember' is named like the built-in tool 'remember': rename it"
        in problem(root)
    )


def test_a_capability_named_like_an_enabled_pack_tool_refuses_the_app(tmp_path: Path) -> None:
    root = make_app(tmp_path / "desk", config='[tools]\nenable = ["files"]\n')
    (root / "handlers.py").write_text(PLACE_ORDER.replace("place_order", "read_file"))
    assert "the capability 'read_file' is named like the pack tool 'read_file'" in problem(root)


def test_a_served_app_changed_to_a_clashing_capability_keeps_its_previous_code(
    ledger: Ledger, tmp_path: Path
) -> None:
    """The reloader refuses the new version (an AgentWarning), and the built-in keeps its
    ledger behaviour."""
    root = make_app(tmp_path / "desk")
    (root / "handlers.py").write_text(PLACE_ORDER)
    runtime = AgentRuntime(ledger, "desk", models=["x"], app_dir=root)
    play(runtime, [{"content": "first"}])
    (root / "handlers.py").write_text(PLACE_ORDER.replace("place_order", "remember"))
    play(runtime, [{"content": "second"}])
    runtime.close()
    warnings = [e for e in agent_events(ledger, "desk") if isinstance(e, ev.AgentWarning)]
    assert [w.source for w in warnings] == ["identity"]
    assert "named like the built-in tool 'remember'" in warnings[0].message
    assert set(runtime.setup.tools()) >= {"place_order", "remember"}
    assert runtime.setup.tools()["remember"].spec.category == "memory"  # still the built-in


def test_a_served_app_whose_governance_names_no_tool_keeps_its_previous_version(
    ledger: Ledger, tmp_path: Path
) -> None:
    root = make_app(tmp_path / "desk", config='[governance]\nask = ["place_order"]\n')
    (root / "handlers.py").write_text(PLACE_ORDER)
    runtime = AgentRuntime(ledger, "desk", models=["x"], app_dir=root)
    play(runtime, [{"content": "first"}])
    (root / "owlclaw.toml").write_text('[governance]\nask = ["place_ordr"]\n')
    play(runtime, [{"content": "second"}])
    runtime.close()
    [warning] = [e for e in agent_events(ledger, "desk") if isinstance(e, ev.AgentWarning)]
    assert "ask: 'place_ordr' matches no tool" in warning.message
    assert runtime.setup.governance.ask == ("place_order",)  # the previous governance still asks


# --- a served app whose new version does not load -------------------------------------------


def test_a_broken_handlers_py_is_the_agents_warning_until_the_file_loads_again(
    ledger: Ledger, tmp_path: Path
) -> None:
    """The previous code keeps serving, and the agent's state says so (what status, the
    trigger and the console show) until handlers.py imports again, even as it was before."""
    root = make_app(tmp_path / "desk")
    handlers = root / "handlers.py"
    handlers.write_text(PLACE_ORDER)
    runtime = AgentRuntime(ledger, "desk", models=["x"], app_dir=root)
    play(runtime, [{"content": "first"}])
    assert ledger.load_agent("desk").state.app_warning is None
    handlers.write_text(PLACE_ORDER + "def broken(:\n")
    play(runtime, [{"content": "second"}])
    warning = ledger.load_agent("desk").state.app_warning
    assert warning is not None and warning.startswith("kept the previous identity: ")
    assert "SyntaxError" in warning and "\n" not in warning
    assert "place_order" in runtime.setup.tools()  # the previous code still serves
    handlers.write_text(PLACE_ORDER)  # back as it was: the identity the ledger last recorded
    play(runtime, [{"content": "third"}])
    runtime.close()
    assert ledger.load_agent("desk").state.app_warning is None
    loaded = [e for e in agent_events(ledger, "desk") if isinstance(e, ev.IdentityLoaded)]
    assert len(loaded) == 2 and loaded[0].code_sha256 == loaded[1].code_sha256
