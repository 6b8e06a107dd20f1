"""The outbox delivers each MessageSent at least once, named by its message id: retried,
failures recorded (MessageDeliveryFailed) and parked until retried, nothing resent by a
rebuild, and nothing lost when the process dies between the commit and the send."""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from events import Ledger, Run
from events import catalog as ev
from events.streams import message_stream_id
from owlclaw.database import Database
from owlclaw.tools.errors import ToolError
from owlclaw.tools.pack.messages import ChannelConfig, message_tools
from projections import Outbox, ProjectionRunner
from projections.rebuild import rebuild
from projections.retry import retry_parked
from tests.cli import owlclaw
from tests.integration.processes import run_outbox
from tests.tool_context import tool_context
from tests.webhooks import Receiver

pytestmark = pytest.mark.integration


def send_messages(ledger: Ledger, channel: ChannelConfig, *texts: str) -> list[str]:
    """A run of agent ``courier`` calls send_message once per text; committed like the
    executor commits a call's outcome. Returns the message ids."""
    try:
        agent = ledger.load_agent("courier")
    except KeyError:
        agent = ledger.register_agent("courier")
    run = Run.start("courier", agent.queue_run("webhook"))
    tool = message_tools({"ops": channel})["send_message"]
    ids = []
    for i, text in enumerate(texts):
        params = tool.spec.parse({"channel": "ops", "text": text})
        assert not isinstance(params, ToolError)
        result = asyncio.run(tool.execute(params, tool_context(agent, run, f"call-{i}")))
        ids.append(result["message_id"])
    ledger.append(agent, run)
    return ids


def outbox(ledger: Ledger) -> tuple[Outbox, ProjectionRunner]:
    view = Outbox(ledger)
    view.create_table()
    return view, ProjectionRunner(ledger, view)


def rows(view: Outbox) -> dict[str, dict[str, Any]]:
    with view.transaction(commit=False) as curs:
        found = curs.execute(view.sql("SELECT * FROM {outbox}")).fetchall()
    return {r["message_id"]: dict(r) for r in found}


def failures(ledger: Ledger, message_id: str) -> list[ev.LedgerEvent]:
    return ledger.stream(message_stream_id(message_id))


def test_a_message_is_delivered_with_its_id_as_idempotency_key_and_headers_from_the_env(
    ledger: Ledger, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPS_TOKEN", "Bearer s3cret")
    channel = ChannelConfig(url=receiver.url, headers_env={"Authorization": "OPS_TOKEN"})
    [message_id] = send_messages(ledger, channel, "disk almost full")
    view, runner = outbox(ledger)
    runner.catch_up()
    [(key, headers, body)] = receiver.received
    assert key == message_id and headers["Authorization"] == "Bearer s3cret"
    assert (body["message_id"], body["agent_id"], body["channel"], body["text"]) == (
        message_id,
        "courier",
        "ops",
        "disk almost full",
    )
    [sent] = ledger.log.read(types=[ev.MessageSent])
    assert body["run_id"] == str(sent.event.run_id) and "s3cret" not in repr(sent.event)
    row = rows(view)[message_id]
    assert (row["status"], row["attempts"], row["http_status"]) == ("delivered", 1, 200)


def test_a_refused_delivery_is_retried_until_it_is_accepted(
    ledger: Ledger, receiver: Receiver
) -> None:
    [message_id] = send_messages(ledger, ChannelConfig(url=receiver.url, attempts=3), "hi")
    receiver.statuses = [503, 502]
    view, runner = outbox(ledger)
    runner.catch_up()
    assert [key for key, _, _ in receiver.received] == [message_id] * 3
    assert receiver.accepted == {message_id: 1}
    assert (rows(view)[message_id]["status"], rows(view)[message_id]["attempts"]) == (
        "delivered",
        3,
    )
    assert failures(ledger, message_id) == []


def test_after_the_last_attempt_the_failure_is_recorded_and_parked_until_retried(
    ledger: Ledger, receiver: Receiver, fresh_db: Database, tmp_path: Path
) -> None:
    [message_id] = send_messages(ledger, ChannelConfig(url=receiver.url, attempts=2), "hi")
    receiver.statuses = [500] * 4
    view, runner = outbox(ledger)
    runner.catch_up()
    row = rows(view)[message_id]
    assert (row["status"], row["attempts"]) == ("failed", 2) and "HTTP 500" in row["error"]
    [failed] = failures(ledger, message_id)
    assert isinstance(failed, ev.MessageDeliveryFailed)
    assert (failed.message_id, failed.agent_id, failed.channel, failed.attempts) == (
        message_id,
        "courier",
        "ops",
        2,
    )
    assert runner.status().parked_count == 1

    [still] = retry_parked(ledger, view)  # the receiver still refuses
    assert still.error is not None and "HTTP 500" in still.error
    assert len(failures(ledger, message_id)) == 2 and runner.status().parked_count == 1

    env = {
        **os.environ,
        "OWLCLAW_DATABASE_URL": fresh_db.url,
        "OWLCLAW_DATABASE_NAME": str(fresh_db.params["dbname"]),
    }
    retried = owlclaw(env, "projections", "retry", "outbox", "--json", cwd=tmp_path, timeout=120)
    assert retried.returncode == 0, retried.stderr  # the receiver is back
    [outcome] = json.loads(retried.stdout)["retried"]
    assert outcome["error"] is None and runner.status().parked_count == 0
    assert rows(view)[message_id]["status"] == "delivered"
    assert receiver.accepted == {message_id: 1}


def test_a_rebuild_resends_nothing_and_keeps_what_was_delivered(
    ledger: Ledger, receiver: Receiver
) -> None:
    channel = ChannelConfig(url=receiver.url, attempts=1)
    delivered, failed = send_messages(ledger, channel, "delivered", "failed")
    receiver.statuses = [200, 500]
    view, runner = outbox(ledger)
    runner.catch_up()
    [never_delivered] = send_messages(ledger, channel, "sent after the view stopped")
    before = rows(view)
    sent = len(receiver.received)

    rebuild(ledger, Outbox)

    assert len(receiver.received) == sent
    after = rows(view)
    for message_id in (delivered, failed):
        assert after[message_id] == before[message_id]
    assert after[never_delivered]["status"] == "not_sent"
    parked = {p.position for p in runner.status().parked}
    assert len(parked) == 2  # the failed one and the one never delivered: retry sends them
    assert len(retry_parked(ledger, view)) == 2
    assert set(receiver.accepted) == {delivered, failed, never_delivered}


def test_a_host_killed_between_the_commit_and_the_delivery_delivers_each_message_once(
    ledger: Ledger, receiver: Receiver, fresh_db: Database
) -> None:
    """The issue's crash test: MessageSent is committed, the outbox's process dies inside the
    POST (its receiver never answers), and the restarted outbox delivers every message;
    the receiver, counting idempotency keys, accepts each message exactly once."""
    ids = send_messages(ledger, ChannelConfig(url=receiver.url, attempts=1), "one", "two")
    receiver.hold_first = True
    worker = mp.get_context("spawn").Process(target=run_outbox, args=(fresh_db.url,))
    worker.start()
    assert receiver.holding.wait(60), "the outbox never sent"
    assert worker.pid is not None
    os.kill(worker.pid, signal.SIGKILL)
    worker.join(30)
    view, runner = outbox(ledger)
    assert rows(view) == {} and runner.position == 0  # nothing recorded as delivered

    runner.catch_up()

    assert receiver.accepted == dict.fromkeys(ids, 1)
    assert {key for key, _, _ in receiver.received} == set(ids)
    assert [key for key, _, _ in receiver.received].count(ids[0]) == 2  # killed, then resent
    assert {r["status"] for r in rows(view).values()} == {"delivered"}
    assert all(failures(ledger, message_id) == [] for message_id in ids)
