"""Sweep constraints: a tiny expression language over config keys.

``"schedule.qk_preload < schedule.ub_exp_max"``: numbers, strings, booleans,
``section.key`` names, ``+ - * // %``, unary ``-``/``not``, comparisons and
``and``/``or``.  :func:`parse_constraint` checks the whole expression when the
sweep file is read (syntax, allowed elements, known keys).  A constraint must
then be true or false on every point: one that raises when evaluated
(``schedule.qk_preload % 0 == 0``, ``"910b1" < 3``) stops the sweep with one
line naming it, before any point runs (``execute.check_constraints`` tries
every point first).
"""
from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from tfa_sim.explore.sweep.schema import check_key, show
from tfa_sim.spec.errors import InputError

MAX_LENGTH = 500
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
           ast.Mod: operator.mod}
_COMPARE = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
            ast.Eq: operator.eq, ast.NotEq: operator.ne}
_UNARY: dict[type, Callable[[Any], Any]] = {ast.USub: operator.neg, ast.UAdd: operator.pos, ast.Not: operator.not_}


class ConstraintError(ValueError):
    """A constraint cannot be evaluated on one point's values."""


@lru_cache(maxsize=256)
def parse_constraint(expr: str) -> ast.Expression:
    """The checked syntax tree of ``expr`` (one-line :class:`InputError` if it is not a constraint)."""
    if len(expr) > MAX_LENGTH:
        raise InputError(f"constraint {show(expr)} is longer than {MAX_LENGTH} characters; split it into several")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise InputError(f"constraint {show(expr)} does not parse; write e.g. schedule.qk_preload <= 4") from None
    _check(tree.body, expr)
    return tree


def _check(node: ast.AST, expr: str) -> None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        check_key(f"{node.value.id}.{node.attr}", f"constraint {show(expr)}")
        return
    if isinstance(node, ast.Constant) and isinstance(node.value, (bool, int, float, str)):
        return
    children: list[ast.AST] = []
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        children = [node.left, node.right]
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        children = [node.operand]
    elif isinstance(node, ast.BoolOp):
        children = list(node.values)
    elif isinstance(node, ast.Compare) and all(type(op) in _COMPARE for op in node.ops):
        children = [node.left, *node.comparators]
    else:
        raise InputError(f"constraint {show(expr)}: only numbers, section.key names, + - * // %, comparisons, "
                         f"and/or/not are allowed")
    for child in children:
        _check(child, expr)


def _number(value: Any) -> Any:
    if isinstance(value, str):
        raise ConstraintError(f"arithmetic on the string {show(value)}")
    return value


def _eval(node: Any, config: dict[str, dict[str, Any]]) -> Any:
    """Evaluate a node that :func:`parse` accepted (so its shape is known, hence ``Any``)."""
    if isinstance(node, ast.Attribute):
        assert isinstance(node.value, ast.Name)  # parse_constraint allows only section.key
        return config[node.value.id][node.attr]
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp):
        return _BINARY[type(node.op)](_number(_eval(node.left, config)), _number(_eval(node.right, config)))
    if isinstance(node, ast.UnaryOp):
        value = _eval(node.operand, config)
        return _UNARY[type(node.op)](value if isinstance(node.op, ast.Not) else _number(value))
    if isinstance(node, ast.BoolOp):
        values = (_eval(v, config) for v in node.values)
        return all(values) if isinstance(node.op, ast.And) else any(values)
    left = _eval(node.left, config)
    for op, right_node in zip(node.ops, node.comparators):
        right = _eval(right_node, config)
        if not _COMPARE[type(op)](left, right):
            return False
        left = right
    return True


def failed_constraint(constraints: tuple[str, ...], config: dict[str, dict[str, Any]]) -> str | None:
    """Why the point with the full (defaults filled) ``config`` is excluded, or None if every constraint holds;
    :class:`InputError` naming a constraint that cannot be evaluated on it."""
    for expr in constraints:
        try:
            holds = _eval(parse_constraint(expr).body, config)
        except (ConstraintError, TypeError, ArithmeticError) as exc:
            raise InputError(f"constraint {show(expr)} cannot be evaluated ({exc}); a constraint must be true or "
                             f"false on every point of the sweep") from None
        if not holds:
            return f"constraint {expr} is false"
    return None
