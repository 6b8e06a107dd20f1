"""Ray actors for agents (placement, mailbox, recovery) — built on the ledger and runtime."""

NAMESPACE = "owlclaw"
"""The Ray namespace of OwlClaw's named actors."""
