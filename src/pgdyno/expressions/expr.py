"""The small expression language of the doctor's rules.

A rule's condition, current and recommended values are Python-like expressions over the facts
of a snapshot: `host.thp_enabled == 'always'`, `pg.shared_buffers < host.memory_bytes / 8`.
Only what a rule needs is allowed: literals, names, attribute access on facts, arithmetic,
comparisons, `and`/`or`/`not`, conditional expressions, tuples, and calls of the functions
in FUNCTIONS. Anything else is refused when the rules are loaded, so a rule file cannot run
code.

A fact that a snapshot lacks (absent or null) is *unknown*. Logic follows Kleene's three
values: `False and unknown` is False, `True or unknown` is True, anything else that touches an
unknown fact is unknown, and the rule is reported as not checked, naming the fact.
"""

from __future__ import annotations

import ast
import math
import operator
import tomllib
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

KiB, MiB, GiB, TiB = 1024, 1024**2, 1024**3, 1024**4


class Unknown(Exception):
    """A fact the snapshot does not have."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class ExprError(ValueError):
    """An expression outside the language, or one that cannot be evaluated."""


class Facts:
    """A mapping seen through attribute access; absent and null entries are unknown.

    `read`, when given, collects the keys an expression asked for and found (the audit uses it
    to tell which facts a rule rested on).
    """

    def __init__(self, name: str, values: Mapping[str, Any], read: set[str] | None = None) -> None:
        self._name = name
        self._values = values
        self._read = read

    def watched(self, read: set[str]) -> Facts:
        """The same facts, noting in `read` every key found through them."""
        return Facts(self._name, self._values, read)

    def get(self, key: str) -> Any:
        value = self._values.get(key)
        if value is None:
            raise Unknown(f"{self._name}.{key}")
        if self._read is not None:
            self._read.add(key)
        if isinstance(value, Mapping):
            return Facts(f"{self._name}.{key}", value)
        return tuple(value) if isinstance(value, list) else value

    def __repr__(self) -> str:
        return f"Facts({self._name})"


def pg_size(value: float) -> str:
    """Bytes as a PostgreSQL setting value, in the largest unit that keeps it whole.

    >>> pg_size(6 * GiB), pg_size(1536 * MiB), pg_size(8192), pg_size(1000)
    ('6GB', '1536MB', '8kB', '1000B')
    """
    number = int(value)
    for unit, size in (("TB", TiB), ("GB", GiB), ("MB", MiB), ("kB", KiB)):
        if number and number % size == 0:
            return f"{number // size}{unit}"
    return f"{number}B"


def size(value: float) -> str:
    """Bytes for a reader, one decimal where it helps.

    >>> size(25276502016), size(512 * MiB), size(0)
    ('23.5 GiB', '512 MiB', '0 B')
    """
    for unit, scale in (("TiB", TiB), ("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if abs(value) >= scale:
            shown = value / scale
            return f"{shown:.0f} {unit}" if shown == int(shown) else f"{shown:.1f} {unit}"
    return f"{int(value)} B"


def round_down_pow2(value: float) -> int:
    """The largest power of two not above `value` (sizes people recognise: 4GB, not 5.9GB).

    >>> round_down_pow2(6 * GiB) == 4 * GiB, round_down_pow2(1)
    (True, 1)
    """
    return 1 << max(0, int(value).bit_length() - 1)


def memory_step(value: float) -> int:
    """Bytes of memory rounded down as tune writes memory settings: to 128MB from 1GB up, to
    1MB below. The doctor's recommendations round the same way, so both give one value.

    >>> pg_size(memory_step(25276502016 // 4)), pg_size(memory_step(700 * MiB + 5))
    ('6016MB', '700MB')
    """
    number = int(value)
    step = 128 * MiB if number >= GiB else MiB
    return number // step * step


def option(options: str, name: str) -> bool:
    """Whether a comma-separated mount option list holds `name` (alone or as `name=...`).

    >>> option("rw,noatime,barrier=0", "barrier"), option("rw,relatime", "atime")
    (True, False)
    """
    return any(item == name or item.startswith(name + "=") for item in options.split(","))


FUNCTIONS: Mapping[str, Callable[..., Any]] = {
    "min": min, "max": max, "abs": abs, "round": round, "int": int, "len": len, "str": str,
    "ceil": math.ceil, "floor": math.floor, "pg_size": pg_size, "size": size,
    "round_down_pow2": round_down_pow2, "option": option, "memory_step": memory_step,
}  # fmt: skip


def _cost_constants() -> dict[str, Any]:
    """The named costs of data/memory.toml (BACKEND_BYTES: a connection's own memory)."""
    text = (resources.files("pgdyno") / "data" / "memory.toml").read_text(encoding="utf-8")
    return {str(c["name"]): c["value"] for c in tomllib.loads(text).get("constant", [])}


CONSTANTS: Mapping[str, Any] = {
    "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB, **_cost_constants(),
}  # fmt: skip
# A connection's own memory before any work_mem (data/memory.toml, with its source).
BACKEND_BYTES: int = int(CONSTANTS["BACKEND_BYTES"])
SPECIAL = ("known",)  # known(x): True when x can be evaluated; never unknown itself

_BINARY: Mapping[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
}  # fmt: skip
_COMPARE: Mapping[type[ast.cmpop], Callable[[Any, Any], bool]] = {
    ast.Eq: operator.eq, ast.NotEq: operator.ne, ast.Lt: operator.lt, ast.LtE: operator.le,
    ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.In: lambda a, b: a in b, ast.NotIn: lambda a, b: a not in b,
}  # fmt: skip


def parse(text: str, names: frozenset[str]) -> ast.expr:
    """Parse and vet an expression; `names` are the fact namespaces and named values it may use.

    >>> parse("host.x > 1", frozenset({"host"})).__class__.__name__
    'Compare'
    >>> parse("__import__('os')", frozenset())
    Traceback (most recent call last):
    ...
    pgdyno.expressions.expr.ExprError: unknown function '__import__'
    """
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ExprError(f"not an expression ({exc.msg})") from None
    for node in ast.walk(tree):
        _vet(node, names)
    return tree


def _vet(node: ast.AST, names: frozenset[str]) -> None:
    allowed = (
        ast.Constant, ast.Name, ast.Attribute, ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare,
        ast.IfExp, ast.Tuple, ast.Call, ast.Load, ast.And, ast.Or, ast.Not, ast.USub,
        *_BINARY, *_COMPARE,
    )  # fmt: skip
    if not isinstance(node, allowed):
        raise ExprError(f"{type(node).__name__} is not allowed in a rule expression")
    if isinstance(node, ast.Name) and node.id not in {*names, *FUNCTIONS, *CONSTANTS, *SPECIAL}:
        raise ExprError(f"unknown name {node.id!r}")
    if isinstance(node, ast.Attribute) and node.attr.startswith("_"):
        raise ExprError(f"attribute {node.attr!r} is not allowed")
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.keywords:
            raise ExprError("only plain calls of the listed functions are allowed")
        if node.func.id not in FUNCTIONS and node.func.id not in SPECIAL:
            raise ExprError(f"unknown function {node.func.id!r}")


def evaluate(node: ast.expr, scope: Mapping[str, Any]) -> Any:
    """The value of a vetted expression; raises Unknown when it rests on a missing fact.

    >>> host = Facts("host", {"a": 3, "b": None})
    >>> evaluate(parse("host.a > 2 or host.b > 1", frozenset({"host"})), {"host": host})
    True
    >>> evaluate(parse("host.a > 5 and host.b > 1", frozenset({"host"})), {"host": host})
    False
    >>> evaluate(parse("host.b > 1", frozenset({"host"})), {"host": host})
    Traceback (most recent call last):
    ...
    pgdyno.expressions.expr.Unknown: host.b
    """
    evaluator = _EVALUATORS.get(type(node))
    if evaluator is None:
        raise _cannot(node)  # pragma: no cover - vetted
    return evaluator(node, scope)


def _cannot(node: ast.expr) -> ExprError:
    return ExprError(f"cannot evaluate {ast.unparse(node)!r}")


def _constant(node: ast.Constant, _scope: Mapping[str, Any]) -> Any:
    return node.value


def _name(node: ast.Name, scope: Mapping[str, Any]) -> Any:
    if node.id in scope:
        return scope[node.id]
    if node.id in CONSTANTS:
        return CONSTANTS[node.id]
    raise ExprError(f"unknown name {node.id!r}")


def _attribute(node: ast.Attribute, scope: Mapping[str, Any]) -> Any:
    base = evaluate(node.value, scope)
    if not isinstance(base, Facts):
        raise ExprError(f"{node.attr!r} is asked of a value, not of facts")
    return base.get(node.attr)


def _tuple(node: ast.Tuple, scope: Mapping[str, Any]) -> Any:
    return tuple(evaluate(item, scope) for item in node.elts)


def _unary(node: ast.UnaryOp, scope: Mapping[str, Any]) -> Any:
    if isinstance(node.op, ast.Not):
        return not evaluate(node.operand, scope)
    if isinstance(node.op, ast.USub):
        return -evaluate(node.operand, scope)
    raise _cannot(node)  # pragma: no cover - vetted


def _binary(node: ast.BinOp, scope: Mapping[str, Any]) -> Any:
    a, b = evaluate(node.left, scope), evaluate(node.right, scope)
    # Numbers only, and text joined by +: 'x' * 10**11 from a snapshot holding text
    # where a number belongs must be an error, not 100 GB of memory.
    if not (_number(a) and _number(b)) and not (
        isinstance(node.op, ast.Add) and isinstance(a, str) and isinstance(b, str)
    ):
        raise ExprError(f"cannot compute with {a!r} and {b!r}")
    return _apply(_BINARY[type(node.op)], a, b)


def _compare(node: ast.Compare, scope: Mapping[str, Any]) -> Any:
    value = evaluate(node.left, scope)
    for cmp, right in zip(node.ops, node.comparators, strict=True):
        other = evaluate(right, scope)
        if not _apply(_COMPARE[type(cmp)], value, other):
            return False
        value = other
    return True


def _bool_op(node: ast.BoolOp, scope: Mapping[str, Any]) -> Any:
    return _kleene(isinstance(node.op, ast.And), node.values, scope)


def _if_exp(node: ast.IfExp, scope: Mapping[str, Any]) -> Any:
    return evaluate(node.body if evaluate(node.test, scope) else node.orelse, scope)


def _call(node: ast.Call, scope: Mapping[str, Any]) -> Any:
    if not isinstance(node.func, ast.Name):
        raise _cannot(node)  # pragma: no cover - vetted
    if node.func.id == "known":
        return _known(node.args, scope)
    return _apply(FUNCTIONS[node.func.id], *(evaluate(arg, scope) for arg in node.args))


def _known(args: list[ast.expr], scope: Mapping[str, Any]) -> bool:
    try:
        for arg in args:
            evaluate(arg, scope)
    except Unknown:
        return False
    return True


_EVALUATORS: Mapping[type[ast.expr], Callable[[Any, Mapping[str, Any]], Any]] = {
    ast.Constant: _constant, ast.Name: _name, ast.Attribute: _attribute, ast.Tuple: _tuple,
    ast.UnaryOp: _unary, ast.BinOp: _binary, ast.Compare: _compare, ast.BoolOp: _bool_op,
    ast.IfExp: _if_exp, ast.Call: _call,
}  # fmt: skip


def _kleene(is_and: bool, values: list[ast.expr], scope: Mapping[str, Any]) -> Any:
    """`and` stops at the first false operand, `or` at the first true one, wherever an unknown
    sits; only when none decides does an unknown operand make the whole unknown."""
    unknown: Unknown | None = None
    result: Any = is_and
    for value in values:
        try:
            result = evaluate(value, scope)
        except Unknown as exc:
            unknown = unknown or exc
            continue
        if bool(result) != is_and:
            return result
    if unknown is not None:
        raise unknown
    return result


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _apply(func: Callable[..., Any], *args: Any) -> Any:
    try:
        return func(*args)
    except (TypeError, ValueError, ZeroDivisionError) as exc:
        raise ExprError(str(exc)) from None
