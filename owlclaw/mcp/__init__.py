"""Tools from MCP servers: an app's ``[mcp.servers.<name>]`` become tools named
``<server>__<tool>`` that go through the one tool pipeline like every other tool."""
