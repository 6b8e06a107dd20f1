"""Loading an agent app directory: identity, skills, limits, confinement, sanitisation."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owlclaw.app import AppError, load_app, sanitize, select_skills
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
    assert [s.meta.name for s in select_skills(app, "run the risk-check now")] == ["risk-check"]
    chosen = [s.meta.name for s in select_skills(app, None, budget_tokens=4000)]
    assert chosen == ["entry-monitor", "risk-check"]  # giant alone is 10,000 tokens
    assert select_skills(app, None, budget_tokens=50) == []


@given(st.text())
def test_sanitised_text_has_no_control_or_invisible_characters(text: str) -> None:
    clean = sanitize(text)
    assert all(ch in "\n\t" or (ord(ch) >= 32 and ch not in "\u200b\u202e\u2066") for ch in clean)
    assert "<script" not in clean.lower() and "${" not in clean
    assert sanitize(clean) == clean


def test_sanitise_keeps_ordinary_markdown() -> None:
    text = "# Title\n\n- item with `code` and émoji 🦉\n\tindented\n"
    assert sanitize(text) == text
