"""Verifies an evidence bundle offline: no database, nothing of OwlClaw imported.

The file needs only the standard library and ``cryptography``, so an auditor can copy it alone
and run ``python verify_bundle.py --pubkey KEY bundle.jsonl``. The format it checks is described
in docs/evidence.md; the row hash is the one ``events.hashchain``
recomputes, restated here because this file must stand alone.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

FORMAT = "owlclaw-evidence/1"
GENESIS_HASH = bytes(32)


class BundleKeyError(ValueError):
    """The public key given to verify with is not a base64 Ed25519 key."""


def key_id(public_key: bytes) -> str:
    """The short name of a public key: the first 16 hex digits of sha256 over its 32 bytes."""
    return hashlib.sha256(public_key).hexdigest()[:16]


def row_hash(prev_hash: bytes, stream: str, version: int, topic: str, state: bytes) -> bytes:
    """sha256(prev_hash || "<stream>:<version>:<topic>" || 0x00 || state)."""
    return hashlib.sha256(
        prev_hash + f"{stream}:{version}:{topic}".encode() + b"\x00" + state
    ).digest()


def parse_public_key(text: str) -> bytes:
    """The 32 raw bytes of an Ed25519 public key written as base64 (what ``keys init`` prints),
    given as that text or as the path of a file holding it."""
    if Path(text).is_file():
        text = Path(text).read_text(encoding="ascii", errors="replace")
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except binascii.Error as e:
        raise BundleKeyError(f"the public key is not base64: {e}") from None
    if len(raw) != 32:
        raise BundleKeyError(f"an Ed25519 public key has 32 bytes, this one has {len(raw)}")
    return raw


@dataclass(frozen=True)
class Problem:
    """One thing that does not hold, with where it is (line numbers count from 1)."""

    message: str
    line: int | None = None
    stream: str | None = None
    version: int | None = None

    def __str__(self) -> str:
        where = [f"line {self.line}"] if self.line is not None else []
        where += [f"stream {self.stream}"] if self.stream is not None else []
        where += [f"version {self.version}"] if self.version is not None else []
        return f"{', '.join(where)}: {self.message}" if where else self.message


@dataclass
class BundleReport:
    events: int = 0
    streams: int = 0
    agent: str | None = None
    key_id: str | None = None
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


@dataclass
class _Stream:
    first: int
    last: int
    head: bytes


class _Malformed(ValueError):
    """A line is not what the format says; the message says what it should be."""


def verify_bundle(data: bytes, public_key: bytes) -> BundleReport:
    """Check every row hash and chain link, the manifest against the event lines, and the
    manifest's signature with ``public_key`` (32 raw bytes); report each problem found."""
    report = BundleReport()
    if not data.endswith(b"\n"):
        report.problems.append(Problem("the bundle does not end with a newline (cut short?)"))
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if len(lines) < 2:
        report.problems.append(Problem("no manifest and signature lines (last two lines)"))
        return report
    *event_lines, manifest_line, signature_line = lines
    report.events = len(event_lines)
    _check_signature(report, manifest_line, signature_line, len(lines), public_key)
    streams = _check_events(report, event_lines)
    report.streams = len(streams)
    _check_manifest(report, manifest_line, len(lines) - 1, event_lines, streams)
    return report


def _object(line: bytes) -> dict[str, Any]:
    try:
        value = json.loads(line)
    except (UnicodeDecodeError, ValueError) as e:
        raise _Malformed(f"not a JSON object: {e}") from None
    if not isinstance(value, dict):
        raise _Malformed("not a JSON object")
    return value


def _field(obj: dict[str, Any], name: str, kind: type) -> Any:
    value = obj.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise _Malformed(f"field {name!r} missing or not a {kind.__name__}")
    return value


def _hex32(obj: dict[str, Any], name: str) -> bytes:
    try:
        raw = bytes.fromhex(_field(obj, name, str))
    except ValueError:
        raw = b""
    if len(raw) != 32:
        raise _Malformed(f"field {name!r} is not 64 hex digits")
    return raw


def _state(obj: dict[str, Any]) -> bytes:
    if "state" in obj and "state_base64" not in obj:
        try:
            return _field(obj, "state", str).encode("utf-8")  # type: ignore[no-any-return]
        except UnicodeEncodeError:
            raise _Malformed("field 'state' is not valid Unicode text") from None
    try:
        return base64.b64decode(_field(obj, "state_base64", str), validate=True)
    except binascii.Error:
        raise _Malformed("field 'state_base64' is not base64") from None


def _check_signature(
    report: BundleReport, manifest: bytes, line: bytes, number: int, public_key: bytes
) -> None:
    try:
        obj = _object(line)
        if obj.get("type") != "signature" or obj.get("algorithm") != "Ed25519":
            raise _Malformed("not an Ed25519 signature line (the last line)")
        signed_by = _field(obj, "key_id", str)
        signature = base64.b64decode(_field(obj, "signature", str), validate=True)
    except (_Malformed, binascii.Error) as e:
        report.problems.append(Problem(f"signature line malformed: {e}", number))
        return
    report.key_id = signed_by
    try:
        Ed25519PublicKey.from_public_bytes(public_key).verify(signature, manifest)
        report.key_id = key_id(public_key)
    except InvalidSignature:
        if signed_by != key_id(public_key):
            report.problems.append(
                Problem(
                    f"signature does not match this key: the bundle was signed by key {signed_by},"
                    f" the key given is {key_id(public_key)}",
                    number,
                )
            )
        else:
            report.problems.append(
                Problem("manifest altered: its signature does not verify with this key", number - 1)
            )


def _check_events(report: BundleReport, lines: list[bytes]) -> dict[str, _Stream]:
    streams: dict[str, _Stream] = {}
    current: str | None = None
    for number, line in enumerate(lines, start=1):
        try:
            obj = _object(line)
            stream = _field(obj, "stream", str)
            version = _field(obj, "version", int)
            topic = _field(obj, "topic", str)
            state = _state(obj)
            prev_hash, stored = _hex32(obj, "prev_hash"), _hex32(obj, "hash")
        except _Malformed as e:
            report.problems.append(Problem(f"event line malformed: {e}", number))
            continue
        seen = streams.get(stream)
        if seen is not None and stream != current:
            report.problems.append(
                Problem(
                    "the stream resumes after another stream began (lines reordered)",
                    number,
                    stream,
                    version,
                )
            )
        current = stream
        expected = 1 if seen is None else seen.last + 1
        expected_prev = GENESIS_HASH if seen is None else seen.head
        reason = None
        if version != expected:
            reason = (
                f"expected version {expected} here (an event is missing or lines were reordered)"
            )
        elif prev_hash != expected_prev:
            reason = "prev_hash does not match the previous event of its stream"
        elif row_hash(prev_hash, stream, version, topic, state) != stored:
            reason = "content does not match its hash (the event was altered)"
        if reason:
            report.problems.append(Problem(reason, number, stream, version))
        if seen is None:
            streams[stream] = _Stream(version, version, stored)
        else:
            seen.last, seen.head = version, stored
    return streams


def _check_manifest(
    report: BundleReport,
    line: bytes,
    number: int,
    event_lines: list[bytes],
    streams: dict[str, _Stream],
) -> None:
    try:
        manifest = _object(line)
        if manifest.get("type") != "manifest" or manifest.get("format") != FORMAT:
            raise _Malformed(f"not a {FORMAT} manifest line (the line before the last)")
        report.agent = _field(manifest, "agent", str)
        counted = _field(manifest, "event_lines", int)
        digest = _field(manifest, "events_sha256", str)
        listed = [_listed_stream(s) for s in _field(manifest, "streams", list)]
    except _Malformed as e:
        report.problems.append(Problem(f"manifest malformed: {e}", number))
        return
    if counted != len(event_lines):
        report.problems.append(
            Problem(
                f"the manifest counts {counted} event lines, the bundle has {len(event_lines)}"
                " (lines removed or added)",
                number,
            )
        )
    if hashlib.sha256(b"".join(x + b"\n" for x in event_lines)).hexdigest() != digest:
        report.problems.append(
            Problem(
                "the event lines do not match the manifest's events_sha256"
                " (a line was altered, removed, added or reordered)",
                number,
            )
        )
    report.problems += _stream_problems(listed, streams, number)


def _stream_problems(
    listed: list[tuple[str, int, int, str]], streams: dict[str, _Stream], number: int
) -> list[Problem]:
    """Where the streams the manifest lists differ from those of the event lines."""
    problems = []
    found = [(s, x.first, x.last, x.head.hex()) for s, x in streams.items()]
    for stream, first, last, head in (e for e in listed if e not in found):
        got = streams.get(stream)
        if got is None:
            detail = "has no event lines"
        elif got.first != first:
            detail = f"begins at version {got.first} in the bundle, the manifest says {first}"
        elif got.last != last:
            detail = f"ends at version {got.last} in the bundle, the manifest says {last}"
        else:
            detail = f"head hash {got.head.hex()} differs from the manifest's {head}"
        problems.append(Problem(f"stream {detail}", number, stream))
    names = {e[0] for e in listed}
    problems += [
        Problem("stream not listed in the manifest", number, s) for s, *_ in found if s not in names
    ]
    if [e[0] for e in listed] != [f[0] for f in found] and set(listed) == set(found):
        problems.append(Problem("streams not in the manifest's order", number))
    return problems


def _listed_stream(obj: Any) -> tuple[str, int, int, str]:
    if not isinstance(obj, dict):
        raise _Malformed("a streams entry is not an object")
    head = _hex32(obj, "head_hash").hex()
    return (
        _field(obj, "stream", str),
        _field(obj, "first_version", int),
        _field(obj, "last_version", int),
        head,
    )


def main(argv: list[str] | None = None) -> int:
    """Verify a bundle file; print each problem; exit 0 (intact), 1 (broken) or 2 (usage)."""
    parser = argparse.ArgumentParser(description="Verify an OwlClaw evidence bundle offline.")
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--pubkey", required=True, help="the signer's public key (base64)")
    args = parser.parse_args(argv)
    try:
        report = verify_bundle(args.bundle.read_bytes(), parse_public_key(args.pubkey))
    except (OSError, BundleKeyError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for problem in report.problems:
        print(f"BROKEN {problem}")
    if report.ok:
        print(f"ok: {report.events} events in {report.streams} streams, signed by {report.key_id}")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
