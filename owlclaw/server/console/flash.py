"""The result of an operator action, shown once on the page it redirects to.

It travels in a short-lived cookie (HttpOnly, SameSite=Strict, Path=/ui), not in the URL, so a
link from elsewhere cannot make the console announce something that did not happen.
"""

from __future__ import annotations

import base64

import msgspec
from aiohttp import web

FLASH_COOKIE = "owlclaw_flash"


class Flash(msgspec.Struct, frozen=True):
    message: str
    ok: bool


def redirect_with(location: str, message: str, *, ok: bool) -> web.HTTPSeeOther:
    """A 303 to ``location`` that carries ``message`` for the next page shown."""
    response = web.HTTPSeeOther(location)
    value = base64.urlsafe_b64encode(msgspec.json.encode(Flash(message, ok))).decode()
    response.set_cookie(FLASH_COOKIE, value, path="/ui", httponly=True, samesite="Strict")
    return response


def take_flash(request: web.Request) -> Flash | None:
    """The flash the request carries, if any (a malformed one is ignored)."""
    value = request.cookies.get(FLASH_COOKIE)
    if not value:
        return None
    try:
        return msgspec.json.decode(base64.urlsafe_b64decode(value), type=Flash)
    except (ValueError, msgspec.DecodeError):  # bad base64 is a binascii.Error, a ValueError
        return None


def shown(response: web.Response, flash: Flash | None) -> web.Response:
    """``response`` with a shown flash cleared, so a reload does not show it again."""
    if flash is not None:
        response.del_cookie(FLASH_COOKIE, path="/ui")
    return response
