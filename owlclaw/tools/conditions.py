"""``ask_if`` conditions: when a call needs a person's approval, decided on its arguments.

A condition is a small boolean expression over the call's validated arguments, e.g.
``amount > 1000 and side == "buy"``. It is parsed with Python's ``ast`` and only the nodes
listed here are accepted — names (argument fields), literals, comparisons, ``and`` / ``or`` /
``not`` — so nothing in an app's owlclaw.toml is ever executed. A field the call does not have
makes the comparison false (the approval is not asked for on a missing optional field).
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

_COMPARE: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq,
    ast.NotEq: operator.ne,
    ast.Lt: operator.lt,
    ast.LtE: operator.le,
    ast.Gt: operator.gt,
    ast.GtE: operator.ge,
}
_MISSING = object()


class ConditionError(ValueError):
    """A condition outside the grammar (the message says which part)."""


@dataclass(frozen=True)
class Condition:
    text: str
    _tree: ast.expr

    @classmethod
    def parse(cls, text: str) -> Condition:
        try:
            tree = ast.parse(text, mode="eval").body
        except SyntaxError as e:
            raise ConditionError(f"not an expression: {text!r} ({e.msg})") from None
        _check(tree)
        return cls(text, tree)

    def holds(self, arguments: Mapping[str, Any]) -> bool:
        return bool(_eval(self._tree, arguments))


def _check(node: ast.expr) -> None:
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            _check(value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        _check(node.operand)
    elif isinstance(node, ast.Compare):
        for op in node.ops:
            if type(op) not in _COMPARE:
                raise ConditionError(f"operator {type(op).__name__} is not allowed")
        for side in (node.left, *node.comparators):
            if not isinstance(side, ast.Name | ast.Constant):
                raise ConditionError(
                    f"compare an argument name with a literal, not {ast.unparse(side)!r}"
                )
            if isinstance(side, ast.Constant) and not isinstance(
                side.value, int | float | str | bool | None
            ):
                raise ConditionError(f"literal {side.value!r} is not allowed")
    elif isinstance(node, ast.Name | ast.Constant):
        _check(ast.Compare(node, [ast.Eq()], [ast.Constant(True)]))
    else:
        raise ConditionError(f"{ast.unparse(node)!r} is not allowed in a condition")


def _eval(node: ast.expr, arguments: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, arguments) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    if isinstance(node, ast.UnaryOp):
        return not _eval(node.operand, arguments)
    if isinstance(node, ast.Compare):
        return _compare(node, arguments)
    value = _value(node, arguments)
    return value is not _MISSING and bool(value)


def _compare(node: ast.Compare, arguments: Mapping[str, Any]) -> bool:
    left = _value(node.left, arguments)
    for op, right_node in zip(node.ops, node.comparators, strict=True):
        right = _value(right_node, arguments)
        if left is _MISSING or right is _MISSING:
            return False
        try:
            if not _COMPARE[type(op)](left, right):
                return False
        except TypeError:  # "abc" > 3: a type mismatch is not a match
            return False
        left = right
    return True


def _value(node: ast.expr, arguments: Mapping[str, Any]) -> Any:
    if isinstance(node, ast.Name):
        return arguments.get(node.id, _MISSING)
    assert isinstance(node, ast.Constant)
    return node.value
