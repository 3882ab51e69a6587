"""Parse what pgbench prints on stdout at the end of a run (PostgreSQL 14 to 18).

The summary is a block of ``key: value`` / ``key = value`` lines, optionally followed by
per-statement latencies (``-r``) and, when more than one script ran, one section per script.
Formats differ between major versions; the differences handled here:

* 15+ print ``maximum number of tries``, ``number of failed transactions`` and, with ``-r``,
  a failures column (plus a retries column when ``--max-tries`` is not 1) before each
  statement; 14 prints neither.
* 14 prints percentages as ``(0.000 %)``, 15+ as ``(0.000%)``; 15 to 17 print ``(NaN%)``
  when no transaction completed.
* 15+ print per-script failure and retry counts, and 18 ends ``latency average = x ms`` with
  `` (including failures)`` when some transactions failed.
* 18 splits a script's ``- N transactions (x% of total, tps = y)`` line in two:
  ``- N transactions (x% of total)`` and ``- number of transactions actually processed: N
  (tps = y)``, and puts one space instead of two before each statement's text.
* Before 14, two ``tps =`` lines were printed (including / excluding connection time); the
  one excluding it is taken.

Lines that are not recognised (the ``pgbench (18.1)`` banner, stderr lines such as
``starting vacuum...end.`` if both streams were captured together) are ignored; a
recognised line whose value cannot be read raises :class:`~pgdyno.errors.ParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from pgdyno.errors import ParseError
from pgdyno.records import ScriptSummary, StatementLatency, Summary

# The records live in the bottom layer (records/pgbench.py); they stay importable from here.
__all__ = [
    "ScriptSummary",
    "StatementLatency",
    "Summary",
    "parse_summary",
    "parse_version",
]


_NUM = r"-?[0-9]+(?:\.[0-9]+)?"
_INT = r"[0-9]+"
_PCT = r"\([^()]*%\)"  # "(0.000%)", "(0.000 %)", "(NaN%)": the percentage is not kept
_STATEMENT_HEADER = re.compile(
    r"^(?: - )?statement latencies in milliseconds(?P<cols>| and failures|, failures and retries):$"
)
_SCRIPT_HEADER = re.compile(rf"^SQL script (?P<n>{_INT}): (?P<name>.*)$")
_VERSION = re.compile(r"^pgbench \(PostgreSQL\) (?P<v>[0-9]+(?:\.[0-9]+)*[A-Za-z0-9]*)(?:\s.*)?$")


def _statement_line(extra_columns: int) -> re.Pattern[str]:
    counts = r"\s+([0-9]+)" * extra_columns
    return re.compile(rf"^\s+({_NUM}){counts}\s+(\S.*?)\s*$")


_STATEMENT_LINES = {n: _statement_line(n) for n in (0, 1, 2)}
_STATEMENT_COLUMNS = {"": 0, " and failures": 1, ", failures and retries": 2}


class _Builder:
    """Mutable state while reading one summary; frozen into a Summary at the end."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.tps: list[tuple[float, str]] = []
        self.lag: tuple[float, float] | None = None
        self.scripts: list[dict[str, str]] = []
        self.statements: list[StatementLatency] = []
        self.statement_count: dict[int, int] = {}  # script index -> statements read so far


# "<line>: N (x%)" lines of 15+, in the summary and in each script's section
_COUNTED_LINES = {
    "number of serialization failures": "serialization_failures",
    "number of deadlock failures": "deadlock_failures",
    "number of transactions retried": "retried_transactions",
}

# (prefix that identifies the line, full pattern, key under which group 1 is stored)
_TOP_LINES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
    (prefix, re.compile(pattern), key)
    for prefix, pattern, key in (
        ("transaction type:", r"^transaction type: (.+)$", "transaction_type"),
        ("scaling factor:", rf"^scaling factor: ({_INT})$", "scaling_factor"),
        ("query mode:", r"^query mode: (\S+)$", "query_mode"),
        ("number of clients:", rf"^number of clients: ({_INT})$", "clients"),
        ("number of threads:", rf"^number of threads: ({_INT})$", "threads"),
        ("maximum number of tries:", rf"^maximum number of tries: ({_INT})$", "maximum_tries"),
        ("duration:", rf"^duration: ({_NUM}) s$", "duration_s"),
        (
            "number of transactions actually processed:",
            rf"^number of transactions actually processed: ({_INT})(?:/{_INT})?$",
            "transactions",
        ),
        (
            "number of failed transactions:",
            rf"^number of failed transactions: ({_INT}) {_PCT}$",
            "failed_transactions",
        ),
        (
            "number of transactions skipped:",
            rf"^number of transactions skipped: ({_INT}) {_PCT}$",
            "skipped_transactions",
        ),
        (
            "number of transactions above the",
            rf"^number of transactions above the {_NUM} ms latency limit: ({_INT})/{_INT} {_PCT}$",
            "late_transactions",
        ),
        *((f"{line}:", rf"^{line}: ({_INT}) {_PCT}$", key) for line, key in _COUNTED_LINES.items()),
        ("total number of retries:", rf"^total number of retries: ({_INT})$", "retries"),
        (
            "latency average",
            rf"^latency average\s*[=:]\s*({_NUM}) ms(?: \(including failures\))?$",
            "latency_avg_ms",
        ),
        ("latency stddev", rf"^latency stddev\s*[=:]\s*({_NUM}) ms$", "latency_stddev_ms"),
        (
            "initial connection time",
            rf"^initial connection time = ({_NUM}) ms$",
            "initial_connection_time_ms",
        ),
    )
)
_TPS = re.compile(rf"^tps = ({_NUM})(?: \((.*)\))?$")
_LAG = re.compile(rf"^rate limit schedule lag: avg ({_NUM}) \(max ({_NUM})\) ms$")

# lines inside a "SQL script N" section
_Pick = Callable[[re.Match[str]], dict[str, str]]


def _pick_group_1(key: str) -> _Pick:
    return lambda m: {key: m[1]}


_SCRIPT_LINES: tuple[tuple[str, re.Pattern[str], _Pick], ...] = (
    (
        " - weight:",
        re.compile(rf"^ - weight: ({_INT})(?: \(.*\))?$"),
        lambda m: {"weight": m[1]},
    ),
    (
        " - number of transactions actually processed:",
        re.compile(rf"^ - number of transactions actually processed: ({_INT}) \(tps = ({_NUM})\)$"),
        lambda m: {"transactions": m[1], "tps": m[2]},
    ),
    (
        " - latency average",
        re.compile(rf"^ - latency average\s*[=:]\s*({_NUM}) ms$"),
        lambda m: {"latency_avg_ms": m[1]},
    ),
    (
        " - total number of retries:",
        re.compile(rf"^ - total number of retries: ({_INT})$"),
        lambda m: {"retries": m[1]},
    ),
    *(
        (f" - {line}:", re.compile(rf"^ - {line}: ({_INT}) {_PCT}$"), _pick_group_1(key))
        for line, key in {
            "number of failed transactions": "failed_transactions",
            **_COUNTED_LINES,
        }.items()
    ),
)
_SCRIPT_TRANSACTIONS = re.compile(
    rf"^ - ({_INT}) transactions \({_NUM}% of total(?:, tps = ({_NUM}))?\)$"
)


_SCRIPT_COUNTS = ("failed_transactions", *_COUNTED_LINES.values(), "retries")


def _fail(line_no: int, line: str, what: str) -> ParseError:
    return ParseError(f"pgbench output line {line_no} has an unreadable {what}: {line.strip()!r}.")


def _read_script_line(b: _Builder, line_no: int, line: str) -> bool:
    """Read a `` - ...`` line of the current script section; False when not one."""
    if not b.scripts or not line.startswith(" - "):
        return False
    current = b.scripts[-1]
    m = _SCRIPT_TRANSACTIONS.match(line)
    if m:
        current["transactions"] = m[1]
        if m[2] is not None:
            current["tps"] = m[2]
        return True
    if re.match(rf"^ - {_INT} transactions ", line):
        raise _fail(line_no, line, "script transaction count")
    for prefix, pattern, pick in _SCRIPT_LINES:
        if line.startswith(prefix):
            m = pattern.match(line)
            if m is None:
                raise _fail(line_no, line, prefix.removeprefix(" - ").rstrip(":"))
            current.update(pick(m))
            return True
    return True  # other per-script lines (stddev, skipped...) are not kept


def _read_top_line(b: _Builder, line_no: int, line: str) -> None:
    if line.startswith("tps ="):
        m = _TPS.match(line)
        if m is None:
            raise _fail(line_no, line, "tps")
        b.tps.append((float(m[1]), m[2] or ""))
        return
    if line.startswith("rate limit schedule lag:"):
        m = _LAG.match(line)
        if m is None:
            raise _fail(line_no, line, "schedule lag")
        b.lag = (float(m[1]), float(m[2]))
        return
    for prefix, pattern, key in _TOP_LINES:
        if line.startswith(prefix):
            m = pattern.match(line)
            if m is None:
                raise _fail(line_no, line, key.replace("_", " "))
            b.values[key] = m[1]
            return
    m = _SCRIPT_HEADER.match(line)
    if m:
        b.scripts.append({"index": str(int(m["n"]) - 1), "name": m["name"]})


def _opt_int(values: dict[str, str], key: str) -> int | None:
    raw = values.get(key)
    return None if raw is None else int(raw)


def _opt_float(values: dict[str, str], key: str) -> float | None:
    raw = values.get(key)
    return None if raw is None else float(raw)


def _pick_tps(candidates: list[tuple[float, str]]) -> float | None:
    """The tps without connection time: before 14 a second line included it."""
    for value, note in candidates:
        if not note.startswith("including connections"):
            return value
    return candidates[0][0] if candidates else None


def parse_summary(text: str) -> Summary:
    """Read the end-of-run report pgbench printed on stdout.

    >>> s = parse_summary("transaction type: <builtin: select only>\\n"
    ...                   "number of transactions actually processed: 10\\n"
    ...                   "tps = 5.000000 (without initial connection time)\\n")
    >>> (s.transaction_type, s.transactions, s.tps, s.failed_transactions)
    ('<builtin: select only>', 10, 5.0, 0)
    """
    b = _Builder()
    statement_pattern: re.Pattern[str] | None = None
    statement_columns = 0
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip()
        if statement_pattern is not None:
            m = statement_pattern.match(line)
            if m:
                script = int(b.scripts[-1]["index"]) if b.scripts else 0
                order = b.statement_count.get(script, 0) + 1
                b.statement_count[script] = order
                counts = [int(g) for g in m.groups()[1 : 1 + statement_columns]]
                b.statements.append(
                    StatementLatency(
                        script=script,
                        line=order,
                        latency_ms=float(m[1]),
                        failures=counts[0] if statement_columns >= 1 else None,
                        retries=counts[1] if statement_columns >= 2 else None,
                        command=m[statement_columns + 2],
                    )
                )
                continue
            statement_pattern = None
        header = _STATEMENT_HEADER.match(line)
        if header:
            statement_columns = _STATEMENT_COLUMNS[header["cols"]]
            statement_pattern = _STATEMENT_LINES[statement_columns]
            continue
        if _read_script_line(b, line_no, line):
            continue
        _read_top_line(b, line_no, line)

    tps = _pick_tps(b.tps)
    if tps is None:
        raise ParseError("pgbench printed no 'tps = ' line, so the run did not complete.")
    if "transactions" not in b.values:
        raise ParseError("pgbench output has no 'number of transactions actually processed' line.")
    v = b.values
    return Summary(
        transaction_type=v.get("transaction_type"),
        scaling_factor=_opt_int(v, "scaling_factor"),
        query_mode=v.get("query_mode"),
        clients=_opt_int(v, "clients"),
        threads=_opt_int(v, "threads"),
        duration_s=_opt_float(v, "duration_s"),
        transactions=int(v["transactions"]),
        failed_transactions=int(v.get("failed_transactions", "0")),
        latency_avg_ms=_opt_float(v, "latency_avg_ms"),
        latency_stddev_ms=_opt_float(v, "latency_stddev_ms"),
        initial_connection_time_ms=_opt_float(v, "initial_connection_time_ms"),
        tps=tps,
        rate_lag_avg_ms=None if b.lag is None else b.lag[0],
        rate_lag_max_ms=None if b.lag is None else b.lag[1],
        skipped_transactions=_opt_int(v, "skipped_transactions"),
        late_transactions=_opt_int(v, "late_transactions"),
        maximum_tries=_opt_int(v, "maximum_tries"),
        scripts=tuple(
            ScriptSummary(
                index=int(s["index"]),
                name=s["name"],
                weight=_opt_int(s, "weight"),
                transactions=_opt_int(s, "transactions"),
                tps=_opt_float(s, "tps"),
                latency_avg_ms=_opt_float(s, "latency_avg_ms"),
                **{key: _opt_int(s, key) for key in _SCRIPT_COUNTS},
            )
            for s in b.scripts
        ),
        statements=tuple(b.statements),
        **{key: _opt_int(v, key) for key in (*_COUNTED_LINES.values(), "retries")},
    )


def parse_version(text: str) -> str:
    """The version in the output of ``pgbench --version``.

    >>> parse_version("pgbench (PostgreSQL) 18.1\\n")
    '18.1'
    >>> parse_version("pgbench (PostgreSQL) 16.4 (Debian 16.4-1.pgdg120+2)")
    '16.4'
    """
    for raw in text.splitlines():
        m = _VERSION.match(raw.strip())
        if m:
            return m["v"]
    raise ParseError(f"'pgbench --version' printed no version: {text.strip()[:80]!r}.")
