"""msgspec validation errors as a person reads them: the table and key, the problem, and for an
unknown key the nearest valid name.

A configuration key spelled wrong must refuse the app, not be ignored (a ``[governence]`` table
left the agent ungoverned); the refusal is only useful if it says what was meant.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from typing import Any

import msgspec
import msgspec.inspect as mi

_AT = re.compile(r"^(?P<problem>.*?)(?: - at `\$(?P<path>[^`]*)`)?$", re.DOTALL)
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]+)`$")
_STEP = re.compile(r"\.(?P<key>[^.\[]+)|\[(?P<index>[^\]]*)\]")


def nearest(name: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, or "" when none is close."""
    match = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f" (did you mean {match[0]!r}?)" if match else ""


def unknown_name(kind: str, name: str, known: Iterable[str]) -> str:
    """ "unknown <kind> 'name' (did you mean ...?); known: a, b" for a name a person typed."""
    names = sorted(known)
    return f"unknown {kind} {name!r}{nearest(name, names)}; known: {', '.join(names) or 'none'}"


def error_path(error: msgspec.ValidationError) -> tuple[str, ...]:
    """The keys of the path msgspec names (``$.server.port`` -> ("server", "port"))."""
    parsed = _AT.match(str(error))
    assert parsed is not None  # the pattern matches any text
    return tuple(m["key"] for m in _STEP.finditer(parsed["path"] or "") if m["key"] is not None)


def describe(
    error: msgspec.ValidationError,
    root: type[Any],
    raw: Any = None,
    table: str = "",
    *,
    toml: bool = True,
) -> str:
    """``error``, raised converting ``raw`` into ``root``, as "[table] key: problem" (``toml``)
    or "key.path: problem"; for an unknown key, the valid keys there, the nearest one named.
    ``table`` names where ``root`` sits in its file (``governance`` for an app's
    [governance]); "" for the file itself."""
    parsed = _AT.match(str(error))
    assert parsed is not None  # the pattern matches any text
    keys, info = _walk(mi.type_info(root), raw, parsed["path"] or "")
    path = [table, *keys] if table else keys
    unknown = _UNKNOWN.match(parsed["problem"])
    if unknown is None:
        return (
            f"{_where(path, toml, table=False)}: {parsed['problem']}" if path else parsed["problem"]
        )
    fields = [f.encode_name for f in info.fields] if isinstance(info, mi.StructType) else []
    if not path:
        return unknown_name("table or key" if toml else "key", unknown["name"], fields)
    return f"{_where(path, toml, table=True)}: {unknown_name('key', unknown['name'], fields)}"


def _where(path: list[str], toml: bool, table: bool) -> str:
    """Where a problem is: ``[runtime] hosts``, ``[governance] rate_limits.notify.calls``,
    ``[runtime]`` (a ``table``), a top-level key alone; ``steps[0].tool_calls`` outside TOML."""
    if not toml:
        return _dotted(path)
    if len(path) == 1:
        return f"[{path[0]}]" if table else path[0]
    return f"[{path[0]}] {_dotted(path[1:])}"


def _dotted(keys: list[str]) -> str:
    """``steps[0].tool_calls``: keys joined by dots, list indices attached."""
    return "".join(k if k.startswith("[") else f".{k}" for k in keys).lstrip(".")


def _walk(info: mi.Type, raw: Any, path: str) -> tuple[list[str], mi.Type]:
    """The keys of a msgspec error path (a dict's ``[...]`` resolved to the entry of ``raw``
    that does not convert) and the type reached."""
    keys: list[str] = []
    for step in _STEP.finditer(path):
        info = _unwrap(info)
        if step["key"] is not None and isinstance(info, mi.StructType):
            keys.append(step["key"])
            info = next((f.type for f in info.fields if f.encode_name == step["key"]), mi.AnyType())
            raw = raw.get(step["key"]) if isinstance(raw, dict) else None
        elif isinstance(info, mi.DictType):
            name, raw = _failing_entry(info.value_type, raw)
            keys.append(name)
            info = info.value_type
        elif isinstance(info, mi.ListType | mi.VarTupleType) and step["index"] is not None:
            keys.append(f"[{step['index']}]")
            index = int(step["index"])
            raw = raw[index] if isinstance(raw, list) and index < len(raw) else None
            info = info.item_type
        else:
            keys.append(step["key"] or f"[{step['index']}]")
            info, raw = mi.AnyType(), None
    return keys, _unwrap(info)


def _failing_entry(value_type: mi.Type, raw: Any) -> tuple[str, Any]:
    """The first entry of the table ``raw`` whose value does not convert (msgspec writes
    ``[...]`` for a dict key)."""
    if isinstance(raw, dict) and isinstance(value_type, mi.StructType):
        for name, value in raw.items():
            try:
                msgspec.convert(value, value_type.cls)
            except msgspec.ValidationError:
                return str(name), value
    return "[...]", None


def _unwrap(info: mi.Type) -> mi.Type:
    """The table type of an optional (``X | None``) one."""
    if isinstance(info, mi.UnionType):
        tables = [t for t in info.types if isinstance(t, mi.StructType | mi.DictType)]
        return tables[0] if len(tables) == 1 else info
    return info
