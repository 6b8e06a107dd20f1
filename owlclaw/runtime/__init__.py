"""The agent runtime: the decision loop, built-in tools and business capabilities (no Ray)."""
