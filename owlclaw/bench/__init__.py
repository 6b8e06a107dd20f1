"""Benchmarks behind ``owlclaw bench``: each prints measured figures, never targets alone."""

import itertools
import math
import random
import socket
import statistics
from pathlib import Path


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


def _ephemeral_start() -> int:
    """Where the kernel's ephemeral ports start (Linux: 32768 unless configured)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


LISTEN_PORTS = range(20000, _ephemeral_start())
"""Where a bench (and a test) picks the port a server it starts will listen on: below the
ephemeral range, from which every outgoing connection takes its local port and every bind to
port 0 its port (a port picked there was free when picked, and became a connection's local port
before the server bound it: CI135, "address already in use"), and above Ray's worker ports
(10002-19999)."""
_picks = itertools.count(random.randrange(1 << 16))
"""This process's next pick (modulo the range): each process starts at its own random place,
then goes on."""


def free_port() -> int:
    """A loopback port nothing listens on now, from ``LISTEN_PORTS``."""
    for _ in LISTEN_PORTS:
        port = LISTEN_PORTS[next(_picks) % len(LISTEN_PORTS)]
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {LISTEN_PORTS}")
