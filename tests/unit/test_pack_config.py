"""The ``[tools]`` table: names expand to tools, and bad tables are refused naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlclaw.app import AppError
from owlclaw.server.validation import validate_app
from owlclaw.tools.pack.config import ToolsConfig, pack_tools
from tests.apps import make_app


def test_nothing_is_enabled_by_default(tmp_path: Path) -> None:
    assert pack_tools(ToolsConfig.from_app_config({}), tmp_path) == {}


def test_a_group_enables_its_tools(tmp_path: Path) -> None:
    config = ToolsConfig.from_app_config({"tools": {"enable": ["files", "exec"]}})
    assert set(pack_tools(config, tmp_path)) == {
        "read_file",
        "write_file",
        "edit_file",
        "list_dir",
        "exec",
    }
    single = ToolsConfig.from_app_config({"tools": {"enable": ["read_file"]}})
    assert set(pack_tools(single, tmp_path)) == {"read_file"}


@pytest.mark.parametrize(
    ("table", "message"),
    [
        ({"enable": ["web_crawler"]}, "enable names unknown tools web_crawler"),
        ({"exec": {"timeout_s": -1}}, "timeout_s"),
        ({"files": {"max_file_bytes": "big"}}, "max_file_bytes"),
        ({"shell": {}}, "shell"),
        ({"exec": {"sandbox": "docker"}}, "sandbox"),
        ({"exec": {"processes": 2}}, "processes must be 0 \\(no limit\\) or at least 4"),
    ],
)
def test_bad_tables_are_refused_naming_the_problem(table: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ToolsConfig.from_app_config({"tools": table})


def test_an_app_with_a_bad_tools_table_does_not_validate(tmp_path: Path) -> None:
    root = make_app(tmp_path / "app", config='[tools]\nenable = ["telepathy"]\n')
    with pytest.raises(AppError, match=r"owlclaw.toml: \[tools\] enable names unknown tools"):
        validate_app(root, 5.0)
