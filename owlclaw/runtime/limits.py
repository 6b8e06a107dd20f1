"""A run's limits on its calls, checked by the driver around each tool call: the call limit,
the identical-call limit and the doom loop (the same tool failing the same way in a row)."""

from __future__ import annotations

from events import catalog as ev
from owlclaw.config import RuntimeConfig
from owlclaw.runtime.progress import RunProgress, Stop
from owlclaw.tools.encoding import canonical_arguments, printable
from owlclaw.tools.executor import Settled


def check_call(limits: RuntimeConfig, state: RunProgress, name: str, arguments: str) -> None:
    """Before a call: the run's call limit (every call counts, whatever its outcome) and
    the identical-call limit (arguments compared parsed and key-sorted)."""
    if state.run.state.calls_made >= limits.max_function_calls:
        raise Stop(
            ev.RunTerminated,
            reason=f"reached the limit of {limits.max_function_calls} function calls",
        )
    key = (name, canonical_arguments(arguments))
    state.seen[key] = seen = state.seen.get(key, 0) + 1
    if seen >= limits.max_identical_calls:
        raise Stop(
            ev.RunTerminated,
            reason=f"{printable(name)[:200]} called {seen} times with identical arguments",
        )


def check_doom_loop(
    limits: RuntimeConfig, state: RunProgress, name: str, arguments: str, settled: Settled
) -> None:
    """After a call: the same tool failing the same way too many times in a row is a
    loop the model does not get out of; the run ends naming the call."""
    if settled.error_code is None:
        state.failing = None
        return
    streak = (name, settled.error_code)
    count = state.failing[2] + 1 if state.failing and state.failing[:2] == streak else 1
    state.failing = (*streak, count)
    if count >= limits.doom_loop_failures:
        raise Stop(
            ev.RunTerminated,
            reason=(
                f"doom loop: {printable(name)[:200]} failed {count} times in a row with "
                f"{settled.error_code} (last arguments: {printable(arguments)[:300]})"
            ),
        )
