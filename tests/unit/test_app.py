"""Loading an agent app directory: identity, skills, limits, confinement, sanitisation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owlclaw.app import AppError, load_app, sanitize, select_skills
from owlclaw.llm.tokens import token_counter
from tests.apps import SOUL, make_app, skill


def test_identity_and_capabilities_summary(tmp_path: Path) -> None:
    app = load_app(make_app(tmp_path / "a", {"entry-monitor": skill("entry-monitor")}))
    assert app.soul == SOUL
    assert app.capabilities_summary == "- entry checks\n- market monitoring"
    assert list(app.skills) == ["entry-monitor"]
    assert app.skills["entry-monitor"].meta.owlclaw.task_type == "monitor"
    assert app.warnings == []


def test_chinese_capabilities_heading(tmp_path: Path) -> None:
    root = make_app(tmp_path / "zh")
    (root / "IDENTITY.md").write_text("# 身份\n## 我的能力\n- 入场检查\n## 约束\n- 无\n")
    assert load_app(root).capabilities_summary == "- 入场检查"


@pytest.mark.parametrize("missing", ["SOUL.md", "IDENTITY.md"])
def test_missing_identity_file_names_the_path(tmp_path: Path, missing: str) -> None:
    root = make_app(tmp_path / "m")
    (root / missing).unlink()
    with pytest.raises(AppError, match=re.escape(f"{missing} not found at {root / missing}")):
        load_app(root)


def test_size_limits(tmp_path: Path) -> None:
    root = make_app(tmp_path / "big", {"huge": skill("huge", "x" * 51 * 1024), "ok": skill("ok")})
    app = load_app(root)
    assert list(app.skills) == ["ok"]
    assert "the limit is 51200" in app.warnings[0]
    (root / "SOUL.md").write_text("s" * (10 * 1024 + 1))
    with pytest.raises(AppError, match=r"SOUL\.md is 10241 bytes; the limit is 10240"):
        load_app(root)


def test_invalid_skill_frontmatter_is_skipped_with_a_warning(tmp_path: Path) -> None:
    root = make_app(
        tmp_path / "w",
        {
            "broken": "---\nname: broken\ndescription: [unclosed\n---\nbody\n",
            "nofront": "just text",
            "missing": "---\nname: missing\n---\nno description\n",
            "good": skill("good"),
        },
    )
    app = load_app(root)
    assert list(app.skills) == ["good"]
    assert sorted(w.split(":")[0] for w in app.warnings) == [
        "skipped skill broken",
        "skipped skill missing",
        "skipped skill nofront",
    ]


def test_paths_outside_the_app_directory_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("exfiltrate me")
    root = make_app(tmp_path / "s", {"good": skill("good")})
    (root / "capabilities" / "leak").mkdir()
    (root / "capabilities" / "leak" / "SKILL.md").symlink_to(outside)
    app = load_app(root)
    assert list(app.skills) == ["good"]
    assert "points outside the app directory" in app.warnings[0]
    (root / "SOUL.md").unlink()
    (root / "SOUL.md").symlink_to(outside)
    with pytest.raises(AppError, match="points outside"):
        load_app(root)


def test_hashes_change_with_content_for_hot_reload(tmp_path: Path) -> None:
    root = make_app(tmp_path / "h", {"a": skill("a")})
    before = load_app(root)
    (root / "capabilities" / "a" / "SKILL.md").write_text(skill("a", "new body"))
    after = load_app(root)
    assert before.soul_sha256 == after.soul_sha256
    assert before.skill_hashes["a"] != after.skill_hashes["a"]
    assert after.skills["a"].body() == "new body"


def test_skill_selection_by_focus_within_the_token_budget(tmp_path: Path) -> None:
    root = make_app(
        tmp_path / "sel",
        {
            "entry-monitor": skill("entry-monitor", "e" * 400),
            "risk-check": skill("risk-check", "r" * 400),
            "giant": skill("giant", "g" * 40_000),
        },
    )
    app = load_app(root)
    tokens = token_counter("scripted/demo")
    named = select_skills(app, "run the risk-check now", 4000, tokens)
    assert [s.meta.name for s in named] == ["risk-check"]
    chosen = [s.meta.name for s in select_skills(app, None, 4000, tokens)]
    assert chosen == ["entry-monitor", "risk-check"]  # giant alone is 20,000 tokens
    assert select_skills(app, None, 50, tokens) == []


@given(st.text())
def test_sanitised_text_has_no_control_or_invisible_characters(text: str) -> None:
    clean = sanitize(text)
    assert all(ch in "\n\t" or (ord(ch) >= 32 and ch not in "\u200b\u202e\u2066") for ch in clean)
    assert "<script" not in clean.lower() and "${" not in clean
    assert sanitize(clean) == clean


def test_sanitise_keeps_ordinary_markdown() -> None:
    text = "# Title\n\n- item with `code` and émoji 🦉\n\tindented\n"
    assert sanitize(text) == text


def test_handlers_py_provides_the_registry_and_its_failures_name_the_file(tmp_path: Path) -> None:
    from owlclaw.tools.capabilities import load_registry

    app = load_app(make_app(tmp_path / "a"))
    assert app.handlers is None and app.code_sha256 == ""
    handlers = tmp_path / "a" / "handlers.py"
    handlers.write_text(
        "from owlclaw import Registry\nregistry = Registry()\n\n"
        '@registry.capability("Check entries.")\ndef entry_check(symbol: str) -> dict:\n'
        "    return {'symbol': symbol}\n"
    )
    app = load_app(tmp_path / "a")
    assert app.handlers == handlers.resolve() and len(app.code_sha256) == 64
    assert list(load_registry(handlers).capabilities) == ["entry_check"]
    handlers.write_text("import no_such_module\n")
    with pytest.raises(AppError, match=r"handlers\.py failed to import: ModuleNotFoundError"):
        load_registry(handlers)
    handlers.write_text("registry = 42\n")
    with pytest.raises(AppError, match="defines no `registry = Registry"):
        load_registry(handlers)


def test_agent_settings_are_validated_and_name_the_field(tmp_path: Path) -> None:
    root = make_app(tmp_path / "desk", config='[agent]\nmodels = ["openai/gpt-4o-mini"]\n')
    app = load_app(root)
    assert (app.agent_id, app.settings.models) == ("desk", ("openai/gpt-4o-mini",))
    (root / "owlclaw.toml").write_text("[agent]\nheartbeat_s = -1\n")
    with pytest.raises(AppError, match=r"\[agent\].*heartbeat_s"):
        load_app(root)
    (root / "owlclaw.toml").write_text('[agent]\non_message = "heartbeat"\n')
    with pytest.raises(AppError, match=r"on_message = .heartbeat. needs a heartbeat"):
        load_app(root)
    (root / "owlclaw.toml").write_text('[agent]\nid = "has space"\n')
    with pytest.raises(AppError, match="agent id 'has space'"):
        load_app(root)


def test_init_scaffolds_the_template_and_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    from owlclaw.cli.scaffold import scaffold

    app = scaffold(tmp_path / "ops-bot")
    assert app.agent_id == "ops-bot" and app.settings.models == ("scripted/ops-bot",)
    assert "notify_team" in app.skills and app.handlers is not None
    assert "ops-bot" in (tmp_path / "ops-bot" / "SOUL.md").read_text()
    with pytest.raises(AppError, match="already exists"):
        scaffold(tmp_path / "ops-bot")
