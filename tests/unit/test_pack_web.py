"""web_fetch and web_search against loopback servers: text extraction, redirects, the size
cap, and every refusal of the SSRF guard (before any connection to the refused address)."""

from __future__ import annotations

import asyncio
import logging
import ssl
import uuid
from collections.abc import Iterator
from functools import partial
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import httpx
import msgspec
import pytest
import trustme

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.web import web_tools
from owlclaw.tools.pack.web_config import WebConfig
from owlclaw.tools.tool import RunScope, ToolContext
from tests.web_fakes import PAGE, Server, serving


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    yield from serving(Server())


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture(scope="module")
def tls_server(ca: trustme.CA) -> Iterator[Server]:
    """Serves https with a certificate for the name ``localhost`` only."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(context)
    yield from serving(Server(context))


@pytest.fixture(autouse=True)
def fresh_requests(server: Server) -> None:
    server.requests.clear()


LOOPBACK = WebConfig(allow_hosts=("127.0.0.1",))


def call(config: WebConfig, tool: str, **arguments: Any) -> Any:
    """Run one tool call as the executor would: parse the arguments, then execute."""
    chosen = web_tools(config)[tool]
    params = chosen.spec.parse(arguments)
    assert not isinstance(params, ToolError)
    ctx = ToolContext(
        agent_id="owl",
        run_id=uuid.uuid4(),
        call_id="c1",
        idempotency_key="k1",
        logger=logging.getLogger("test"),
        scope=cast(RunScope, None),
    )
    return asyncio.run(chosen.execute(params, ctx))


def refused(result: Any, code: str) -> str:
    assert isinstance(result, ToolError), result
    assert result.error_code == code, result
    return result.error


def test_html_page_comes_back_as_readable_text(server: Server) -> None:
    result = call(LOOPBACK, "web_fetch", url=f"{server.base}/page")
    assert result == {
        "url": f"{server.base}/page",
        "status": 200,
        "content_type": "text/html",
        "text": "Owls\nBarn owl\nHunts at night, café included.",
        "truncated": False,
        "bytes": len(PAGE),
    }


def test_a_redirect_is_followed_and_the_final_url_reported(server: Server) -> None:
    result = call(LOOPBACK, "web_fetch", url=f"{server.base}/redirect")
    assert result["url"] == f"{server.base}/page"
    assert "Barn owl" in result["text"]
    assert server.paths() == ["/redirect", "/page"]
    assert server.requests[1][1]["Host"] == f"127.0.0.1:{server.port}"


def test_the_body_is_cut_at_the_size_limit(server: Server) -> None:
    result = call(LOOPBACK, "web_fetch", url=f"{server.base}/big", max_bytes=100)
    assert (result["text"], result["truncated"], result["bytes"]) == ("a" * 100, True, 100)


def test_a_call_may_lower_the_size_limit_but_not_raise_it(server: Server) -> None:
    config = WebConfig(allow_hosts=("127.0.0.1",), max_bytes=50)
    result = call(config, "web_fetch", url=f"{server.base}/big", max_bytes=5000)
    assert (result["bytes"], result["truncated"]) == (50, True)


def test_binary_content_is_refused(server: Server) -> None:
    error = refused(call(LOOPBACK, "web_fetch", url=f"{server.base}/image"), "UNSUPPORTED_CONTENT")
    assert "image/png" in error


def test_a_server_error_is_a_retryable_fetch_failure(server: Server) -> None:
    result = call(LOOPBACK, "web_fetch", url=f"{server.base}/down")
    assert "503" in refused(result, "FETCH_FAILED")
    assert (result.retryable, result.kind) == (True, "system")


def test_loopback_is_refused_after_resolving_the_name(server: Server) -> None:
    error = refused(
        call(WebConfig(), "web_fetch", url=f"http://localhost:{server.port}/page"), "URL_REFUSED"
    )
    assert "loopback address 127.0.0.1" in error
    assert server.requests == []


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("http://127.0.0.1/", "127.0.0.1"),
        ("http://[::1]:8080/", "::1"),
        ("http://[::ffff:127.0.0.1]/", "::ffff:127.0.0.1"),
        ("http://2130706433/", "127.0.0.1"),
    ],
)
def test_a_loopback_literal_is_refused(url: str, address: str) -> None:
    error = refused(call(WebConfig(), "web_fetch", url=url), "URL_REFUSED")
    assert f"loopback address {address}" in error


def test_an_allowed_host_name_is_fetched(server: Server) -> None:
    config = WebConfig(allow_hosts=("localhost",))
    result = call(config, "web_fetch", url=f"http://localhost:{server.port}/page")
    assert result["url"] == f"http://localhost:{server.port}/page"
    assert server.requests[0][1]["Host"] == f"localhost:{server.port}"


def test_https_checks_the_certificate_against_the_host_name_not_the_pinned_address(
    tls_server: Server, ca: trustme.CA, monkeypatch: pytest.MonkeyPatch
) -> None:
    trusting = ssl.create_default_context()
    ca.configure_trust(trusting)
    monkeypatch.setattr(httpx, "AsyncClient", partial(httpx.AsyncClient, verify=trusting))
    config = WebConfig(allow_hosts=("localhost", "127.0.0.1"))
    result = call(config, "web_fetch", url=f"https://localhost:{tls_server.port}/page")
    assert (result["url"], result["status"]) == (f"https://localhost:{tls_server.port}/page", 200)
    by_address = call(config, "web_fetch", url=f"https://127.0.0.1:{tls_server.port}/page")
    assert "certificate" in refused(by_address, "FETCH_FAILED")


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/to-metadata", "resolves to cloud metadata address 169.254.169.254"),
        ("/to-private", "resolves to private address 10.0.0.1"),
    ],
)
def test_a_redirect_to_an_internal_address_is_refused(server: Server, path: str, why: str) -> None:
    error = refused(call(LOOPBACK, "web_fetch", url=f"{server.base}{path}"), "URL_REFUSED")
    assert why in error
    assert server.paths() == [path]


def test_too_many_redirects(server: Server) -> None:
    config = WebConfig(allow_hosts=("127.0.0.1",), max_redirects=2)
    refused(call(config, "web_fetch", url=f"{server.base}/loop"), "TOO_MANY_REDIRECTS")
    assert server.paths() == ["/loop"] * 3


@pytest.mark.parametrize("url", ["ftp://127.0.0.1/file", "http://", "not a url"])
def test_invalid_urls(url: str) -> None:
    refused(call(LOOPBACK, "web_fetch", url=url), "INVALID_URL")


def test_searxng_search(server: Server) -> None:
    config = WebConfig(search_url=server.base, search_results=2)
    result = call(config, "web_search", query="barn owl")
    assert result == {
        "results": [
            {"title": "Owl 0", "url": "https://owls.example/0", "snippet": "s0"},
            {"title": "Owl 1", "url": "https://owls.example/1", "snippet": "s1"},
        ],
        "count": 2,
    }
    path, _ = server.requests[0]
    assert urlsplit(path).path == "/search"
    assert parse_qs(urlsplit(path).query) == {"q": ["barn owl"], "format": ["json"]}


def test_brave_search_sends_the_key_from_the_environment(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWL_SEARCH_KEY", "sekret")
    config = WebConfig(
        search_provider="brave", search_url=f"{server.base}/brave", search_key_env="OWL_SEARCH_KEY"
    )
    result = call(config, "web_search", query="barn owl")
    assert result == {
        "results": [{"title": "Owl", "url": "https://o.example", "snippet": "d"}],
        "count": 1,
    }
    path, headers = server.requests[0]
    assert parse_qs(urlsplit(path).query)["q"] == ["barn owl"]
    assert headers["X-Subscription-Token"] == "sekret"


def test_search_not_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "search_url" in refused(
        call(WebConfig(), "web_search", query="owls"), "SEARCH_NOT_CONFIGURED"
    )
    monkeypatch.delenv("OWL_SEARCH_KEY", raising=False)
    brave = WebConfig(search_provider="brave", search_key_env="OWL_SEARCH_KEY")
    assert "OWL_SEARCH_KEY" in refused(
        call(brave, "web_search", query="owls"), "SEARCH_NOT_CONFIGURED"
    )


def test_a_provider_failure_is_a_search_failure(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OWL_SEARCH_KEY", "sekret")
    not_json = WebConfig(
        search_provider="brave", search_url=f"{server.base}/page", search_key_env="OWL_SEARCH_KEY"
    )
    assert "not its JSON API" in refused(call(not_json, "web_search", query="o"), "SEARCH_FAILED")
    missing = WebConfig(search_url=f"{server.base}/nowhere")
    result = call(missing, "web_search", query="o")
    assert "404" in refused(result, "SEARCH_FAILED")
    assert not result.retryable


@pytest.mark.parametrize(
    "table",
    [{"max_bytes": 0}, {"max_redirects": 99}, {"search_url": "searx.local"}, {"allow": []}],
)
def test_bad_config_is_refused(table: dict[str, Any]) -> None:
    with pytest.raises(msgspec.ValidationError):
        msgspec.convert(table, WebConfig)
