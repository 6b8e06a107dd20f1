"""``owlclaw bench startup`` reads a server's output: the heavy modules ``-X importtime`` lists
before the server serves, and the phases its progress lines time when it does not report them."""

from __future__ import annotations

import io

from owlclaw.bench.startup import Output, heavy_imports, summary

IMPORTTIME = """\
import time: self [us] | cumulative | imported package
import time:       120 |        120 |   msgspec
import time:      9000 |    1500000 | hatchet_sdk
import time:        50 |         50 |     mcp.types
import time:       800 |     900000 |   mcp
starting database…
import time:       700 |    4200000 | litellm
"""


def test_the_heavy_modules_are_those_imported_before_the_server_serves() -> None:
    assert heavy_imports(IMPORTTIME) == {"hatchet_sdk": 1.5, "mcp": 0.9, "litellm": 4.2}
    served = IMPORTTIME.replace("starting database…", "starting background loads (x)…")
    assert heavy_imports(served) == {"hatchet_sdk": 1.5, "mcp": 0.9}


def test_the_progress_lines_time_the_phases_up_to_serving() -> None:
    output = Output(io.BytesIO(b""), 0.0)
    output.join()
    output.lines = [
        (2.0, "import time: ..."),
        (3.0, "starting database…"),
        (3.5, "starting agents (local placement)…"),
        (7.0, "starting timer service (builtin)…"),
        (7.25, "serving my-agent at http://127.0.0.1:8080 (placement local)"),
        (9.0, "starting nothing after serving…"),
    ]
    assert output.phases(serving_s=8.0) == {
        "process": 3.0,
        "database": 0.5,
        "agents": 3.5,
        "timer_service": 0.25,
    }


def _start(serving_s: float) -> dict[str, object]:
    return {
        "serving_s": serving_s,
        "loaded_s": serving_s + 5,
        "stop_s": 1.0,
        "phases": {"process": 1.5},
        "background_s": {"litellm": 4.0},
        "imported_before_serving": [],
    }


def test_a_placement_without_a_first_start_of_its_own_reports_no_first_start_figures() -> None:
    starts = [_start(3.0), _start(2.0), _start(4.0)]
    alone = summary("ray", None, starts)
    assert alone["ray_serving_s"] == 3.0
    assert (alone["ray_serving_min_s"], alone["ray_serving_max_s"]) == (2.0, 4.0)
    assert alone["ray_loaded_s"] == 8.0
    assert not any("first_start" in key or "stop_at_serving" in key for key in alone)
    first = summary("ray", _start(9.0), starts)
    assert (first["ray_first_start_s"], first["ray_stop_at_serving_s"]) == (9.0, 1.0)
    assert {k: v for k, v in first.items() if k in alone} == alone
