"""Ray actors for agents (placement, mailbox, recovery) — built on the ledger and runtime."""
