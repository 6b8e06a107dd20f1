"""Almost-JSON tool arguments made JSON, when that cannot change what the model meant.

Models sometimes send arguments with a trailing comma, single quotes, Python's ``True`` or an
unclosed brace. Refusing them costs a round trip for a call whose meaning is plain; guessing at
garbage would run a tool with arguments nobody wrote. A repair (by the ``json-repair`` library)
is used only when all of these hold:

- the text is not valid JSON (valid JSON is never touched, whatever it holds; a JSON array
  stays an error of the usual kind);
- it is within the arguments' size limit and, leading blanks aside, begins with ``{``: the model
  meant an object (an empty or blank text is not repaired: it means no arguments, as before);
- the repaired text is a JSON object;
- it keeps every letter and digit of the text, in order (case aside, for ``True``): only
  punctuation, quotes and blanks were added, removed or changed, so nothing the model wrote was
  dropped (``{"a": 1, junk}``, prose around the object) and nothing was invented;
- it has no more empty strings than the text wrote (``""`` or ``''``): a missing value
  (``{"a": }``) is not filled in with one.

Anything else is left for the usual parse, which reports it as ``INVALID_ARGUMENTS``.
"""

from __future__ import annotations

import json_repair
import msgspec

from owlclaw.tools.spec import MAX_ARGUMENTS_BYTES


def repair_arguments(text: str) -> str | None:
    """The repaired JSON text of almost-JSON object arguments; None when ``text`` is valid JSON
    or cannot be repaired safely (the module's rules)."""
    if len(text) > MAX_ARGUMENTS_BYTES or not text.lstrip().startswith("{"):
        return None
    if _decoded(text) is not None:
        return None
    try:
        repaired = json_repair.repair_json(text, ensure_ascii=False)
    except RecursionError:  # nested too deeply: the usual parse says so
        return None
    return repaired if isinstance(repaired, str) and _faithful(text, repaired) else None


def _faithful(text: str, repaired: str) -> bool:
    """The repair is an object that drops and invents nothing of ``text``."""
    parsed = _decoded(repaired)
    return (
        isinstance(parsed, dict)
        and _words(repaired) == _words(text)
        and _empty_strings(parsed) <= text.count('""') + text.count("''")
    )


def _decoded(text: str) -> object | None:
    """``text`` decoded as the tool spec decodes arguments; None when it is not JSON."""
    try:
        decoded: object = msgspec.json.decode(text)
        return decoded
    except (msgspec.DecodeError, RecursionError):
        return None


def _empty_strings(value: object) -> int:
    """How many empty strings (keys or values) ``value`` holds, at any depth."""
    if isinstance(value, dict):
        return sum((k == "") + _empty_strings(v) for k, v in value.items())
    if isinstance(value, list):
        return sum(_empty_strings(v) for v in value)
    return int(value == "")


def _words(text: str) -> str:
    """The letters and digits of ``text``, in order and case-folded."""
    return "".join(c for c in text if c.isalnum()).casefold()
