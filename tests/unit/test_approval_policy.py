"""Which calls wait for a person: governance ask / ask_if / default, a capability's own ask_if,
and the condition grammar, which never executes anything."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from owlclaw.tools.capabilities import Registry
from owlclaw.tools.conditions import Condition, ConditionError
from owlclaw.tools.governance import Governance


@pytest.mark.parametrize(
    ("text", "arguments", "holds"),
    [
        ("amount > 1000", {"amount": 1500}, True),
        ("amount > 1000", {"amount": 1000}, False),
        ("amount > 1000", {}, False),  # a missing field never matches
        ("amount > 1000", {"amount": "lots"}, False),  # nor a value of another type
        ('side == "buy" and amount >= 10', {"side": "buy", "amount": 10}, True),
        ('side == "buy" or amount >= 10', {"side": "sell", "amount": 1}, False),
        ("not urgent", {"urgent": False}, True),
        ("0 < amount <= 5", {"amount": 5}, True),
        ("0 < amount <= 5", {"amount": 6}, False),
        ("dry_run", {"dry_run": True}, True),
    ],
)
def test_conditions_hold_on_the_arguments(
    text: str, arguments: dict[str, object], holds: bool
) -> None:
    assert Condition.parse(text).holds(arguments) is holds


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "amount.real > 1",
        "amount + 1 > 2",
        "amount in [1, 2]",
        "(lambda: 1)()",
        "amount > ",
        "[x for x in y]",
        "amount > b'1'",
    ],
)
def test_anything_outside_the_grammar_is_refused(text: str) -> None:
    with pytest.raises(ConditionError):
        Condition.parse(text)


@given(st.text(max_size=40), st.dictionaries(st.sampled_from(["a", "b", "amount"]), st.integers()))
def test_any_text_is_refused_or_evaluates_to_a_bool(text: str, arguments: dict[str, int]) -> None:
    try:
        condition = Condition.parse(text)
    except ConditionError:
        return
    assert condition.holds(arguments) in (True, False)


def test_deny_wins_over_ask_and_ask_over_allow() -> None:
    governance = Governance(allow=("log_decision",), deny=("send_secret",), ask=("send_*",))
    visible, hidden = governance.resolve(["log_decision", "send_mail", "send_secret", "recall"])
    assert visible == ["log_decision", "send_mail"]
    assert hidden == {
        "send_secret": "denied by governance.deny",
        "recall": "not in governance.allow",
    }
    assert governance.approval_reason("send_mail", {}) == "governance.ask names it"
    assert governance.approval_reason("log_decision", {}) is None


def test_the_apps_condition_wins_over_the_capabilitys_and_default_ask_covers_the_rest() -> None:
    governance = Governance(ask_if={"place_order": "amount > 100"})
    assert governance.approval_reason("place_order", {"amount": 50}, "amount > 10") is None
    assert governance.approval_reason("other", {"amount": 50}, "amount > 10") == (
        "ask_if: amount > 10"
    )
    strict = Governance(default="ask")
    assert strict.approval_reason("recall", {}) == "the agent's default is ask"


def test_an_invalid_condition_in_the_app_or_a_capability_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match=r"\[governance\] ask_if.place_order: "):
        Governance.from_app_config({"governance": {"ask_if": {"place_order": "amount +"}}})
    registry = Registry()
    with pytest.raises(ConditionError, match="capability pay: ask_if: "):

        @registry.capability("Pay.", ask_if="open('x')")
        def pay(amount: float) -> None: ...

    @registry.capability("Refund.", ask_if="amount > 5")
    def refund(amount: float) -> None: ...

    assert registry.capabilities["refund"].spec.ask_if == "amount > 5"
