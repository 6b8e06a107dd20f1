"""Ports the servers benches and tests start listen on are picked below the ephemeral range,
where no outgoing connection can take them between the pick and the server's bind."""

from __future__ import annotations

import contextlib
import socket

from owlclaw.bench import LISTEN_PORTS, _ephemeral_start, free_port


def test_picked_ports_are_below_the_ephemeral_range_and_skip_one_in_use() -> None:
    assert LISTEN_PORTS.stop == _ephemeral_start()
    first = free_port()
    taken = LISTEN_PORTS[(LISTEN_PORTS.index(first) + 1) % len(LISTEN_PORTS)]
    with socket.socket() as listener:
        with contextlib.suppress(OSError):  # in use by another process: taken all the same
            listener.bind(("127.0.0.1", taken))
            listener.listen()
        picked = free_port()
    assert picked in LISTEN_PORTS
    assert picked not in (first, taken)
    with socket.socket() as s:
        s.bind(("127.0.0.1", picked))
