"""Start-up validation of an app (what ``owlclaw run`` checks before starting anything): each
problem names the file, and the field where there is one; every invalid app is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from owlclaw.app import IDENTITY_LIMIT_BYTES, AppNotFound
from owlclaw.server.validation import InvalidApps, validate_app, validate_apps
from tests.apps import make_app

REGISTRY = "from owlclaw import Registry\nregistry = Registry()\n"


def test_a_valid_app_with_governance_and_handlers_validates(tmp_path: Path) -> None:
    root = make_app(
        tmp_path / "trader",
        config='[governance]\ndeny = ["remember"]\n'
        "[governance.rate_limits.place_order]\ncalls = 2\nper_seconds = 60\n",
    )
    (root / "handlers.py").write_text(
        REGISTRY + '@registry.capability("Place an order.")\n'
        "def place_order(symbol: str) -> str:\n    return symbol\n"
    )
    app = validate_app(root, load_timeout_s=10)
    assert app.agent_id == "trader"


def test_a_bad_governance_field_is_named_with_its_file(tmp_path: Path) -> None:
    root = make_app(
        tmp_path / "trader",
        config='[governance.rate_limits.place_order]\ncalls = "two"\nper_seconds = 60\n',
    )
    with pytest.raises(InvalidApps) as caught:
        validate_apps([root], load_timeout_s=10)
    assert caught.value.problems == [
        f"{root.resolve() / 'owlclaw.toml'}: [governance] rate_limits.place_order.calls:"
        " Expected `int`, got `str`"
    ]


def test_an_oversized_soul_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = make_app(tmp_path / "big", soul="x" * (IDENTITY_LIMIT_BYTES + 1))
    with pytest.raises(InvalidApps) as caught:
        validate_apps([root], load_timeout_s=10)
    [problem] = caught.value.problems
    assert f"{root.resolve() / 'SOUL.md'} is {IDENTITY_LIMIT_BYTES + 1} bytes" in problem


def test_handlers_raising_at_import_is_refused_naming_the_file(tmp_path: Path) -> None:
    root = make_app(tmp_path / "broken")
    (root / "handlers.py").write_text(REGISTRY + "raise RuntimeError('no market data')\n")
    with pytest.raises(InvalidApps) as caught:
        validate_apps([root], load_timeout_s=10)
    [problem] = caught.value.problems
    assert problem.startswith(str(root.resolve() / "handlers.py"))
    assert "RuntimeError: no market data" in problem


def test_every_invalid_app_is_reported_once(tmp_path: Path) -> None:
    good = make_app(tmp_path / "good")
    one = make_app(tmp_path / "one", config="[governance]\ndaily_tokens = 0\n")
    two = make_app(tmp_path / "two", config="[governance]\nalow = []\n")
    with pytest.raises(InvalidApps) as caught:
        validate_apps([good, one, two], load_timeout_s=10)
    first, second = caught.value.problems
    assert first.startswith(f"{one.resolve() / 'owlclaw.toml'}: [governance] daily_tokens:")
    assert second.startswith(f"{two.resolve() / 'owlclaw.toml'}: [governance]")
    assert "alow" in second


def test_a_missing_app_directory_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(AppNotFound):
        validate_apps([tmp_path / "nowhere"], load_timeout_s=10)
