"""Opt-in tool pack (issue 15): web fetch, web search and workspace files."""
