"""View column values: NUL (in ledgers written before the codec replaced it) becomes U+FFFD,
and literal backslash-u0000 text stays as it was."""

from __future__ import annotations

import json

from projections.sqlvalues import jsonb, text


def test_nul_becomes_u_fffd_and_literal_escapes_stay() -> None:
    value = {"k\x00": ["\x00", "\\u0000", "\\\x00"]}
    wrapped = jsonb(value)
    assert wrapped.dumps is not None
    assert json.loads(wrapped.dumps(value)) == {"k\ufffd": ["\ufffd", "\\u0000", "\\\ufffd"]}
    assert text("a\x00\\u0000") == "a\ufffd\\u0000"
