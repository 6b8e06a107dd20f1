"""Group commit: concurrent requests share commits, each caller gets only its own outcome."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from events.group_commit import GroupCommit
from tests.waiting import wait_for


class Gate:
    """A commit function that holds its first call until released, recording every group."""

    def __init__(
        self,
        outcome: Callable[[str], str | BaseException] = lambda item: item.upper(),
        fails: BaseException | None = None,
    ):
        self.groups: list[list[str]] = []
        self.entered = threading.Event()
        self.release = threading.Event()
        self.outcome = outcome
        self.fails = fails
        """Raised by the second commit (a lost connection), if given."""

    def __call__(self, items: list[str]) -> list[str | BaseException]:
        self.groups.append(list(items))
        if len(self.groups) == 1:
            self.entered.set()
            assert self.release.wait(10)
        elif len(self.groups) == 2 and self.fails is not None:
            raise self.fails
        return [self.outcome(i) for i in items]

    def group(self, max_group: int = 32) -> GroupCommit[str, str]:
        return GroupCommit(self, max_group=max_group)


def submit_all(group: GroupCommit[str, str], gate: Gate, items: list[str]) -> dict[str, object]:
    """Submit each item from its own thread while the first commit is held; their outcomes."""
    results: dict[str, object] = {}

    def call(item: str) -> None:
        try:
            results[item] = group.submit(item)
        except BaseException as e:
            results[item] = e

    first = threading.Thread(target=call, args=(items[0],))
    first.start()
    assert gate.entered.wait(10)
    others = [threading.Thread(target=call, args=(i,)) for i in items[1:]]
    for t in others:
        t.start()
    wait_for(
        lambda: group.waiting == len(others), "the others to queue", timeout_s=10, poll_s=0.005
    )
    gate.release.set()
    for t in [first, *others]:
        t.join(10)
    return results


def test_a_lone_caller_commits_at_once_alone() -> None:
    calls: list[list[str]] = []

    def commit(items: list[str]) -> list[str]:
        calls.append(items)
        return [i * 2 for i in items]

    group: GroupCommit[str, str] = GroupCommit(commit, max_group=4)
    assert group.submit("a") == "aa"
    assert group.submit("b") == "bb"
    assert calls == [["a"], ["b"]]


def test_callers_ready_while_a_commit_runs_share_the_next_one() -> None:
    gate = Gate()
    results = submit_all(gate.group(), gate, ["a", "b", "c", "d"])
    assert gate.groups[0] == ["a"]
    assert sorted(gate.groups[1]) == ["b", "c", "d"]
    assert len(gate.groups) == 2
    assert results == {"a": "A", "b": "B", "c": "C", "d": "D"}


def test_a_group_holds_at_most_max_group_requests() -> None:
    gate = Gate()
    results = submit_all(gate.group(max_group=2), gate, ["a", "b", "c", "d", "e"])
    assert [len(g) for g in gate.groups] == [1, 2, 2]
    assert sorted(i for g in gate.groups for i in g) == ["a", "b", "c", "d", "e"]
    assert results == {i: i.upper() for i in "abcde"}


def test_a_failed_request_fails_only_its_caller() -> None:
    conflict = ValueError("c conflicts")
    gate = Gate(lambda item: conflict if item == "c" else item.upper())
    results = submit_all(gate.group(), gate, ["a", "b", "c", "d"])
    assert results == {"a": "A", "b": "B", "c": conflict, "d": "D"}


def test_a_failed_commit_fails_every_request_of_its_group_and_the_next_group_commits() -> None:
    lost = ConnectionError("connection lost")
    gate = Gate(fails=lost)
    group = gate.group()
    results = submit_all(group, gate, ["a", "b", "c"])
    assert results == {"a": "A", "b": lost, "c": lost}
    assert group.submit("d") == "D"


def test_no_caller_returns_before_the_commit_holding_its_request_returns() -> None:
    gate = Gate()
    group = gate.group()
    returned = threading.Event()

    def call() -> None:
        group.submit("a")
        returned.set()

    threading.Thread(target=call).start()
    assert gate.entered.wait(10)
    assert not returned.wait(0.05)
    gate.release.set()
    assert returned.wait(10)


def test_max_group_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        GroupCommit(lambda items: items, max_group=0)
