"""A hand-recorded heartbeat run of a trading agent: fixture data for ledger and projection tests.

It appends the events a heartbeat run of the seeds' trading agent produces — the market check,
the decision not to act — committing each tool step as one transaction:
[tool result k, LLM response k+1, tool request k+1].
"""

from __future__ import annotations

import hashlib

from events import Ledger
from events import catalog as ev
from events.run import Run

AGENT_ID = "demo-trader"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _tool_call(call_id: str, name: str, arguments: str) -> dict[str, object]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
        ],
    }


def record_sample_run(ledger: Ledger) -> str:
    agent = ledger.register_agent(AGENT_ID, app_dir="examples/trading")
    agent.record(
        ev.IdentityLoaded,
        soul_sha256=_sha("I am a disciplined trading assistant."),
        identity_sha256=_sha("## My Capabilities\n- entry checks"),
        skills={"entry-monitor": _sha("entry-monitor skill")},
    )
    run = Run.start(
        agent.agent_id, agent.queue_run(trigger="heartbeat", focus="check entry opportunities")
    )
    run.record(
        ev.VisibleToolsResolved,
        tools=["query_state", "log_decision", "remember"],
        filtered={"schedule_cron": "denied by governance.deny"},
    )
    run.record(
        ev.LLMResponded,
        model="scripted/demo",
        message=_tool_call("call_1", "query_state", '{"state_name": "market_state"}'),
        usage={"prompt_tokens": 412, "completion_tokens": 18, "total_tokens": 430},
    )
    run.record(
        ev.ToolCallRequested,
        call_id="call_1",
        tool="query_state",
        arguments={"state_name": "market_state"},
    )
    ledger.append(agent, run)

    run.record(
        ev.ToolCallSucceeded,
        call_id="call_1",
        tool="query_state",
        result={"is_trading_time": False, "session": "closed"},
        duration_ms=0.4,
    )
    run.record(
        ev.LLMResponded,
        model="scripted/demo",
        message=_tool_call(
            "call_2",
            "log_decision",
            '{"reasoning": "Market closed; no entry checks.", "decision_type": "no_action"}',
        ),
        usage={"prompt_tokens": 470, "completion_tokens": 25, "total_tokens": 495},
    )
    run.record(
        ev.ToolCallRequested,
        call_id="call_2",
        tool="log_decision",
        arguments={"reasoning": "Market closed; no entry checks.", "decision_type": "no_action"},
    )
    ledger.append(run)

    run.record(
        ev.DecisionLogged,
        decision_type="no_action",
        reasoning="Market closed; no entry checks.",
        call_id="call_2",
    )
    run.record(
        ev.ToolCallSucceeded,
        call_id="call_2",
        tool="log_decision",
        result={"decision_id": "d-1"},
        duration_ms=0.2,
    )
    run.record(
        ev.LLMResponded,
        model="scripted/demo",
        message={"role": "assistant", "content": "Market is closed; nothing to do."},
        usage={"prompt_tokens": 520, "completion_tokens": 9, "total_tokens": 529},
    )
    run.record(
        ev.RunCompleted,
        answer="Market is closed; nothing to do.",
        iterations=3,
        tool_calls=2,
        tokens=1454,
    )
    ledger.append(run)
    return AGENT_ID
