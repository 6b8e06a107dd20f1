"""The console's flash: an operator action's result shown once, carried in a cookie."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from owlclaw.server.console.flash import FLASH_COOKIE, Flash, redirect_with, shown, take_flash


def carrying(cookie: str) -> web.Request:
    return make_mocked_request("GET", "/ui/approvals", headers={"Cookie": cookie})


def test_a_flash_survives_the_redirect_and_is_cleared_once_shown() -> None:
    message = 'cancelled "s-1" as console:alice; <b>bold</b>'
    redirect = redirect_with("/ui/schedules/a", message, ok=True)
    assert redirect.status == 303 and redirect.location == "/ui/schedules/a"
    morsel = redirect.cookies[FLASH_COOKIE]
    assert (morsel["path"], morsel["httponly"], morsel["samesite"]) == ("/ui", True, "Strict")
    flash = take_flash(carrying(f"{FLASH_COOKIE}={morsel.value}"))
    assert flash == Flash(message, ok=True)
    cleared = shown(web.Response(text="page"), flash)
    assert cleared.cookies[FLASH_COOKIE]["max-age"] == "0"
    assert FLASH_COOKIE not in shown(web.Response(text="page"), None).cookies


def test_a_malformed_flash_cookie_is_ignored() -> None:
    for value in ("not-base64!", "eyJ4IjoxfQ==", "e30="):  # bad base64, wrong shape, no fields
        assert take_flash(carrying(f"{FLASH_COOKIE}={value}")) is None
    assert take_flash(carrying("other=1")) is None
