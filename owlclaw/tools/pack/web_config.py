"""The ``[tools.web]`` table of an app's owlclaw.toml: what web_fetch and web_search may do."""

from __future__ import annotations

from typing import Annotated, Literal

import msgspec

MAX_BYTES_LIMIT = 64 * 1024 * 1024
BRAVE_URL = "https://api.search.brave.com/res/v1/web/search"


class WebConfig(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The ``[tools.web]`` table of an app's owlclaw.toml."""

    allow_hosts: tuple[Annotated[str, msgspec.Meta(min_length=1, max_length=253)], ...] = ()
    """Host names or IP literals web_fetch may reach even when they resolve to loopback or
    private addresses."""
    timeout_s: Annotated[float, msgspec.Meta(gt=0, le=300)] = 15.0
    """How long one web_fetch or web_search call may take, in seconds."""
    max_bytes: Annotated[int, msgspec.Meta(ge=1, le=MAX_BYTES_LIMIT)] = 2 * 1024 * 1024
    """How much of a body web_fetch reads; a call's ``max_bytes`` may only lower it."""
    max_redirects: Annotated[int, msgspec.Meta(ge=0, le=20)] = 5
    """How many redirects web_fetch follows, each one checked like the first request."""
    search_provider: Literal["searxng", "brave"] = "searxng"
    """The API web_search speaks: a SearXNG instance or Brave's web search."""
    search_url: Annotated[str, msgspec.Meta(pattern=r"^https?://[^/?#]+")] | None = None
    """The provider's base URL (SearXNG: required; Brave: its public API URL by default)."""
    search_key_env: Annotated[str, msgspec.Meta(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = (
        "BRAVE_API_KEY"
    )
    """The name of the environment variable holding the Brave API key (never the key)."""
    search_results: Annotated[int, msgspec.Meta(ge=1, le=20)] = 5
    """How many results web_search returns at most."""

    @property
    def search_base_url(self) -> str | None:
        """The URL web_search queries, or None when none is configured."""
        if self.search_url is None and self.search_provider == "brave":
            return BRAVE_URL
        return self.search_url
