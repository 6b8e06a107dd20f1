"""Loads in the background: a daemon thread's result or error in a future, awaited on a loop or
waited for in a thread; a loop that closes first neither waits for the load nor is told of it;
an embedder whose model loads in the background makes ``embed`` (only) wait for that load."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence

import pytest

from owlclaw.background import load_in_background
from owlclaw.compose.memory import LoadedInBackground

WAIT_S = 10


def test_the_result_of_the_load_is_the_futures_from_a_daemon_thread() -> None:
    seen: list[threading.Thread] = []

    def load() -> int:
        seen.append(threading.current_thread())
        return 42

    future = load_in_background(load, "answer")
    assert future.result(WAIT_S) == 42
    assert seen[0].daemon and seen[0].name == "answer"
    assert seen[0] is not threading.main_thread()


def test_the_error_of_the_load_is_raised_to_whoever_waits() -> None:
    def load() -> None:
        raise ValueError("no model")

    future = load_in_background(load)
    with pytest.raises(ValueError, match="no model"):
        future.result(WAIT_S)


def test_a_loop_awaits_the_load() -> None:
    async def scenario() -> str:
        return await asyncio.wrap_future(load_in_background(lambda: "loaded"))

    assert asyncio.run(asyncio.wait_for(scenario(), WAIT_S)) == "loaded"


def test_a_loop_that_closes_first_neither_waits_for_the_load_nor_is_told() -> None:
    gate = threading.Event()

    def load() -> str:
        gate.wait(WAIT_S)
        return "late"

    future = load_in_background(load)

    async def scenario() -> None:
        waiting = asyncio.ensure_future(asyncio.wrap_future(future))
        await asyncio.sleep(0)
        waiting.cancel()

    asyncio.run(scenario())  # returns although the load is held
    assert not future.done()
    gate.set()  # the result set after the loop closed reaches no loop: nothing raises
    assert future.result(WAIT_S) == "late"


class Counting:
    """An embedder that counts its calls and can be held in its first call."""

    model = "counting"
    dimensions = 1

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[1.0] for _ in texts]


def test_embed_waits_for_the_started_load_and_nothing_else_does() -> None:
    inner = Counting()
    embedder = LoadedInBackground(inner)
    assert (embedder.model, embedder.dimensions) == ("counting", 1)
    gate = threading.Event()
    loading = embedder.start(gate.wait)
    answers: list[list[list[float]]] = []
    recall = threading.Thread(target=lambda: answers.append(embedder.embed(["query"])))
    recall.start()
    recall.join(0.2)
    assert recall.is_alive() and inner.calls == []  # the query waits for the held load
    gate.set()
    recall.join(WAIT_S)
    assert answers == [[[1.0]]]
    assert loading.done() and inner.calls == [["warm-up"], ["query"]]


def test_before_the_load_starts_embed_calls_the_model_itself() -> None:
    inner = Counting()
    assert LoadedInBackground(inner).embed(["a", "b"]) == [[1.0], [1.0]]
    assert inner.calls == [["a", "b"]]


def test_a_failed_load_leaves_embed_to_the_embedders_own_call() -> None:
    class Failing(Counting):
        def embed(self, texts: Sequence[str]) -> list[list[float]]:
            raise RuntimeError("cannot load the local embedding model")

    embedder = LoadedInBackground(Failing())
    embedder.start().exception(WAIT_S)
    with pytest.raises(RuntimeError, match="cannot load"):
        embedder.embed(["query"])
