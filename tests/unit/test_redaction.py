"""The redactor: a secret's value, in any of its caught forms, anywhere in a JSON-like value or
an event, is replaced by its marker; text without one is left alone (an event without one is
stored byte for byte as without the redactor); the ledger stores events redacted (before
sealing) while the hash chain still verifies."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, quote_plus
from uuid import uuid4

import msgspec
from hypothesis import assume, given
from hypothesis import strategies as st

from events import Ledger
from events import catalog as ev
from events.codec import MsgspecMapper
from events.keys import InMemoryKeyStore
from events.redaction import MIN_SECRET_CHARS, Redactor, leaked_forms, marker
from events.run import Run
from events.sealing import Sealer

SECRET = "sk-live-4f9a2b7c1d"
secret_values = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=MIN_SECRET_CHARS
).filter(lambda v: not {"[", "]"} & set(v) and v not in marker("CRM_TOKEN"))
"""Secrets a marker cannot spell: no caught form of one lies in a marker or across its edge."""
texts = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)))
json_like = st.recursive(
    st.none() | st.booleans() | st.integers() | texts,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


def _strings(value: Any) -> list[str]:
    """Every string in a JSON-like value, dict keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@st.composite
def with_secret(draw: st.DrawFn) -> tuple[str, Any]:
    """A secret and a JSON-like value with one of its caught forms embedded in one of its
    strings (or a key)."""
    secret = draw(secret_values)
    value = draw(json_like)
    before, after = draw(texts), draw(texts)
    planted = before + draw(st.sampled_from(sorted(leaked_forms(secret)))) + after
    place = draw(st.sampled_from(["root", "list", "key", "value"]))
    if place == "root":
        return secret, planted
    if place == "list":
        return secret, [value, planted]
    if place == "key":
        return secret, {planted: value}
    return secret, {"k": [value, {"inner": planted}]}


@given(with_secret())
def test_a_secret_anywhere_in_a_json_value_never_survives(case: tuple[str, Any]) -> None:
    secret, value = case
    redacted = Redactor({"CRM_TOKEN": secret}).value(value)
    assert not any(form in s for s in _strings(redacted) for form in leaked_forms(secret))
    assert any("[redacted:CRM_TOKEN]" in s for s in _strings(redacted))


RUN, AT, SEALER = uuid4(), datetime.now(UTC), Sealer(InMemoryKeyStore())


@given(with_secret())
def test_a_json_text_reads_as_the_json_of_its_value_redacted(case: tuple[str, Any]) -> None:
    """What a model is told of a call is the JSON of what is recorded of it."""
    secret, value = case
    redactor = Redactor({"CRM_TOKEN": secret})
    told = redactor.json_text(msgspec.json.encode(value).decode())
    assert told == msgspec.json.encode(redactor.value(value)).decode()


def test_a_json_text_cut_short_has_each_form_replaced_as_json_escapes_it() -> None:
    secret = 'pa"ss\\word-1234'
    cut = msgspec.json.encode({"note": f"got {secret} back", "more": "x" * 50})[:45]
    told = Redactor({"DB_PASSWORD": secret}).json_text(f"{cut.decode()}\n[truncated]")
    assert told.startswith('{"note":"got [redacted:DB_PASSWORD] back","')
    assert told.endswith("\n[truncated]") and "ss\\\\word" not in told


def _stored(redactor: Redactor, result: Any) -> tuple[bytes, Any]:
    """How a ledger encrypting content stores a tool's result with this redactor: the stored
    JSON text, and the result read back."""
    mapper = MsgspecMapper(SEALER)
    mapper.redactor = redactor
    event = ev.ToolCallSucceeded(
        originator_id=RUN,
        originator_version=2,
        timestamp=AT,
        call_id="c1",
        tool="crm_lookup",
        result=result,
    )
    stored = mapper.to_stored_event(event)
    return stored.state, mapper.to_domain_event(stored).result


@given(with_secret())
def test_no_caught_form_of_a_secret_survives_storing(case: tuple[str, Any]) -> None:
    secret, result = case
    _, read = _stored(Redactor({"CRM_TOKEN": secret}), result)
    assert not any(form in s for s in _strings(read) for form in leaked_forms(secret))
    assert any("[redacted:CRM_TOKEN]" in s for s in _strings(read))


@given(secret_values, json_like)
def test_an_event_without_a_secret_is_stored_byte_for_byte_as_without_redaction(
    secret: str, result: Any
) -> None:
    forms = leaked_forms(secret)
    assume(not any(form in s for s in _strings(result) for form in forms))
    assert _stored(Redactor({"CRM_TOKEN": secret}), result) == _stored(Redactor(), result)


def test_a_form_found_in_a_number_or_an_escape_sequence_leaves_the_event_as_it_is() -> None:
    """The JSON text is only searched: an event whose text shows a form outside its strings'
    characters (digits of a number, the ``n`` of an escaped newline) is stored unchanged."""
    for secret, result in (
        ("31415926", {"n": 314159265358}),
        ("nsk-live-42", {"log": "\nsk-live-42 is not it"}),
    ):
        redactor = Redactor({"CRM_TOKEN": secret})
        assert redactor.found(msgspec.json.encode(result))
        assert _stored(redactor, result) == _stored(Redactor(), result)


@given(secret_values, json_like)
def test_a_value_without_a_secret_is_unchanged(secret: str, value: Any) -> None:
    forms = leaked_forms(secret)
    assume(not any(form in s for s in _strings(value) for form in forms))
    assert Redactor({"CRM_TOKEN": secret}).value(value) == value


@given(secret_values, texts, texts)
def test_base64_of_a_secret_inside_longer_encoded_text_is_caught(
    secret: str, before: str, after: str
) -> None:
    """Whatever bytes surround it, the encoded secret's own characters are replaced, so the
    encoded text no longer decodes to the secret."""
    encoded = base64.b64encode((before + secret + after).encode()).decode()
    redacted = Redactor({"CRM_TOKEN": secret}).text(encoded)
    assert "[redacted:CRM_TOKEN]" in redacted
    for form in (encoded, encoded.replace("+", "-").replace("/", "_")):
        assert secret not in Redactor({"CRM_TOKEN": secret}).text(form).replace("=", "")


def test_raw_base64_and_url_encoded_forms_are_caught() -> None:
    secret = "p@ss word/with+chars=1"
    redactor = Redactor({"DB_PASSWORD": secret})
    for form in (
        secret,
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode().rstrip("="),
        quote(secret, safe=""),
        quote_plus(secret),
    ):
        assert redactor.text(f"got <{form}> back") == "got <[redacted:DB_PASSWORD]> back"


def test_a_value_shorter_than_the_minimum_is_reported_not_redacted() -> None:
    redactor = Redactor({"PIN": "1234", "CRM_TOKEN": SECRET})
    assert redactor.too_short == ["PIN"]
    assert redactor.text(f"1234 and {SECRET}") == "1234 and [redacted:CRM_TOKEN]"


def test_the_longer_of_two_overlapping_secrets_is_named() -> None:
    redactor = Redactor({"SHORT_KEY": SECRET, "LONG_KEY": SECRET + "-extended"})
    assert redactor.text(f"{SECRET}-extended, {SECRET}") == (
        "[redacted:LONG_KEY], [redacted:SHORT_KEY]"
    )


def test_an_event_is_redacted_in_every_field_but_its_stream_position() -> None:
    run = uuid4()
    event = ev.ToolCallFailed(
        originator_id=run,
        originator_version=3,
        timestamp=datetime.now(UTC),
        call_id="c1",
        tool="crm_lookup",
        error=f"login as {SECRET} refused",
        error_code="INTERNAL",
        traceback=f'File "x.py", line 3\n  token = "{SECRET}"',
    )
    redacted = Redactor({"CRM_TOKEN": SECRET}).event(event)
    assert redacted.error == "login as [redacted:CRM_TOKEN] refused"
    assert SECRET not in redacted.traceback
    assert (redacted.originator_id, redacted.originator_version) == (run, 3)


def test_the_ledger_stores_events_redacted_before_sealing_and_still_verifies() -> None:
    """The stored event (opened) holds the marker; the chain, computed over what is stored,
    verifies; a run's sealed head, computed before the commit, matches."""
    ledger = Ledger.in_memory()
    ledger.redact({"CRM_TOKEN": SECRET})
    agent = ledger.register_agent("a1", "")
    run = Run.start("a1", agent.queue_run(trigger="webhook", focus="look up the customer"))
    run.record(
        ev.ToolCallSucceeded,
        call_id="c1",
        tool="crm_lookup",
        result={"token": SECRET, "echo": base64.b64encode(SECRET.encode()).decode()},
    )
    run.record(ev.RunCompleted, answer=f"The token is {SECRET}.")
    sealed = ledger.seal(agent, run)
    ledger.append(agent, run)
    stored = ledger.stream(run.id)
    text = json.dumps([ev.event_fields(e) for e in stored], default=str)
    assert SECRET not in text
    assert base64.b64encode(SECRET.encode()).decode() not in text
    assert "The token is [redacted:CRM_TOKEN]." in text
    report = ledger.chains.verify()
    assert (report.breaks, report.mismatches) == ([], [])
    assert ledger.chains.stream_head(run.id) == (sealed.version, bytes.fromhex(sealed.hash))
