"""The Ed25519 key pair that signs evidence bundles: created once, read by every export."""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from owlclaw.audit.evidence.verify_bundle import key_id


class SigningKeyError(RuntimeError):
    """The signing key is missing, unreadable, not Ed25519, or would be overwritten."""


@dataclass(frozen=True)
class PublicKey:
    """A public key as ``keys init`` prints it and ``verify --pubkey`` takes it."""

    raw: bytes

    @property
    def base64(self) -> str:
        return base64.b64encode(self.raw).decode()

    @property
    def key_id(self) -> str:
        return key_id(self.raw)


def public_key_of(private_key: Ed25519PrivateKey) -> PublicKey:
    return PublicKey(
        private_key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
    )


def public_key_path(private_key_path: Path) -> Path:
    """Where ``init_key`` puts the public key: beside the private one, ``.pub``."""
    return private_key_path.with_suffix(".pub")


def init_key(path: Path, *, force: bool = False) -> PublicKey:
    """Create a key pair: the private key as PKCS#8 PEM at ``path`` (mode 0600, its directory
    0700), its public key's base64 at ``path.pub``. An existing key is kept unless ``force``:
    bundles signed with it would no longer verify against a new public key."""
    if path.exists() and not force:
        raise SigningKeyError(f"a signing key already exists at {path}")
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    private_key = Ed25519PrivateKey.generate()
    pem = private_key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    temporary = path.with_name(path.name + ".new")
    temporary.unlink(missing_ok=True)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    temporary.replace(path)
    public = public_key_of(private_key)
    public_key_path(path).write_text(public.base64 + "\n", encoding="ascii")
    return public


def load_key(path: Path) -> Ed25519PrivateKey:
    """The private key at ``path``; SigningKeyError saying what is wrong with it otherwise."""
    try:
        pem = path.read_bytes()
    except FileNotFoundError:
        raise SigningKeyError(f"no signing key at {path}") from None
    except OSError as e:
        raise SigningKeyError(f"cannot read the signing key {path}: {e}") from None
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        raise SigningKeyError(f"{path} is not an unencrypted PEM private key: {e}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyError(f"{path} holds a {type(key).__name__}, not an Ed25519 key")
    return key
