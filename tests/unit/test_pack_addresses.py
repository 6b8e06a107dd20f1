"""The SSRF guard's address classification (no network)."""

from __future__ import annotations

import pytest

from owlclaw.tools.pack.addresses import refusal


@pytest.mark.parametrize(
    ("address", "reason"),
    [
        ("127.0.0.1", "loopback"),
        ("::1", "loopback"),
        ("10.0.0.1", "private"),
        ("192.168.1.1", "private"),
        ("172.16.0.1", "private"),
        ("169.254.169.254", "cloud metadata"),
        ("fd00:ec2::254", "cloud metadata"),
        ("169.254.1.1", "link-local"),
        ("fe80::1", "link-local"),
        ("224.0.0.1", "multicast"),
        ("240.0.0.1", "reserved"),
        ("0.0.0.0", "unspecified"),
        ("::ffff:127.0.0.1", "loopback"),
    ],
)
def test_refused(address: str, reason: str) -> None:
    why = refusal(address, frozenset())
    assert why is not None and why.startswith(reason)


def test_public_address_allowed() -> None:
    assert refusal("93.184.216.34", frozenset()) is None


def test_allow_hosts_overrides() -> None:
    assert refusal("127.0.0.1", frozenset({"127.0.0.1"})) is None
    assert refusal("127.0.0.2", frozenset({"127.0.0.1"})) is not None
