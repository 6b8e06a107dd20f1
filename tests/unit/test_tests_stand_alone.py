"""No file under tests/ imports a test module or a conftest: what tests share lives in support
modules (tests/*.py not named test_*), so a test module runs alone, in any order, and changing one
never breaks another's imports."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def is_test_module(path: Path) -> bool:
    return path.name.startswith("test_") or path.name == "conftest.py"


def imported_test_modules(path: Path, root: Path) -> list[str]:
    """The test modules and conftests under ``root`` that ``path`` imports, by dotted name
    (relative imports resolved from its package; an imported name counts when it is a module)."""
    package = path.relative_to(root).parent.parts
    named: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            named += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            parts = list(package[: len(package) - node.level + 1]) if node.level else []
            base = ".".join([*parts, *filter(None, [node.module])])
            named += [base, *(f"{base}.{alias.name}" for alias in node.names)]
    return [
        name
        for name in dict.fromkeys(named)
        if (module := root.joinpath(*name.split(".")).with_suffix(".py")).is_file()
        and is_test_module(module)
    ]


def test_no_file_under_tests_imports_a_test_module_or_a_conftest() -> None:
    offenders = {
        str(path.relative_to(ROOT)): imported
        for path in sorted((ROOT / "tests").rglob("*.py"))
        if (imported := imported_test_modules(path, ROOT))
    }
    assert offenders == {}, f"import shared code from a support module instead: {offenders}"


@pytest.mark.parametrize(
    ("statement", "found"),
    [
        ("import tests.integration.test_a", ["tests.integration.test_a"]),
        ("from tests.integration.test_a import helper", ["tests.integration.test_a"]),
        ("from tests.integration import test_a", ["tests.integration.test_a"]),
        ("from tests.conftest import missing_component", ["tests.conftest"]),
        ("from . import test_a", ["tests.integration.test_a"]),
        ("from .test_a import helper", ["tests.integration.test_a"]),
        ("from .. import conftest", ["tests.conftest"]),
        (
            "def later():\n    from tests.integration.test_a import helper",
            ["tests.integration.test_a"],
        ),
        ("from tests.contract import test_shared, helper", []),  # a suite's tests, not modules
        ("from tests.integration import processes", []),
    ],
)
def test_the_check_finds_every_way_of_importing_a_test_module(
    tmp_path: Path, statement: str, found: list[str]
) -> None:
    for module in ("conftest", "contract", "integration/test_a", "integration/processes"):
        path = tmp_path / "tests" / f"{module}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("")
    importer = tmp_path / "tests" / "integration" / "test_b.py"
    importer.write_text(statement + "\n")
    assert imported_test_modules(importer, tmp_path) == found
