"""The system prompt within its token budget (``runtime.prompt_tokens``): its parts are trimmed
in one fixed order until the whole prompt fits, and what was left out is recorded.

The order (docs/limits.md, The system prompt's budget):

1. ``memories``: the recalled memories beyond the first ``MEMORIES_KEPT``;
2. ``skill_bodies``: the skills' bodies, the last one first (the index still names every skill,
   and ``load_skill`` reads one);
3. ``recent_activity``: the recent-activity section;
4. ``schedules``: the active schedules (``list_schedules`` lists them);
5. ``inbound``: what arrived since the last run, the oldest event first;
6. ``memories``: the rest of them;
7. ``skill_descriptions``: the skill index down to the skills' names.

The core (SOUL.md, IDENTITY.md, and the skill names with ``load_skill``'s instruction) is never
trimmed: an app whose core alone exceeds the budget is refused when it loads
(``check_core``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from owlclaw.app import AppError
from owlclaw.llm.tokens import TokenCount

MEMORIES_KEPT = 3
"""Recalled memories the first trimming step keeps (the most relevant)."""
SEPARATOR = "\n\n"

ORDER: tuple[tuple[str, int, bool], ...] = (
    ("memories", MEMORIES_KEPT, False),
    ("skill_bodies", 0, True),
    ("recent_activity", 0, False),
    ("schedules", 0, False),
    ("inbound", 0, True),
    ("memories", 0, False),
    ("skill_descriptions", 0, False),
)
"""(part, items it keeps at most after the step, one item at a time?) in the order applied."""


class PromptTooLarge(AppError):
    """The prompt's core alone exceeds its token budget."""


@dataclass(frozen=True)
class Part:
    """A trimmable part of the prompt: its items, the one left out first last (they are
    recorded when left out, so they are ids and names, not texts), and its text given how
    many items each part keeps (None: the part shows nothing); it shows its own first ones,
    and may read the parts named in ``reads``."""

    name: str
    items: Sequence[Any]
    render: Callable[[Mapping[str, int]], str | None]
    reads: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fitted:
    text: str
    tokens: int
    trimmed: dict[str, list[Any]]
    """Part -> the items it left out, the parts in trimming order (empty: nothing trimmed)."""


def fit(
    core: Sequence[str], parts: Sequence[Part], budget: int, count: TokenCount, what: str = ""
) -> Fitted:
    """The core then the parts (in the order given), trimmed in ``ORDER`` until the text's
    ``count`` is within ``budget``. A prompt within it is counted once; one over it is trimmed
    step by step while the sum of its parts' counts (each counted once) says it is over, then
    while the whole text's count, which has the last word, does. PromptTooLarge (naming
    ``what``) when even the core does not fit."""
    keep = {p.name: len(p.items) for p in parts}

    def whole() -> str:
        return SEPARATOR.join([*core, *(t for p in parts if (t := p.render(keep)))])

    text = whole()
    if (tokens := count(text)) <= budget:
        return Fitted(text, tokens, {})
    counted: dict[tuple[Any, ...], int] = {}

    def tokens_of(p: Part) -> int:
        key = (p.name, keep[p.name], *(keep[r] for r in p.reads))
        if key not in counted:
            counted[key] = count(p.render(keep) or "")
        return counted[key]

    sep = count(SEPARATOR)
    base = sum(count(c) for c in core) + sep * (len(core) - 1)

    def estimate() -> int:
        shown = [tokens_of(p) for p in parts]
        return base + sum(n + sep for n in shown if n)

    steps = _steps(keep)
    while estimate() > budget and (step := next(steps, None)) is not None:
        keep[step[0]] = step[1]
    while True:
        text = whole()
        if (tokens := count(text)) <= budget:
            break
        step = next(steps, None)
        if step is None:
            raise PromptTooLarge(
                f"{what or 'the core of the system prompt'} come to {tokens} tokens with nothing"
                " left to trim;"
                f" the system prompt's budget (runtime.prompt_tokens) is {budget}"
            )
        keep[step[0]] = step[1]
    trimmed = {
        name: list(p.items[keep[name] :])
        for name in dict.fromkeys(name for name, _, _ in ORDER)
        if (p := next((p for p in parts if p.name == name), None)) and keep[name] < len(p.items)
    }
    return Fitted(text, tokens, trimmed)


def _steps(keep: Mapping[str, int]) -> Iterator[tuple[str, int]]:
    """(part, items it keeps) of each trimming step, in ``ORDER``, skipping what changes
    nothing. ``keep`` is read as each step is reached."""
    for name, floor, one_by_one in ORDER:
        if name not in keep:
            continue
        while keep[name] > floor:
            yield name, keep[name] - 1 if one_by_one else floor
