"""docs/seed-coverage.md cannot silently rot: every test a row names exists (its file and a test
function defined in it), every code path it names exists (and the name after ``:``, if any, is
defined there), every ``done`` row names at least one test, and every status is one of the four."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "seed-coverage.md"

TEST_REF = re.compile(r"`(tests/[\w/]+\.py)::(\w+)`")
CODE_REF = re.compile(r"`((?:owlclaw|events|projections|actors|tests)/[\w/.]*)(?::(\w+))?`")
STATUS = re.compile(r"^(done|partial: |not done|in progress \(issue \d+ item \d+\))")
CELL_SPLIT = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class Row:
    line: int
    item: str
    code: str
    tests: str
    status: str


def rows(text: str) -> list[Row]:
    """The table rows of the page (headers and separators left out), cells split on unescaped
    pipes."""
    found = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line.startswith("|") or set(line) <= set("|-: "):
            continue
        cells = [c.strip() for c in CELL_SPLIT.split(line[1:-1])]
        if cells[0] == "seed item":
            continue
        assert len(cells) == 4, f"line {number}: {len(cells)} cells, expected 4: {line}"
        found.append(Row(number, *cells))
    return found


@cache
def defined_names(path: Path) -> tuple[frozenset[str], frozenset[str]]:
    """(functions defined anywhere in the file, names bound at its top level)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    functions = {
        node.name
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            top.add(node.name)
        elif isinstance(node, ast.Assign):
            top.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            top.add(node.target.id)
    return frozenset(functions), frozenset(top)


def problems(text: str, root: Path = ROOT) -> list[str]:
    """Everything wrong with a coverage page's table, one line each."""
    found = []
    for row in rows(text):
        where = f"line {row.line} ({row.item[:50]})"
        if not STATUS.match(row.status):
            found.append(f"{where}: status {row.status!r} is none of the four")
        refs = TEST_REF.findall(row.tests)
        if row.status.startswith("done") and not refs:
            found.append(f"{where}: a done row names no test")
        for file, name in refs:
            path = root / file
            if not path.is_file():
                found.append(f"{where}: no test file {file}")
            elif not name.startswith("test_") or name not in defined_names(path)[0]:
                found.append(f"{where}: {file} defines no test {name}")
        for file, name in CODE_REF.findall(row.code):
            path = root / file
            if not path.exists():
                found.append(f"{where}: no such path {file}")
            elif name and (not path.is_file() or name not in defined_names(path)[1]):
                found.append(f"{where}: {file} defines no {name}")
    return found


def test_every_row_names_existing_tests_and_code() -> None:
    text = PAGE.read_text(encoding="utf-8")
    assert len(rows(text)) > 100
    assert problems(text) == []


def test_a_renamed_test_or_a_done_row_without_a_test_is_caught() -> None:
    page = "\n".join(
        [
            "| seed item | implemented in | tests | status |",
            "|---|---|---|---|",
            "| a | `owlclaw/tools/builtin/handlers.py:_schedule_once` | "
            "`tests/unit/test_seed_coverage.py::test_every_row_names_existing_tests_and_code`"
            " | done |",
            "| b | `owlclaw/tools/builtin/handlers.py:_no_such_handler` | "
            "`tests/unit/test_seed_coverage.py::test_every_row_was_renamed` | done |",
            "| c | `owlclaw/no_such_module.py` | — | done |",
            "| d | — | — | finished |",
            "| e \\| f | — | — | in progress (issue 39 item 1) |",
        ]
    )
    assert problems(page) == [
        "line 4 (b): tests/unit/test_seed_coverage.py defines no test test_every_row_was_renamed",
        "line 4 (b): owlclaw/tools/builtin/handlers.py defines no _no_such_handler",
        "line 5 (c): a done row names no test",
        "line 5 (c): no such path owlclaw/no_such_module.py",
        "line 6 (d): status 'finished' is none of the four",
    ]
