"""The agents page's page size: a clear 400 for anything but 1 to MAX_PAGE; a principal's page
lists the agents in its scope only, a page at a time."""

from __future__ import annotations

from datetime import UTC, datetime
from fnmatch import fnmatchcase

import pytest
from aiohttp import web

from owlclaw.server.console.pages.agents import page_size
from owlclaw.server.overview import visible_ids
from projections.agents import MAX_PAGE, PAGE_SIZE, AgentRow

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_page_size_defaults_and_takes_whole_numbers_up_to_the_maximum() -> None:
    assert page_size("") == PAGE_SIZE
    assert page_size("1") == 1
    assert page_size(str(MAX_PAGE)) == MAX_PAGE


@pytest.mark.parametrize("given", ["0", str(MAX_PAGE + 1), "ten", "-5", "2.5"])
def test_any_other_page_size_is_refused_naming_the_range(given: str) -> None:
    with pytest.raises(web.HTTPBadRequest) as refused:
        page_size(given)
    assert refused.value.text == f"limit {given!r}: a whole number from 1 to {MAX_PAGE}"


class Registered:
    """The agents view's paging over a sorted list of ids."""

    def __init__(self, ids: list[str]):
        self.ids = sorted(ids)
        self.reads = 0

    def page(self, after: str | None, limit: int) -> list[AgentRow]:
        self.reads += 1
        ids = [i for i in self.ids if i > (after or "")][:limit]
        return [AgentRow(agent_id=i, parent_agent_id="", registered_at=NOW) for i in ids]


def mine(agent_id: str) -> bool:
    return fnmatchcase(agent_id, "acme.*")


def test_a_scoped_page_lists_only_visible_agents_and_pages_on_from_the_last_one() -> None:
    acme = [f"acme.{n:04}" for n in range(MAX_PAGE + 3)]
    view = Registered([*acme, *(f"globex.{n:04}" for n in range(MAX_PAGE * 2))])
    first, after = visible_ids(view, None, MAX_PAGE, mine)
    assert (first, after) == (acme[:MAX_PAGE], acme[MAX_PAGE - 1])
    rest, done = visible_ids(view, after, MAX_PAGE, mine)
    assert (rest, done) == (acme[MAX_PAGE:], None)  # past the last agent: no next page
    nothing = Registered([f"globex.{n:04}" for n in range(MAX_PAGE * 3)])
    assert visible_ids(nothing, None, 10, mine) == ([], None)
    assert nothing.reads == 4  # read through, a full page at a time
