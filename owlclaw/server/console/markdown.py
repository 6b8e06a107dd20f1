"""MEMORY.md as HTML: Markdown through markdown-it-py with raw HTML off, so HTML in the file
(a memory's tags are not fenced) shows as text; images are off too, so a page loads nothing
from elsewhere (an image's text shows as a link)."""

from __future__ import annotations

from markdown_it import MarkdownIt

_MARKDOWN = MarkdownIt("js-default", {"html": False}).disable("image")
"""CommonMark with tables and strikethrough; ``javascript:`` and similar links are refused."""


def to_html(text: str) -> str:
    """Escaped HTML of ``text``: safe to put in a page as it is."""
    html: str = _MARKDOWN.render(text)  # typed Any by markdown-it-py
    return html
