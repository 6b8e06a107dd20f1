"""Agent app directories for tests."""

from __future__ import annotations

from pathlib import Path

SOUL = "# Soul\nI am a disciplined trading assistant.\n"
IDENTITY = """# Identity
## My Capabilities
- entry checks
- market monitoring
## Constraints
- never trade on margin
"""


def skill(name: str, body: str = "How to check entries.", extra: str = "") -> str:
    return (
        f"---\nname: {name}\ndescription: {name} skill\nowlclaw:\n  task_type: monitor\n"
        f"{extra}---\n{body}\n"
    )


def make_app(
    root: Path,
    skills: dict[str, str] | None = None,
    *,
    soul: str = SOUL,
    identity: str = IDENTITY,
    config: str | None = None,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "SOUL.md").write_text(soul)
    (root / "IDENTITY.md").write_text(identity)
    for folder, text in (skills or {}).items():
        (root / "capabilities" / folder).mkdir(parents=True, exist_ok=True)
        (root / "capabilities" / folder / "SKILL.md").write_text(text)
    if config is not None:
        (root / "owlclaw.toml").write_text(config)
    return root
