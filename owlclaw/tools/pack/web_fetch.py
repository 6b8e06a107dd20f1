"""web_fetch: one page by URL, with every hop checked by the SSRF guard.

Each hop's host is resolved here, every address it resolves to is checked (``addresses``),
and the request goes to a checked address itself: the URL's host is replaced by that IP, and
the Host header and, for https, the TLS server name (``sni_hostname``, which certificate
verification checks too) carry the real host. httpx never resolves the name again, so a DNS
answer cannot change between the check and the connection. Redirects are followed here, not
by httpx, so each target is checked the same way. Each hop has its own client: no pooled
connection carries one host's TLS session over to another host on the same address; and
proxy variables are ignored, since a proxy would make the connection instead of us.
"""

from __future__ import annotations

import asyncio
import socket
import warnings
from dataclasses import dataclass
from typing import Annotated, Any, cast

import httpx
import msgspec

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.addresses import refusal
from owlclaw.tools.pack.web_config import MAX_BYTES_LIMIT, WebConfig
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import ToolContext

REDIRECTS = frozenset({301, 302, 303, 307, 308})
HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})
TEXT_TYPES = frozenset(
    {"application/json", "application/xml", "application/javascript", "application/yaml"}
)
NOT_TEXT = frozenset({"script", "style", "noscript", "template", "svg", "iframe", "object"})
HEADERS = {
    "User-Agent": "OwlClaw-web_fetch/1",
    "Accept": "text/html,application/xhtml+xml,text/*;q=0.9,*/*;q=0.1",
    "Accept-Encoding": "identity",  # the size limit then bounds what is held, not a gzip bomb
}


class FetchParams(msgspec.Struct, forbid_unknown_fields=True):
    url: Annotated[
        str, msgspec.Meta(min_length=1, max_length=4096, description="The http or https URL")
    ]
    max_bytes: (
        Annotated[
            int,
            msgspec.Meta(
                ge=1,
                le=MAX_BYTES_LIMIT,
                description="Read at most this many bytes of the body (the configured limit "
                "applies when omitted or lower)",
            ),
        ]
        | None
    ) = None


class Stop(Exception):
    """Ends a fetch with the error the model sees."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(error.error)
        self.error = error


@dataclass(frozen=True)
class WebFetch:
    """The ``web_fetch`` tool; ``config`` is the app's ``[tools.web]``."""

    spec: ToolSpec
    config: WebConfig

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        call = cast(FetchParams, params)
        limit = min(call.max_bytes or self.config.max_bytes, self.config.max_bytes)
        try:
            return await self._fetch(_parse(call.url), limit)
        except Stop as e:
            return e.error

    async def _fetch(self, url: httpx.URL, limit: int) -> dict[str, Any]:
        allow = frozenset(host.lower() for host in self.config.allow_hosts)
        for _ in range(self.config.max_redirects + 1):
            addresses = await _checked_addresses(url, allow)
            try:
                async with httpx.AsyncClient(
                    timeout=self.config.timeout_s, trust_env=False
                ) as client:
                    response = await _send(client, url, addresses)
                    try:
                        location = response.headers.get("location")
                        if response.status_code not in REDIRECTS or not location:
                            return await _result(url, response, limit)
                    finally:
                        await response.aclose()
            except httpx.HTTPError as e:
                raise Stop(_failed(f"fetching {url} failed: {type(e).__name__}: {e}")) from e
            url = _redirect_target(url, location)
        raise Stop(
            ToolError(
                error=f"more than {self.config.max_redirects} redirects (the last to {url})",
                error_code="TOO_MANY_REDIRECTS",
            )
        )


def _parse(text: str) -> httpx.URL:
    try:
        url = httpx.URL(text)
    except httpx.InvalidURL as e:
        raise Stop(_invalid(f"invalid URL {text!r}: {e}")) from e
    if url.scheme not in {"http", "https"}:
        raise Stop(_invalid(f"URL {text!r} is not http or https"))
    if not url.raw_host:
        raise Stop(_invalid(f"URL {text!r} has no host"))
    return url


def _redirect_target(url: httpx.URL, location: str) -> httpx.URL:
    try:
        target = url.join(location)
    except httpx.InvalidURL as e:
        raise Stop(_invalid(f"{url} redirects to an invalid URL {location!r}: {e}")) from e
    return _parse(str(target))


async def _checked_addresses(url: httpx.URL, allow: frozenset[str]) -> list[str]:
    """The addresses ``url``'s host resolves to, all of them allowed, or Stop."""
    host = url.raw_host.decode("ascii").lower()
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        transient = e.errno == socket.EAI_AGAIN
        raise Stop(
            ToolError(
                error=f"cannot resolve {host!r}: {e.strerror}",
                error_code="FETCH_FAILED",
                retryable=transient,
                kind="system" if transient else "user",
            )
        ) from e
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    if host in allow:
        return addresses
    for address in addresses:
        why = refusal(address, allow)
        if why is not None:
            raise Stop(
                ToolError(
                    error=f"{url} refused: {host} resolves to {why}, which web_fetch does "
                    "not reach (the host is not in [tools.web] allow_hosts)",
                    error_code="URL_REFUSED",
                )
            )
    return addresses


async def _send(client: httpx.AsyncClient, url: httpx.URL, addresses: list[str]) -> httpx.Response:
    """The response from the first of the checked ``addresses`` that accepts a connection."""
    extensions = {"sni_hostname": url.raw_host.decode("ascii")} if url.scheme == "https" else {}
    headers = {**HEADERS, "Host": url.netloc.decode("ascii")}
    refused: httpx.ConnectError | None = None
    for address in addresses:
        request = client.build_request(
            "GET", url.copy_with(host=address), headers=headers, extensions=extensions
        )
        try:
            return await client.send(request, stream=True)
        except httpx.ConnectError as e:
            refused = e
    assert refused is not None  # getaddrinfo returns at least one address or raises
    raise refused


async def _result(url: httpx.URL, response: httpx.Response, limit: int) -> dict[str, Any]:
    if response.status_code >= 500:
        raise Stop(_failed(f"{url} answered {response.status_code} {response.reason_phrase}"))
    media = response.headers.get("content-type", "").split(";")[0].strip().lower()
    html = media in HTML_TYPES
    if not (html or _is_text(media)):
        raise Stop(
            ToolError(
                error=f"{url} is {media or 'of no declared content type'}; web_fetch reads "
                "only HTML and text",
                error_code="UNSUPPORTED_CONTENT",
            )
        )
    body, truncated = await _read(response, limit)
    text = (
        await asyncio.to_thread(_html_text, body, response.charset_encoding)
        if html
        else body.decode(response.encoding or "utf-8", errors="replace")
    )
    return {
        "url": str(url),
        "status": response.status_code,
        "content_type": media,
        "text": text,
        "truncated": truncated,
        "bytes": len(body),
    }


def _is_text(media: str) -> bool:
    return media.startswith("text/") or media in TEXT_TYPES or media.endswith(("+json", "+xml"))


async def _read(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the body, and whether there was more."""
    body = bytearray()
    async for chunk in response.aiter_bytes():
        body += chunk
        if len(body) > limit:
            return bytes(body[:limit]), True
    return bytes(body), False


def _html_text(body: bytes, charset: str | None) -> str:
    """The page's readable text: markup, scripts and styles gone, one block per line
    (BeautifulSoup is imported here: 0.14 s of every server's start for a tool few runs call)."""
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        soup = BeautifulSoup(body, "html.parser", from_encoding=charset)
    for tag in soup(NOT_TEXT):
        tag.decompose()
    return soup.get_text("\n", strip=True)


def _invalid(message: str) -> ToolError:
    return ToolError(error=message, error_code="INVALID_URL")


def _failed(message: str) -> ToolError:
    return ToolError(error=message, error_code="FETCH_FAILED", retryable=True, kind="system")
