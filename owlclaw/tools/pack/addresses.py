"""Which resolved addresses web_fetch may connect to (SSRF guard).

Checked on the first request and on every redirect hop, against the address the connection
will actually use, so a name cannot resolve to a public address for the check and a private
one for the connect.
"""

from __future__ import annotations

import ipaddress

_METADATA = frozenset(
    {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
)


def refusal(address: str, allow_hosts: frozenset[str]) -> str | None:
    """Why ``address`` (a literal IP) is refused, or None when it may be connected to.

    An address listed in ``allow_hosts`` ([tools.web] allow_hosts) is always allowed.
    """
    if address in allow_hosts:
        return None
    ip = ipaddress.ip_address(address)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip in _METADATA:
        return f"cloud metadata address {address}"
    for reason, flag in (
        ("loopback", ip.is_loopback),
        ("link-local", ip.is_link_local),
        ("multicast", ip.is_multicast),
        ("unspecified", ip.is_unspecified),
        ("reserved", ip.is_reserved),
        ("private", ip.is_private),
    ):
        if flag:
            return f"{reason} address {address}"
    return None
