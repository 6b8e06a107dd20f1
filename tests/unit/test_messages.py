"""Messages to an agent: each has one handler in the host, crosses to a Ray actor whole, and
sits at the bottom of the runtime core."""

from __future__ import annotations

import ast
import pickle
import sys
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import msgspec

from actors.host import AgentHost
from events import Ledger
from owlclaw import agents, messages
from owlclaw.config import OwlClawConfig, RuntimeConfig
from owlclaw.messages import Decision, Fire, Message


def every_message() -> set[type[Message[object]]]:
    found, todo = set(), list(Message.__subclasses__())
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo += cls.__subclasses__()
    return found


def test_every_message_has_one_handler_in_the_host() -> None:
    host = AgentHost(Ledger.in_memory(), OwlClawConfig(runtime=RuntimeConfig(models=("x",))))
    assert set(host._handlers) == every_message()
    names = {handler.__name__ for handler in host._handlers.values()}
    assert len(names) == len(host._handlers)


def test_messages_cross_to_an_actor_whole() -> None:
    sent = [
        Fire(agent_id="a", schedule_id="s", fire_time=datetime.now(UTC), missed="late"),
        messages.AnswerApproval(agent_id="a", decision=Decision("ap-1", True, "ops")),
        messages.SubAgentFinished(
            agent_id="boss",
            spawn_id="sp-1",
            run_id=uuid4(),
            call_id="c-1",
            child_agent_id="boss.1",
            child_run_id=uuid4(),
            wait=True,
            status="completed",
            answer="done",
            tokens=3,
            cost_usd=0.0,
        ),
    ]
    assert [pickle.loads(pickle.dumps(m)) for m in sent] == sent


def test_a_fire_keeps_its_wire_format() -> None:
    """``POST /agents/{id}/fires`` carries a Fire as JSON; the Hatchet worker sends it."""
    at = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    fire = Fire(agent_id="a", schedule_id="s", fire_time=at)
    assert msgspec.to_builtins(fire) == {
        "agent_id": "a",
        "schedule_id": "s",
        "fire_time": "2026-01-02T03:04:05Z",
        "missed": None,
        "occurrences": 1,
        "first_fire_time": None,
    }
    assert fire.key == "s@2026-01-02T03:04:05+00:00"
    older = {"agent_id": "a", "schedule_id": "s", "fire_time": "2026-01-02T03:04:05Z"}
    assert msgspec.convert(older, Fire, strict=False) == fire  # a sender from before the counts


def test_messages_and_the_contract_import_only_events_msgspec_and_the_standard_library() -> None:
    allowed = {"events", "msgspec", "owlclaw.messages", *sys.stdlib_module_names}
    for module in (messages.__file__, agents.__file__):
        assert module is not None
        tree = ast.parse(Path(module).read_text())
        imported = {
            node.module if isinstance(node, ast.ImportFrom) else alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.Import | ast.ImportFrom)
            for alias in node.names
        }
        assert {name for name in imported if name and name.split(".")[0] not in allowed} <= {
            "owlclaw.messages"
        }, module
