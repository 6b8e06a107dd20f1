"""Audit beyond replay: the decisions of recorded runs re-asked of another model."""
