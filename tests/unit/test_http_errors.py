"""The error middleware: aiohttp's own refusals and unexpected failures become the webhook's
JSON errors, and a traceback never reaches the client."""

from __future__ import annotations

import asyncio
import json
from typing import Any, NoReturn

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from owlclaw.server.http_errors import json_errors


def answer(raised: BaseException) -> web.StreamResponse:
    async def handler(_: web.Request) -> NoReturn:
        raise raised

    return asyncio.run(json_errors(make_mocked_request("POST", "/x"), handler))


def body(response: web.StreamResponse) -> Any:
    assert isinstance(response, web.Response) and response.content_type == "application/json"
    assert response.text is not None
    return json.loads(response.text)


@pytest.mark.parametrize(
    ("raised", "status", "code"),
    [
        (web.HTTPNotFound(), 404, "not_found"),
        (web.HTTPMethodNotAllowed("PUT", ["POST"]), 405, "method_not_allowed"),
        (web.HTTPRequestEntityTooLarge(max_size=1024, actual_size=2048), 413, "too_large"),
        (web.HTTPBadRequest(), 400, "bad_request"),
        (web.HTTPTooManyRequests(), 429, "http_error"),
    ],
)
def test_aiohttp_refusals_become_json_errors(
    raised: web.HTTPException, status: int, code: str
) -> None:
    response = answer(raised)
    assert response.status == status
    assert body(response)["code"] == code and body(response)["error"]


def test_the_413_error_says_the_limit() -> None:
    response = answer(web.HTTPRequestEntityTooLarge(max_size=1024, actual_size=2048))
    assert body(response) == {
        "error": "Maximum request body size 1024 exceeded.",
        "code": "too_large",
    }


def test_an_error_that_is_json_already_passes_unchanged() -> None:
    own = web.HTTPBadRequest(text='{"error": "mine", "code": "bad_request"}')
    own.content_type = "application/json"
    with pytest.raises(web.HTTPBadRequest) as raised:
        answer(own)
    assert raised.value is own


def test_an_unexpected_exception_is_a_json_500_without_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    response = answer(RuntimeError("secret detail"))
    assert response.status == 500
    assert body(response) == {"error": "the server failed; see its log", "code": "internal_error"}
    assert "secret detail" in caplog.text  # in the log, for the operator
