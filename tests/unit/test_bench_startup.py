"""``owlclaw bench startup`` reads a server's output: the heavy modules ``-X importtime`` lists
before the server serves, and the phases its progress lines time when it does not report them."""

from __future__ import annotations

import io

from owlclaw.bench.startup import Output, heavy_imports

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
