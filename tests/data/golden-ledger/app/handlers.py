"""The golden agent's code: a state, an entry check and an order (which governance asks about).
Pure functions of their arguments, so a replay of the golden ledger gets the same results."""

from owlclaw import Registry

registry = Registry()


@registry.state("market_state")
def market_state() -> dict[str, object]:
    return {"session": "open", "volatility": "high"}


@registry.capability("Check whether to enter a position in a symbol.")
def entry_check(symbol: str) -> dict[str, object]:
    return {"symbol": symbol, "enter": False, "reason": "volatility too high"}


@registry.capability("Place an order for an amount of a symbol.")
def place_order(symbol: str, amount: int) -> dict[str, object]:
    return {"placed": symbol, "amount": amount}
