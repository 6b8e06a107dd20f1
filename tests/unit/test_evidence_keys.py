"""The signing key: created private (0600), never silently replaced, found through the config."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from owlclaw.audit.evidence.keys import SigningKeyError, init_key, load_key, public_key_of
from owlclaw.audit.evidence.verify_bundle import BundleKeyError, parse_public_key
from owlclaw.config import load_config


def test_init_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "signing_key.pem"
    public = init_key(path)
    assert path.stat().st_mode & 0o777 == 0o600
    assert path.parent.stat().st_mode & 0o777 == 0o700
    assert public_key_of(load_key(path)) == public
    assert parse_public_key((tmp_path / "keys" / "signing_key.pub").read_text()) == public.raw
    assert parse_public_key(str(tmp_path / "keys" / "signing_key.pub")) == public.raw
    assert base64.b64decode(public.base64) == public.raw and len(public.raw) == 32


def test_init_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "signing_key.pem"
    first = init_key(path)
    with pytest.raises(SigningKeyError, match="already exists"):
        init_key(path)
    assert public_key_of(load_key(path)) == first
    second = init_key(path, force=True)
    assert second != first and public_key_of(load_key(path)) == second
    assert path.stat().st_mode & 0o777 == 0o600


def test_a_missing_or_foreign_key_says_what_is_wrong(tmp_path: Path) -> None:
    with pytest.raises(SigningKeyError, match="no signing key at"):
        load_key(tmp_path / "absent.pem")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    with pytest.raises(SigningKeyError, match="not an unencrypted PEM private key"):
        load_key(garbage)


@pytest.mark.parametrize(
    ("text", "message"),
    [("not base64!", "not base64"), (base64.b64encode(bytes(31)).decode(), "this one has 31")],
)
def test_a_malformed_public_key_says_why(text: str, message: str) -> None:
    with pytest.raises(BundleKeyError, match=message):
        parse_public_key(text)


def test_the_key_path_defaults_under_the_data_dir_and_is_configurable(tmp_path: Path) -> None:
    default = load_config(tmp_path / "none.toml", {"OWLCLAW_DATA_DIR": str(tmp_path)})
    assert default.signing_key_path == tmp_path / "keys" / "signing_key.pem"
    toml = tmp_path / "owlclaw.toml"
    toml.write_text(f'[evidence]\nsigning_key = "{tmp_path}/a.pem"\n')
    assert load_config(toml, {}).signing_key_path == tmp_path / "a.pem"
    env = {"OWLCLAW_SIGNING_KEY": str(tmp_path / "b.pem")}
    assert load_config(toml, env).signing_key_path == tmp_path / "b.pem"
