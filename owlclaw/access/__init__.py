"""Who may do what: principals with their own tokens, roles scoped to agent-id patterns, and the
one authorization function every entry point asks."""
