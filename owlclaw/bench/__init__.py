"""Benchmarks behind ``owlclaw bench``: each prints measured figures, never targets alone."""
