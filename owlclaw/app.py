"""An agent app directory: SOUL.md, IDENTITY.md, capabilities/<name>/SKILL.md, owlclaw.toml,
and optionally handlers.py (its capabilities and state providers) and scripts/ (scripted-model
scripts for offline runs).

Loading is strict where a mistake would silently change the agent (a missing or oversized
identity file, a path escaping the app directory) and forgiving where one bad part should not
stop the rest (an invalid SKILL.md is skipped with a warning). Skill bodies load on demand.
Everything read from these files is sanitised and used as inert prompt text.
"""

from __future__ import annotations

import hashlib
import re
import tomllib
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec
import yaml

from owlclaw.struct_errors import describe, unknown_name

IDENTITY_LIMIT_BYTES = 10 * 1024
SKILL_LIMIT_BYTES = 50 * 1024
CODE_LIMIT_BYTES = 1024 * 1024
CAPABILITY_HEADINGS = ("## My Capabilities", "## 我的能力")
HANDLERS_FILE = "handlers.py"
"""The app's code: a module-level ``registry`` (``from owlclaw import Registry``)."""
SCRIPTS_DIR = "scripts"
APP_TABLES = ("agent", "governance", "tools", "mcp", "a2a", "secrets", "heartbeat")
"""The tables of an app's owlclaw.toml; any other refuses the app, so that a misspelled
``[governence]`` cannot leave the agent ungoverned."""
AGENT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


class AppError(ValueError):
    """The app directory cannot be loaded; the message names the file."""


class AppNotFound(AppError):
    """There is no app directory at the path given."""


class RateLimit(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    calls: Annotated[int, msgspec.Meta(ge=1)]
    per_seconds: Annotated[float, msgspec.Meta(gt=0)]


Hour = Annotated[int, msgspec.Meta(ge=0, le=24)]


class SkillConstraints(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """Visibility constraints for the capability this skill describes (same name)."""

    visible: bool = True
    hours_utc: tuple[Hour, Hour] | None = None
    """Visible only from the first hour (inclusive) to the second (exclusive), UTC."""
    rate_limit: RateLimit | None = None


class SkillExtensions(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    task_type: str | None = None
    constraints: SkillConstraints = SkillConstraints()


class SkillMetadata(msgspec.Struct, frozen=True):
    name: str
    description: str
    metadata: dict[str, Any] = {}
    owlclaw: SkillExtensions = SkillExtensions()


class AgentSettings(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[agent]`` table of an app's owlclaw.toml."""

    id: str | None = None
    """The agent id (default: the app directory's name)."""
    models: tuple[str, ...] = ()
    """litellm model strings tried in order (default: runtime.models of the configuration)."""
    heartbeat_s: Annotated[float, msgspec.Meta(ge=0)] = 0.0
    """``owlclaw run`` queues a heartbeat run this often (0: never); one with nothing pending
    (no inbound event, no ``[heartbeat]`` source finding anything) is skipped without a model
    call."""
    tool_result_bytes: Annotated[int, msgspec.Meta(ge=256)] | None = None
    """Tool results above this are cut before the model sees them (default: the runtime's
    ``tool_result_bytes``); a tool's own ``max_result_bytes`` wins."""
    on_message: Literal["run", "heartbeat"] = "run"
    """What another agent's message does (send_to_agent): start a run at once, or wait for the
    next heartbeat (a message that expects a reply always starts a run: its answer is the
    reply)."""

    def __post_init__(self) -> None:
        if self.on_message == "heartbeat" and self.heartbeat_s == 0:
            raise ValueError(
                'on_message = "heartbeat" needs a heartbeat: set heartbeat_s (messages would '
                "wait forever)"
            )


@dataclass
class Skill:
    meta: SkillMetadata
    path: Path
    sha256: str
    _body: str | None = field(default=None, repr=False)

    def body(self) -> str:
        """The SKILL.md text after its frontmatter, read once, sanitised."""
        if self._body is None:
            self._body = sanitize(_split_frontmatter(_read(self.path, SKILL_LIMIT_BYTES))[1])
        return self._body


@dataclass
class AgentApp:
    root: Path
    soul: str
    identity: str
    soul_sha256: str
    identity_sha256: str
    skills: dict[str, Skill]
    warnings: list[str]
    config: dict[str, Any]
    config_sha256: str = ""
    settings: AgentSettings = field(default_factory=AgentSettings)
    code_sha256: str = ""
    """sha256 of handlers.py ("" without one)."""

    @property
    def agent_id(self) -> str:
        return self.settings.id or self.root.name

    @property
    def handlers(self) -> Path | None:
        return self.root / HANDLERS_FILE if self.code_sha256 else None

    @property
    def fingerprint(self) -> tuple[str, str, dict[str, str], str, str]:
        """What IdentityLoaded records: a change to any part is a new identity version."""
        return (
            self.soul_sha256,
            self.identity_sha256,
            self.skill_hashes,
            self.config_sha256,
            self.code_sha256,
        )

    @property
    def capabilities_summary(self) -> str:
        """The "## My Capabilities" (or "## 我的能力") section of IDENTITY.md."""
        lines = self.identity.splitlines()
        out: list[str] = []
        inside = False
        for line in lines:
            if line.strip().startswith(CAPABILITY_HEADINGS):
                inside = True
                continue
            if inside and line.startswith("## "):
                break
            if inside:
                out.append(line)
        return "\n".join(out).strip()

    @property
    def skill_hashes(self) -> dict[str, str]:
        return {name: skill.sha256 for name, skill in sorted(self.skills.items())}


def sanitize(text: str) -> str:
    """Make file content safe to place in a prompt as data.

    Removes control characters (except newline and tab), zero-width and bidirectional-override
    characters (used to hide instructions), and defuses ``<script`` and ``${`` as the seeds ask.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    text = "".join(
        ch for ch in text if ch in "\n\t" or unicodedata.category(ch) not in {"Cc", "Cf"}
    )
    text = re.sub(r"<(/?)script", r"&lt;\1script", text, flags=re.IGNORECASE)
    return text.replace("${", "$\\{")


def load_app(root: Path) -> AgentApp:
    """Load an app directory; raises AppError naming the offending path."""
    root = root.expanduser().resolve()
    if not root.is_dir():
        raise AppNotFound(f"app directory not found: {root}")
    soul_raw = _read(_inside(root, root / "SOUL.md"), IDENTITY_LIMIT_BYTES)
    identity_raw = _read(_inside(root, root / "IDENTITY.md"), IDENTITY_LIMIT_BYTES)
    warnings: list[str] = []
    skills: dict[str, Skill] = {}
    capabilities = root / "capabilities"
    if capabilities.is_dir():
        for skill_file in sorted(capabilities.glob("*/SKILL.md")):
            try:
                skill = _load_skill(root, skill_file)
            except AppError as e:
                warnings.append(f"skipped skill {skill_file.parent.name}: {e}")
                continue
            if skill.meta.name in skills:
                warnings.append(
                    f"skipped skill {skill_file.parent.name}: duplicate name {skill.meta.name!r}"
                )
                continue
            skills[skill.meta.name] = skill
    config: dict[str, Any] = {}
    config_sha256 = ""
    toml_path = root / "owlclaw.toml"
    if toml_path.is_file():
        config_raw = _read(_inside(root, toml_path), IDENTITY_LIMIT_BYTES * 10)
        config_sha256 = _sha(config_raw)
        try:
            config = tomllib.loads(config_raw)
        except tomllib.TOMLDecodeError as e:
            raise AppError(f"{toml_path}: {e}") from e
    for table in config:
        if table not in APP_TABLES:
            raise AppError(f"{toml_path}: {unknown_name('table', table, APP_TABLES)}")
    try:
        settings = msgspec.convert(config.get("agent", {}), AgentSettings)
    except msgspec.ValidationError as e:
        raise AppError(
            f"{toml_path}: {describe(e, AgentSettings, config.get('agent'), 'agent')}"
        ) from e
    agent_id = settings.id or root.name
    if not AGENT_ID.match(agent_id):
        raise AppError(
            f"agent id {agent_id!r} (from {'[agent] id' if settings.id else 'the directory name'})"
            " must be 1-128 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    handlers = root / HANDLERS_FILE
    code_sha256 = (
        _sha(_read(_inside(root, handlers), CODE_LIMIT_BYTES)) if handlers.is_file() else ""
    )
    return AgentApp(
        root=root,
        soul=sanitize(soul_raw),
        identity=sanitize(identity_raw),
        soul_sha256=_sha(soul_raw),
        identity_sha256=_sha(identity_raw),
        skills=skills,
        warnings=warnings,
        config=config,
        config_sha256=config_sha256,
        settings=settings,
        code_sha256=code_sha256,
    )


def select_skills(
    app: AgentApp, focus: str | None, budget_tokens: int, count: Callable[[str], int]
) -> list[Skill]:
    """Skills for a run: those named in the focus, else all; bodies within the budget of
    tokens as ``count`` counts them (the model's tokenizer)."""
    focus_text = (focus or "").lower()
    named = [s for name, s in sorted(app.skills.items()) if name.lower() in focus_text]
    chosen: list[Skill] = []
    used = 0
    for skill in named or [s for _, s in sorted(app.skills.items())]:
        cost = count(skill.body())
        if used + cost > budget_tokens:
            continue
        chosen.append(skill)
        used += cost
    return chosen


def _load_skill(root: Path, path: Path) -> Skill:
    raw = _read(_inside(root, path), SKILL_LIMIT_BYTES)
    frontmatter, _ = _split_frontmatter(raw)
    if frontmatter is None:
        raise AppError(f"{path}: no YAML frontmatter (--- ... ---) at the top")
    try:
        data = yaml.safe_load(frontmatter)
    except yaml.YAMLError as e:
        raise AppError(f"{path}: invalid YAML frontmatter: {e}") from e
    try:
        meta = msgspec.convert(data, SkillMetadata)
    except msgspec.ValidationError as e:
        raise AppError(f"{path}: invalid frontmatter: {e}") from e
    return Skill(meta=meta, path=path, sha256=_sha(raw))


def _split_frontmatter(text: str) -> tuple[str | None, str]:
    if not text.startswith("---"):
        return None, text
    parts = text.split("---", 2)
    if len(parts) < 3:
        return None, text
    return parts[1], parts[2].strip()


def _inside(root: Path, path: Path) -> Path:
    """The resolved path, refused if it (or a symlink on the way) leaves the app directory."""
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        raise AppError(f"{path} points outside the app directory {root}")
    return resolved


def _read(path: Path, limit: int) -> str:
    if not path.is_file():
        raise AppError(f"{path.name} not found at {path}")
    size = path.stat().st_size
    if size > limit:
        raise AppError(f"{path} is {size} bytes; the limit is {limit}")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise AppError(f"{path} is not UTF-8 text: {e}") from e


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
