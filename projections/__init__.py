"""Read models built from the ledger (memory, schedules, audit, runs)."""
