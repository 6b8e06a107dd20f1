"""The agents page's page size: a clear 400 for anything but 1 to MAX_PAGE."""

from __future__ import annotations

import pytest
from aiohttp import web

from owlclaw.server.console.pages.agents import page_size
from projections.agents import MAX_PAGE, PAGE_SIZE


def test_the_page_size_defaults_and_takes_whole_numbers_up_to_the_maximum() -> None:
    assert page_size("") == PAGE_SIZE
    assert page_size("1") == 1
    assert page_size(str(MAX_PAGE)) == MAX_PAGE


@pytest.mark.parametrize("given", ["0", str(MAX_PAGE + 1), "ten", "-5", "2.5"])
def test_any_other_page_size_is_refused_naming_the_range(given: str) -> None:
    with pytest.raises(web.HTTPBadRequest) as refused:
        page_size(given)
    assert refused.value.text == f"limit {given!r}: a whole number from 1 to {MAX_PAGE}"
