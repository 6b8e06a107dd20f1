"""``owlclaw init``: a new agent app from the template in ``owlclaw/templates/app``."""

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

from owlclaw.app import AGENT_ID, AgentApp, AppError, load_app

PLACEHOLDER = "__AGENT_ID__"


def scaffold(root: Path, agent_id: str | None = None) -> AgentApp:
    """Write the template app into ``root`` (which must not exist or be empty) and load it."""
    root = root.expanduser().resolve()
    agent_id = agent_id or root.name
    if not AGENT_ID.match(agent_id):
        raise AppError(
            f"agent id {agent_id!r} must be 1-128 letters, digits, '_', '.' or '-', starting"
            " with a letter or digit (pass --id)"
        )
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise AppError(f"{root} already exists and is not an empty directory")
    _copy(resources.files("owlclaw") / "templates" / "app", root, agent_id)
    return load_app(root)


def _copy(source: Traversable, target: Path, agent_id: str) -> None:
    target.mkdir(parents=True, exist_ok=True)
    for item in source.iterdir():
        if item.name == "__pycache__":
            continue
        destination = target / item.name.replace(PLACEHOLDER, agent_id)
        if item.is_dir():
            _copy(item, destination, agent_id)
        else:
            destination.write_text(
                item.read_text(encoding="utf-8").replace(PLACEHOLDER, agent_id),
                encoding="utf-8",
            )
