"""The web tools of the pack: ``web_fetch`` and ``web_search``, configured by the app's
``[tools.web]`` table."""

from __future__ import annotations

from owlclaw.tools.pack.web_config import WebConfig
from owlclaw.tools.pack.web_fetch import FetchParams, WebFetch
from owlclaw.tools.pack.web_search import SearchParams, WebSearch
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.tool import Tool


def web_tools(config: WebConfig) -> dict[str, Tool]:
    """``web_fetch`` and ``web_search`` as configured by ``config``."""
    fetch = ToolSpec(
        name="web_fetch",
        description="Fetch a web page or text document by URL; HTML comes back as readable "
        "text, with the final URL (after redirects), status and content type. Private and "
        "local network addresses are refused.",
        params=FetchParams,
        idempotent=True,
        timeout_s=config.timeout_s,
        category="web",
    )
    search = ToolSpec(
        name="web_search",
        description="Search the web; returns titles, URLs and snippets of the top results.",
        params=SearchParams,
        idempotent=True,
        timeout_s=config.timeout_s,
        category="web",
    )
    return {"web_fetch": WebFetch(fetch, config), "web_search": WebSearch(search, config)}
