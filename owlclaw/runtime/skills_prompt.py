"""The skill index of the system prompt: every skill by name and description, so a skill whose
body did not fit the prompt's skills budget is still known to the model, which loads it with
``load_skill(name)``."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from owlclaw.app import Skill
from owlclaw.llm.tokens import TokenCount

INDEX_TOKENS = 1000
"""Budget of the index itself (~40 one-line entries)."""
DESCRIPTION_CHARS = 200


def skills_index(
    skills: Mapping[str, Skill],
    in_full: Collection[str],
    count: TokenCount,
    budget_tokens: int = INDEX_TOKENS,
    names_only: bool = False,
) -> tuple[str, list[str]]:
    """The section (empty without skills) and the names it lists, in name order;
    ``names_only``: without their descriptions (what the prompt's budget never trims)."""
    if not skills:
        return "", []
    lines, listed, used = [], [], 0
    for name, skill in sorted(skills.items()):
        description = " ".join(skill.meta.description.split())[:DESCRIPTION_CHARS]
        line = f"- {name}" if names_only else f"- {name}: {description}"
        line += " (in full below)" if name in in_full else ""
        cost = count(line)
        if used + cost > budget_tokens:
            break
        lines.append(line)
        listed.append(name)
        used += cost
    if more := len(skills) - len(listed):
        lines.append(f"- … and {more} more: load_skill(name) loads any skill by its name")
    heading = "## Your skills (load_skill(name) reads one in full)"
    return "\n".join([heading, *lines]), listed
