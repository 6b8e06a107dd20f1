"""Portable evidence: signing keys, export of an agent's streams as a signed bundle, and the
offline verifier of such bundles."""
