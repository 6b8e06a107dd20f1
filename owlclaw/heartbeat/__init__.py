"""Heartbeat sources: what an app asks its heartbeat to check before deciding to wake the agent
(a SQL count, a PostgreSQL LISTEN channel), besides the inbound events waiting for it."""
