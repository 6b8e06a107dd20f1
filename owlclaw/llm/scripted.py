"""The ``scripted`` litellm provider: deterministic tool-call scripts for the demo and tests.

``model="scripted/<name>"`` plays the script registered under ``name``. The step played is the
number of assistant messages already in the conversation, so the provider keeps no state: any
number of runs can play the same script at once, and a resumed run continues where it stopped.

A script is a list of steps; a step is either ``{"tool_calls": [{"name": ..., "arguments":
{...}}, ...]}`` or ``{"content": "final answer"}``. Past the last step the model answers with
the script's ``final`` text. Scripts come from Python objects or JSON files; an unknown key is
refused (docs/scripted-model.md has the whole format).

One agent meets different situations, so a script may instead hold ``cases``: each has a
``when`` text and its own steps, and a conversation plays the first case whose ``when`` occurs
in its user message (case-insensitive). A string argument, or a step's content, may quote an
earlier tool result of the same conversation as ``{{result.<tool>.<field>}}`` (e.g. the id
``schedule_once`` returned), which is what a model reading that result would do.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import msgspec

from owlclaw.struct_errors import describe

PROVIDER = "scripted"


class ScriptedToolCall(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    name: str
    arguments: dict[str, Any] | str = {}
    """A dict, or raw text to send malformed arguments on purpose."""


class ScriptStep(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    tool_calls: list[ScriptedToolCall] = []
    content: str | None = None


class ScriptCase(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    when: str
    """Played when this text occurs in the conversation's user message."""
    steps: list[ScriptStep]
    final: str | None = None


class Script(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    steps: list[ScriptStep] = []
    cases: list[ScriptCase] = []
    final: str = "Done."
    latency_s: float = 0.0
    """Simulated model latency per call."""
    prompt_tokens: int = 100
    completion_tokens: int = 20


class ScriptError(ValueError):
    """A script that cannot be loaded or played."""


_SCRIPTS: dict[str, Script] = {}
_RESULT_REF = re.compile(r"\{\{result\.(\w+)\.(\w+)\}\}")


def register_script(name: str, script: Script | list[dict[str, Any]] | dict[str, Any]) -> None:
    """Make ``scripted/<name>`` play ``script`` (a Script, a list of steps or a script dict)."""
    if not isinstance(script, Script):
        raw = {"steps": script} if isinstance(script, list) else script
        try:
            script = msgspec.convert(raw, Script)
        except msgspec.ValidationError as e:
            raise ScriptError(
                f"invalid script {name!r}: {describe(e, Script, raw, toml=False)}"
            ) from e
    _SCRIPTS[name] = script


def load_script_file(path: Path, name: str | None = None) -> str:
    """Register the JSON script in ``path`` (under its file stem by default); returns the name."""
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as e:
        raise ScriptError(f"cannot read script {path}: {e}") from e
    name = name or path.stem
    register_script(name, raw)
    return name


def load_script_dir(directory: Path) -> list[str]:
    """Register every ``*.json`` script in ``directory``; returns their names."""
    return [load_script_file(path) for path in sorted(directory.glob("*.json"))]


def script_named(name: str) -> Script:
    try:
        return _SCRIPTS[name]
    except KeyError:
        known = ", ".join(sorted(_SCRIPTS)) or "none"
        raise ScriptError(f"no script named {name!r} (registered: {known})") from None


def next_message(
    script: Script, messages: list[dict[str, Any]], call_prefix: str
) -> dict[str, Any]:
    """The assistant message of the step this conversation has reached."""
    steps, final = _steps_for(script, messages)
    step_no = sum(1 for m in messages if message_role(m) == "assistant")
    if step_no >= len(steps):
        return {"role": "assistant", "content": final}
    step = steps[step_no]
    results = _tool_results(messages)
    if not step.tool_calls:
        return {"role": "assistant", "content": _resolve(step.content or final, results)}
    return {
        "role": "assistant",
        "content": _resolve(step.content, results),
        "tool_calls": [
            {
                "id": f"{call_prefix}_{step_no}_{i}",
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments
                    if isinstance(call.arguments, str)
                    else json.dumps(_resolve(call.arguments, results), ensure_ascii=False),
                },
            }
            for i, call in enumerate(step.tool_calls)
        ],
    }


def _steps_for(script: Script, messages: list[Any]) -> tuple[list[ScriptStep], str]:
    if not script.cases:
        return script.steps, script.final
    user = next((_field(m, "content") for m in messages if message_role(m) == "user"), "")
    text = str(user or "").lower()
    for case in script.cases:
        if case.when.lower() in text:
            return case.steps, case.final or script.final
    return script.steps, script.final


def _tool_results(messages: list[Any]) -> dict[str, Any]:
    """Tool name -> its latest result in this conversation (decoded JSON)."""
    names: dict[str, str] = {}
    results: dict[str, Any] = {}
    for m in messages:
        for call in _field(m, "tool_calls") or []:
            names[_field(call, "id")] = _field(_field(call, "function"), "name")
        if message_role(m) == "tool":
            try:
                results[names.get(_field(m, "tool_call_id"), "")] = json.loads(_field(m, "content"))
            except (TypeError, json.JSONDecodeError):
                continue
    return results


def _resolve(value: Any, results: dict[str, Any]) -> Any:
    if isinstance(value, dict):
        return {k: _resolve(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [_resolve(v, results) for v in value]
    if not isinstance(value, str):
        return value

    def quote(match: re.Match[str]) -> str:
        result = results.get(match.group(1))
        if not isinstance(result, dict) or match.group(2) not in result:
            raise ScriptError(f"{match.group(0)}: no such result earlier in this conversation")
        return str(result[match.group(2)])

    return _RESULT_REF.sub(quote, value)


def _field(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def message_role(message: Any) -> str | None:
    role = _field(message, "role")
    return role if isinstance(role, str) else None


def make_handler() -> Any:
    """The litellm CustomLLM instance (litellm is imported lazily: it costs seconds)."""
    import asyncio

    import litellm
    from litellm.llms.custom_llm import CustomLLM

    def priced(name: str) -> Script:
        """The script, with its model in litellm's cost map at zero cost: litellm prices every
        call after it returns, and a model missing from that map goes through its unmapped-model
        path (capability rules, a zero-cost diagnostic) at every call, which no priced provider
        model takes (~0.25 ms of CPU per call)."""
        script = script_named(name)
        if f"{PROVIDER}/{name}" not in litellm.model_cost:
            prices = (  # every price litellm knows: one missing gets a warning logged
                "input_cost_per_token",
                "output_cost_per_token",
                "cache_creation_input_token_cost",
                "cache_read_input_token_cost",
            )
            free = dict.fromkeys(prices, 0.0)
            litellm.register_model(
                {f"{PROVIDER}/{name}": {**free, "litellm_provider": PROVIDER, "mode": "chat"}}
            )
        return script

    class ScriptedLLM(CustomLLM):
        def completion(self, model: str, messages: list[Any], *args: Any, **kwargs: Any) -> Any:
            name = model.split("/", 1)[-1]
            script = priced(name)
            if script.latency_s:
                time.sleep(script.latency_s)
            return self._response(script, name, messages, kwargs.get("model_response"))

        async def acompletion(
            self, model: str, messages: list[Any], *args: Any, **kwargs: Any
        ) -> Any:
            name = model.split("/", 1)[-1]
            script = priced(name)
            if script.latency_s:
                await asyncio.sleep(script.latency_s)
            return self._response(script, name, messages, kwargs.get("model_response"))

        @staticmethod
        def _response(script: Script, name: str, messages: list[Any], response: Any) -> Any:
            message = next_message(script, messages, call_prefix=f"call_{name}")
            return litellm.ModelResponse(
                model=f"{PROVIDER}/{name}",
                choices=[
                    {
                        "index": 0,
                        "message": message,
                        "finish_reason": "tool_calls" if message.get("tool_calls") else "stop",
                    }
                ],
                usage={
                    "prompt_tokens": script.prompt_tokens,
                    "completion_tokens": script.completion_tokens,
                    "total_tokens": script.prompt_tokens + script.completion_tokens,
                },
            )

    return ScriptedLLM()
