"""LLM access through litellm only, plus OwlClaw's offline providers registered with it."""
