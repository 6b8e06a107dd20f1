"""Benchmarks behind ``owlclaw bench``: each prints measured figures, never targets alone."""

import math
import statistics


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50 and p95 (nearest rank) of millisecond samples."""
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": round(ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)], 2),
        "samples": len(ordered),
    }
