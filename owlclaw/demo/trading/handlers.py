"""The trading agent's capability and state provider, reading a simulated market.

``market.json`` next to this file is the market feed; ``owlclaw demo`` rewrites it as its
story goes on (open and volatile, a sharp drop, a halt, the close).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from owlclaw import Registry

registry = Registry()
MARKET = Path(__file__).with_name("market.json")


def _market() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(MARKET.read_text(encoding="utf-8"))
    return data


@registry.state("market_state")
def market_state() -> dict[str, Any]:
    return _market()


@registry.capability("Check whether a symbol has an entry opportunity right now.", idempotent=True)
def entry_check(symbol: str) -> dict[str, Any]:
    market = _market()
    return {
        "symbol": symbol,
        "opportunity": bool(market.get("rebound_signal")),
        "volatility": market.get("volatility"),
        "signal": "rebound" if market.get("rebound_signal") else None,
    }


@registry.capability(
    "Place an order for a symbol; orders above 10,000 USD wait for a person's approval.",
)
def place_order(symbol: str, side: str, notional_usd: float) -> dict[str, Any]:
    orders = MARKET.with_name("orders.jsonl")
    order = {"symbol": symbol, "side": side, "notional_usd": notional_usd}
    with orders.open("a", encoding="utf-8") as f:
        f.write(json.dumps(order) + "\n")
    return {"order_id": f"ord-{sum(1 for _ in orders.open(encoding='utf-8'))}", **order}
