"""Business capabilities (``@capability``) and state providers (``@state``) of an agent app.

A capability's parameters come from its type hints, turned into a msgspec Struct — the same
mechanism (one structure = schema + validation) as the built-in tools. A parameter annotated
``ToolContext`` is not shown to the model: the call's context is passed in it.
"""

from __future__ import annotations

import importlib.util
import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_type_hints

import msgspec

from owlclaw.app import AppError
from owlclaw.tools.conditions import Condition, ConditionError
from owlclaw.tools.spec import ToolSpec
from owlclaw.tools.states import STATE_TIMEOUT_SECONDS, Handler, StateProvider, States
from owlclaw.tools.tool import ToolContext


@dataclass(frozen=True)
class Capability:
    """A business handler as a Tool: sync handlers run in a worker thread."""

    spec: ToolSpec
    handler: Handler
    context_parameter: str | None = None
    """The handler's parameter annotated ``ToolContext``, if it has one."""

    async def execute(self, params: msgspec.Struct, ctx: ToolContext) -> Any:
        kwargs = {f: getattr(params, f) for f in params.__struct_fields__}
        if self.context_parameter is not None:
            kwargs[self.context_parameter] = ctx
        if inspect.iscoroutinefunction(self.handler):
            return await self.handler(**kwargs)
        result = await ctx.scope.threads.call(self.handler, **kwargs)
        return await result if inspect.isawaitable(result) else result


@dataclass
class Registry:
    """What a business app registers: capabilities (tools) and state providers."""

    capabilities: dict[str, Capability] = field(default_factory=dict)
    states: States = field(default_factory=States)

    def capability(
        self,
        description: str,
        *,
        name: str | None = None,
        idempotent: bool = False,
        parallel_safe: bool | None = None,
        timeout_s: float | None = None,
        max_result_bytes: int | None = None,
        category: str = "capability",
        dangerous: bool = False,
        ask_if: str | None = None,
    ) -> Callable[[Handler], Handler]:
        """Register a handler (sync or async) as a tool; its type hints are its schema.
        ``ask_if``: calls whose arguments meet this condition wait for a person's approval.
        ``parallel_safe`` (by default: when ``idempotent``): its calls run side by side with
        the other such calls of one model response (docs/tools.md, Parallel calls)."""

        def register(handler: Handler) -> Handler:
            tool_name = name or handler.__name__
            if ask_if is not None:
                try:
                    Condition.parse(ask_if)
                except ConditionError as e:
                    raise ConditionError(f"capability {tool_name}: ask_if: {e}") from None
            params, context_parameter = _params_struct(tool_name, handler)
            spec = ToolSpec(
                tool_name,
                description,
                params,
                idempotent=idempotent,
                parallel_safe=parallel_safe,
                timeout_s=timeout_s,
                max_result_bytes=max_result_bytes,
                category=category,
                dangerous=dangerous,
                ask_if=ask_if,
            )
            self.capabilities[tool_name] = Capability(spec, handler, context_parameter)
            return handler

        return register

    def state(
        self, name: str, *, ttl_seconds: float = 0.0, timeout_s: float = STATE_TIMEOUT_SECONDS
    ) -> Callable[[Handler], Handler]:
        """Register a provider for ``query_state(name)``, cached for ``ttl_seconds``; a read
        taking longer than ``timeout_s`` (at most 300 s) is a STATE_TIMEOUT."""

        def register(handler: Handler) -> Handler:
            self.states[name] = StateProvider(handler, ttl_seconds, timeout_s)
            return handler

        return register


def load_registry(path: Path, source: str | None = None) -> Registry:
    """Import an app's handlers.py (or ``source`` as that file) and return its module-level
    ``registry``.

    Each load is a fresh module, so a changed file is picked up by the next run; any failure
    (syntax error, import error, no registry) is an AppError naming the file.
    """
    spec = importlib.util.spec_from_file_location(f"owlclaw_app_{uuid.uuid4().hex}", path)
    if spec is None or spec.loader is None:
        raise AppError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    try:
        text = path.read_text(encoding="utf-8") if source is None else source
        exec(compile(text, path, "exec"), module.__dict__)
    except Exception as e:
        raise AppError(f"{path} failed to import: {type(e).__name__}: {e}") from e
    registry = getattr(module, "registry", None)
    if not isinstance(registry, Registry):
        raise AppError(f"{path} defines no `registry = Registry()` (from owlclaw import Registry)")
    return registry


def _params_struct(tool_name: str, handler: Handler) -> tuple[type[msgspec.Struct], str | None]:
    """The parameters the model fills in, and the name of the ``ToolContext`` parameter."""
    hints = get_type_hints(handler, include_extras=True)
    fields: list[Any] = []
    context_parameter = None
    for parameter in inspect.signature(handler).parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(
                f"capability {tool_name}: *args/**kwargs cannot be described to a model"
            )
        hint = hints.get(parameter.name, Any)
        if hint is ToolContext:
            context_parameter = parameter.name
        elif parameter.default is inspect.Parameter.empty:
            fields.append((parameter.name, hint))
        else:
            fields.append((parameter.name, hint, parameter.default))
    params = msgspec.defstruct(
        f"{tool_name}_params", fields, forbid_unknown_fields=True, kw_only=True
    )
    return params, context_parameter
