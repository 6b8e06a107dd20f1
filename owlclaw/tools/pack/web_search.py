"""web_search: a query through the configured provider (SearXNG's JSON API or Brave's web
search), results as title, URL and snippet.

The provider's URL is the operator's configuration, not the model's: it is not put through
the SSRF guard (a SearXNG instance on the local network is the common case).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar, cast

import httpx
import msgspec

from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.web_config import WebConfig
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import ToolContext

T = TypeVar("T")


class SearchParams(msgspec.Struct, forbid_unknown_fields=True):
    query: Annotated[
        str, msgspec.Meta(min_length=1, max_length=400, description="What to search the web for")
    ]


class SearxngHit(msgspec.Struct):
    url: str
    title: str = ""
    content: str = ""


class SearxngPage(msgspec.Struct):
    results: list[SearxngHit] = []


class BraveHit(msgspec.Struct):
    url: str
    title: str = ""
    description: str = ""


class BraveWeb(msgspec.Struct):
    results: list[BraveHit] = []


class BravePage(msgspec.Struct):
    web: BraveWeb = msgspec.field(default_factory=BraveWeb)


class Stop(Exception):
    """Ends a search with the error the model sees."""

    def __init__(self, error: ToolError) -> None:
        super().__init__(error.error)
        self.error = error


@dataclass(frozen=True)
class WebSearch:
    """The ``web_search`` tool; ``config`` is the app's ``[tools.web]``."""

    spec: ToolSpec
    config: WebConfig

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        query = cast(SearchParams, params).query
        try:
            hits = await self._search(query)
        except Stop as e:
            return e.error
        results = [
            {"title": t, "url": u, "snippet": s} for t, u, s in hits[: self.config.search_results]
        ]
        return {"results": results, "count": len(results)}

    async def _search(self, query: str) -> list[tuple[str, str, str]]:
        base = self.config.search_base_url
        if base is None:
            raise Stop(
                _not_configured(
                    "web search is not configured: set [tools.web] search_url to a SearXNG "
                    'base URL, or search_provider = "brave"'
                )
            )
        if self.config.search_provider == "searxng":
            body = await self._get(f"{base.rstrip('/')}/search", {"q": query, "format": "json"})
            page = _decode(body, SearxngPage)
            return [(hit.title, hit.url, hit.content) for hit in page.results]
        key = os.environ.get(self.config.search_key_env)
        if not key:
            raise Stop(
                _not_configured(
                    f"web search is not configured: set the environment variable "
                    f"{self.config.search_key_env} (named by [tools.web] search_key_env) to "
                    "the Brave Search API key"
                )
            )
        body = await self._get(
            base,
            {"q": query, "count": str(self.config.search_results)},
            {"X-Subscription-Token": key},
        )
        brave = _decode(body, BravePage)
        return [(hit.title, hit.url, hit.description) for hit in brave.web.results]

    async def _get(
        self, url: str, query: dict[str, str], headers: dict[str, str] | None = None
    ) -> bytes:
        try:
            async with httpx.AsyncClient(timeout=self.config.timeout_s) as client:
                response = await client.get(
                    url, params=query, headers={"Accept": "application/json", **(headers or {})}
                )
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise Stop(_failed(f"search request failed: {type(e).__name__}: {e}", True)) from e
        if response.status_code >= 400:
            raise Stop(
                _failed(
                    f"the search provider answered {response.status_code} {response.reason_phrase}",
                    response.status_code >= 500 or response.status_code == 429,
                )
            )
        return response.content


def _decode(body: bytes, page: type[T]) -> T:
    try:
        return msgspec.json.decode(body, type=page)
    except msgspec.DecodeError as e:  # ValidationError is a DecodeError
        message = f"the search provider's answer is not its JSON API: {e}"
        raise Stop(_failed(message, False)) from e


def _not_configured(message: str) -> ToolError:
    return ToolError(error=message, error_code="SEARCH_NOT_CONFIGURED", kind="system")


def _failed(message: str, retryable: bool) -> ToolError:
    return ToolError(error=message, error_code="SEARCH_FAILED", retryable=retryable, kind="system")
