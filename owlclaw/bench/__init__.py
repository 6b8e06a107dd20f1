"""Benchmarks behind ``owlclaw bench``: each prints measured figures, never targets alone."""

import math
import socket
import statistics


def percentiles(samples: list[float]) -> dict[str, float]:
    """p50, p95 and p99 (nearest rank) of millisecond samples."""
    ordered = sorted(samples)
    if not ordered:
        return {"samples": 0}

    def rank(q: float) -> float:
        return round(ordered[max(0, math.ceil(q * len(ordered)) - 1)], 2)

    return {
        "p50_ms": round(statistics.median(ordered), 2),
        "p95_ms": rank(0.95),
        "p99_ms": rank(0.99),
        "samples": len(ordered),
    }


def free_port() -> int:
    """A loopback port free now, for a server a bench starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port
