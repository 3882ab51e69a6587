"""The rule expression language: what it evaluates, what it refuses, three-valued logic."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgdyno.expressions.expr import ExprError, Facts, Unknown, evaluate, parse, pg_size
from pgdyno.postgres.settings import setting_value

NAMES = frozenset({"host", "pg"})


def run(text: str, **facts: dict[str, object]) -> object:
    scope = {name: Facts(name, values) for name, values in facts.items()}
    return evaluate(parse(text, NAMES), scope)


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('true')",
        "host.__class__",
        "host._values",
        "open('/etc/passwd')",
        "[x for x in host]",
        "lambda: 1",
        "host.a if host.b else (yield)",
        "pg.x[0]",
        "{'a': 1}",
        "min(key=host.a)",
        "host.a.upper()",
        "other.a",
        "1 ** 1000",
        "1 << 60",
    ],
)
def test_refuses_what_is_not_the_language(text: str) -> None:
    with pytest.raises(ExprError):
        parse(text, NAMES)


def test_arithmetic_comparisons_and_functions() -> None:
    facts = {"host": {"memory_bytes": 24 * 1024**3, "kernel_version": [3, 2, 0]}}
    assert run("pg_size(host.memory_bytes // 4 // GiB * GiB)", **facts) == "6GB"
    assert run("host.kernel_version >= (3, 2) and host.kernel_version < (3, 3)", **facts) is True
    assert run("1 < 2 < 3 and not 3 < 2", **facts) is True
    assert run("'a' if host.memory_bytes > GiB else 'b'", **facts) == "a"
    assert run("max(1, 2, 3) + ceil(0.2) - abs(-1)", **facts) == 3


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("host.missing > 1 and host.zero == 1", False),  # false and unknown: false
        ("host.zero == 1 and host.missing > 1", False),
        ("host.missing > 1 or host.zero == 0", True),  # unknown or true: true
        ("known(host.missing)", False),
        ("known(host.zero)", True),
        ("host.missing if host.zero == 1 else 5", 5),  # the branch not taken is not evaluated
    ],
)
def test_kleene_logic(text: str, expected: object) -> None:
    assert run(text, host={"zero": 0, "missing": None}) == expected


@pytest.mark.parametrize(
    "text", ["host.missing > 1", "host.missing > 1 and host.zero == 0", "not host.missing"]
)
def test_unknown_names_the_fact(text: str) -> None:
    with pytest.raises(Unknown) as caught:
        run(text, host={"zero": 0, "missing": None})
    assert caught.value.name == "host.missing"


def test_nested_facts_and_type_errors() -> None:
    facts = {"host": {"checkpoints": {"timed": 3, "requested": 9}}}
    assert run("host.checkpoints.requested > host.checkpoints.timed", **facts) is True
    with pytest.raises(ExprError):
        run("host.checkpoints.timed + 'x'", **facts)
    with pytest.raises(ExprError):
        run("host.checkpoints.timed / 0", **facts)
    with pytest.raises(ExprError):  # text where a number belongs: never a huge string
        run("host.size * host.ratio", host={"size": 10**12, "ratio": "twenty"})
    assert run("'a' + 'b'", host={}) == "ab"


@given(st.integers(min_value=0, max_value=2**50))
def test_pg_size_is_a_value_postgresql_reads_back(number: int) -> None:
    text = pg_size(number)
    unit = text.lstrip("0123456789")
    row = {"setting": text[: len(text) - len(unit)], "unit": unit, "vartype": "integer"}
    assert setting_value(row) == number
