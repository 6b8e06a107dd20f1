"""Evidence bundles: an exported bundle verifies offline; any alteration is named."""

from __future__ import annotations

import ast
import base64
import json
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given, settings
from hypothesis import strategies as st

from events import Ledger
from events.streams import agent_stream_id, run_stream_id
from owlclaw.audit.evidence.export import RunSelectionError, export_bundle, select_runs
from owlclaw.audit.evidence.keys import public_key_of
from owlclaw.audit.evidence.verify_bundle import BundleReport, verify_bundle
from tests.sample_run import AGENT_ID, record_sample_run

KEY = Ed25519PrivateKey.generate()
PUBLIC = public_key_of(KEY).raw
VERIFIER = Path(verify_bundle.__code__.co_filename)


@cache
def recorded() -> Ledger:
    """The sample agent with three recorded runs."""
    ledger = Ledger.in_memory()
    for _ in range(3):
        record_sample_run(ledger)
    return ledger


def bundle(runs: tuple[int, ...] = (1, 2, 3)) -> bytes:
    return b"".join(export_bundle(recorded(), AGENT_ID, runs, KEY))


def lines(data: bytes) -> list[bytes]:
    return data.split(b"\n")[:-1]


def joined(parts: list[bytes]) -> bytes:
    return b"".join(p + b"\n" for p in parts)


def texts(report: BundleReport) -> list[str]:
    return [str(p) for p in report.problems]


def test_an_exported_bundle_verifies() -> None:
    report = verify_bundle(bundle(), PUBLIC)
    assert report.ok, texts(report)
    ledger = recorded()
    streams = [agent_stream_id(AGENT_ID), *ledger.list_runs(AGENT_ID)]
    assert report.streams == 4 and report.agent == AGENT_ID
    assert report.events == sum(len(ledger.stream(s)) for s in streams)
    assert report.key_id == public_key_of(KEY).key_id


def test_a_partial_export_holds_whole_streams_and_verifies() -> None:
    data = bundle((2,))
    report = verify_bundle(data, PUBLIC)
    assert report.ok, texts(report)
    manifest = json.loads(lines(data)[-2])
    run = run_stream_id(AGENT_ID, 2)
    assert [s["stream"] for s in manifest["streams"]] == [str(agent_stream_id(AGENT_ID)), str(run)]
    assert manifest["streams"][1]["first_version"] == 1
    assert manifest["streams"][1]["last_version"] == len(recorded().stream(run))
    assert manifest["runs"] == [2]


def test_each_line_carries_the_stored_bytes_and_hashes() -> None:
    rows = list(recorded().chains.chain_rows([run_stream_id(AGENT_ID, 1)]))
    events = [json.loads(x) for x in lines(bundle((1,)))[:-2]]
    exported = [e for e in events if e["stream"] == str(rows[0][0])]
    assert [(e["version"], e["state"].encode(), e["prev_hash"], e["hash"]) for e in exported] == [
        (r[1], r[3], r[5].hex(), r[6].hex()) for r in rows
    ]


def altered_event(data: bytes) -> tuple[bytes, int, dict[str, object]]:
    """The bundle with the state of the run's DecisionLogged changed (its hashes kept)."""
    parts = lines(data)
    number = next(i for i, x in enumerate(parts) if b'"topic":"DecisionLogged"' in x)
    event = json.loads(parts[number])
    event["state"] = event["state"].replace("no_action", "capability_selection")
    parts[number] = json.dumps(event).encode()
    return joined(parts), number + 1, event


def test_an_altered_event_is_named_by_line_stream_and_version() -> None:
    data, number, event = altered_event(bundle())
    report = verify_bundle(data, PUBLIC)
    assert not report.ok
    assert (
        f"line {number}, stream {event['stream']}, version {event['version']}: content does not"
        " match its hash (the event was altered)"
    ) in texts(report)


def stream_lines(parts: list[bytes], stream: object) -> list[int]:
    """The indexes of the event lines of ``stream``."""
    return [i for i, x in enumerate(parts[:-2]) if json.loads(x)["stream"] == str(stream)]


def test_a_removed_line_is_named() -> None:
    parts = lines(bundle())
    middle = stream_lines(parts, run_stream_id(AGENT_ID, 2))[4]
    removed = json.loads(parts.pop(middle))
    report = verify_bundle(joined(parts), PUBLIC)
    expected = (
        f"line {middle + 1}, stream {removed['stream']}, version {removed['version'] + 1}:"
        f" expected version {removed['version']} here"
    )
    assert any(t.startswith(expected) for t in texts(report)), texts(report)
    assert any("the manifest counts" in t for t in texts(report))


def test_a_removed_last_event_of_a_stream_is_named() -> None:
    parts = lines(bundle())
    removed = json.loads(parts.pop(stream_lines(parts, run_stream_id(AGENT_ID, 1))[-1]))
    report = verify_bundle(joined(parts), PUBLIC)
    assert (
        f"line {len(parts) - 1}, stream {removed['stream']}: stream ends at version"
        f" {removed['version'] - 1} in the bundle, the manifest says {removed['version']}"
    ) in texts(report)


def test_two_reordered_lines_are_named() -> None:
    parts = lines(bundle())
    parts[3], parts[4] = parts[4], parts[3]
    report = verify_bundle(joined(parts), PUBLIC)
    moved = json.loads(parts[3])
    assert any(
        t.startswith(f"line 4, stream {moved['stream']}, version {moved['version']}")
        for t in texts(report)
    ), texts(report)


def test_lines_moved_across_streams_are_named() -> None:
    parts = lines(bundle())
    first = stream_lines(parts, run_stream_id(AGENT_ID, 1))[0]
    parts[first - 1], parts[first] = parts[first], parts[first - 1]
    report = verify_bundle(joined(parts), PUBLIC)
    agent = agent_stream_id(AGENT_ID)
    assert any(
        t.startswith(f"line {first + 1}, stream {agent}") and "resumes after another stream" in t
        for t in texts(report)
    ), texts(report)


def test_an_altered_manifest_is_named() -> None:
    parts = lines(bundle())
    manifest = json.loads(parts[-2])
    manifest["created_at"] = "2020-01-01T00:00:00Z"
    parts[-2] = json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    report = verify_bundle(joined(parts), PUBLIC)
    assert texts(report) == [
        f"line {len(parts) - 1}: manifest altered: its signature does not verify with this key"
    ]


def test_a_bundle_signed_with_another_key_fails() -> None:
    other = public_key_of(Ed25519PrivateKey.generate())
    report = verify_bundle(bundle(), other.raw)
    assert texts(report) == [
        f"line {len(lines(bundle()))}: signature does not match this key: the bundle was signed"
        f" by key {public_key_of(KEY).key_id}, the key given is {other.key_id}"
    ]


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_any_single_byte_change_in_the_event_lines_fails(data: st.DataObject) -> None:
    original = bundle((1,))
    events_end = len(joined(lines(original)[:-2]))
    i = data.draw(st.integers(0, events_end - 1), label="offset")
    flip = data.draw(st.integers(1, 255), label="xor")
    changed = original[:i] + bytes([original[i] ^ flip]) + original[i + 1 :]
    assert not verify_bundle(changed, PUBLIC).ok


@pytest.mark.parametrize(
    ("ranges", "runs", "selected"),
    [
        ([], [], [1, 2, 3]),
        (["2..3"], [], [2, 3]),
        ([], ["3", "1"], [1, 3]),
        (["1..2"], ["2"], [1, 2]),
    ],
)
def test_run_selection(ranges: list[str], runs: list[str], selected: list[int]) -> None:
    assert select_runs(AGENT_ID, 3, ranges, runs) == selected


def test_run_selection_by_run_id() -> None:
    assert select_runs(AGENT_ID, 3, [], [str(run_stream_id(AGENT_ID, 2))]) == [2]


@pytest.mark.parametrize(
    ("ranges", "runs", "message"),
    [
        (["3..1"], [], "expected N..M with N <= M"),
        (["2-3"], [], "expected N..M"),
        ([], ["4"], "has runs 1..3, not 4"),
        ([], ["nope"], "has no run 'nope'"),
    ],
)
def test_bad_run_selection_says_why(ranges: list[str], runs: list[str], message: str) -> None:
    with pytest.raises(RunSelectionError, match=message):
        select_runs(AGENT_ID, 3, ranges, runs)


def test_the_verifier_imports_only_the_standard_library_and_cryptography() -> None:
    tree = ast.parse(VERIFIER.read_text())
    imported = {
        name.split(".")[0]
        for node in ast.walk(tree)
        for name in (
            [node.module or ""]
            if isinstance(node, ast.ImportFrom)
            else [a.name for a in node.names]
            if isinstance(node, ast.Import)
            else []
        )
    }
    assert imported - set(sys.stdlib_module_names) == {"cryptography"}


def test_the_verifier_runs_alone_as_a_copied_file(tmp_path: Path) -> None:
    script = tmp_path / "verify_bundle.py"
    script.write_bytes(VERIFIER.read_bytes())
    good, bad = tmp_path / "good.jsonl", tmp_path / "bad.jsonl"
    good.write_bytes(bundle())
    bad.write_bytes(altered_event(bundle())[0])
    key = base64.b64encode(PUBLIC).decode()

    def check(path: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-I", str(script), str(path), "--pubkey", key],
            cwd=tmp_path,
            env={},
            capture_output=True,
            text=True,
            check=False,
        )

    ok = check(good)
    assert ok.returncode == 0 and ok.stdout.startswith("ok: "), ok.stderr
    broken = check(bad)
    assert broken.returncode == 1 and "the event was altered" in broken.stdout


def test_a_removed_first_event_of_a_stream_is_named() -> None:
    parts = lines(bundle())
    first = stream_lines(parts, run_stream_id(AGENT_ID, 2))[0]
    removed = json.loads(parts.pop(first))
    report = verify_bundle(joined(parts), PUBLIC)
    assert any(
        t.startswith(f"line {first + 1}, stream {removed['stream']}, version 2: expected version 1")
        for t in texts(report)
    ), texts(report)
    assert (
        f"line {len(parts) - 1}, stream {removed['stream']}: stream begins at version 2 in the"
        " bundle, the manifest says 1"
    ) in texts(report)
