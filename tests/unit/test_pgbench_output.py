"""parse_summary / parse_version against real pgbench output of PostgreSQL 14 to 18.

The recordings and how they were made: tests/data/pgbench/README.md.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.errors import ParseError
from pgdyno.pgbench.output import StatementLatency, Summary, parse_summary, parse_version

DATA = Path(__file__).parent.parent / "data" / "pgbench"
VERSIONS = (14, 15, 16, 17, 18)
FULL_VERSION = {14: "14.23", 15: "15.19", 16: "16.15", 17: "17.11", 18: "18.6"}

# Values copied by hand from the recorded files: (tps, transactions processed).
TPS = {
    "tpcb_r": {
        14: (1755.848382, 5266),
        15: (1628.632478, 4888),
        16: (1634.417954, 4901),
        17: (1866.706792, 5595),
        18: (1814.188421, 5440),
    },
    "rate": {
        14: (203.620370, 610),
        15: (212.999607, 636),
        16: (190.135795, 569),
        17: (211.060294, 632),
        18: (200.611160, 598),
    },
    "select_prepared": {
        14: (39940.628525, 79812),
        15: (33982.487258, 67900),
        16: (33824.836580, 67507),
        17: (33783.601216, 67517),
        18: (36633.508216, 72939),
    },
    "weights": {
        14: (5362.987717, 10701),
        15: (7368.417368, 14735),
        16: (7176.282050, 14325),
        17: (6889.908317, 13747),
        18: (7288.688176, 14545),
    },
    "custom": {
        14: (5301.869169, 10592),
        15: (7637.954442, 15235),
        16: (7349.658224, 14667),
        17: (8216.674678, 16411),
        18: (7634.987480, 15240),
    },
}
# tpcb_r.stdout: (latency average ms, initial connection time ms)
TPCB_LATENCY = {
    14: (1.139, 3.891),
    15: (1.228, 5.888),
    16: (1.224, 3.896),
    17: (1.071, 3.902),
    18: (1.102, 4.249),
}
# rate.stdout: (latency average, latency stddev, lag avg, lag max, late transactions)
RATE = {
    14: (0.422, 0.228, 0.161, 2.377, 0),
    15: (0.344, 0.138, 0.127, 0.501, 0),
    16: (0.385, 0.194, 0.142, 2.204, 0),
    17: (0.389, 0.186, 0.143, 1.307, 0),
    18: (0.405, 0.280, 0.152, 1.836, 1),
}
# weights.stdout: per script (transactions, tps)
WEIGHTS = {
    14: ((8021, 4019.860245), (2680, 1343.127472)),
    15: ((11083, 5542.190003), (3652, 1826.227365)),
    16: ((10791, 5405.881996), (3534, 1770.400053)),
    17: ((10323, 5173.821456), (3424, 1716.086861)),
    18: ((10930, 5477.164783), (3615, 1811.523393)),
}

TPCB_SCRIPT = (
    r"\set aid random(1, 100000 * :scale)",
    r"\set bid random(1, 1 * :scale)",
    r"\set tid random(1, 10 * :scale)",
    r"\set delta random(-5000, 5000)",
    "BEGIN;",
    "UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = :aid;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;",
    "UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime)"
    " VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);",
    "END;",
)
SELECT_ONLY_SCRIPT = TPCB_SCRIPT[0], TPCB_SCRIPT[6]
SIMPLE_UPDATE_SCRIPT = TPCB_SCRIPT[:7] + TPCB_SCRIPT[9:]

versions = pytest.mark.parametrize("version", VERSIONS)


def read(version: int, name: str) -> str:
    return (DATA / f"pg{version}" / name).read_text()


def summary(version: int, run: str) -> Summary:
    return parse_summary(read(version, f"{run}.stdout"))


def commands(s: Summary, script: int) -> tuple[str, ...]:
    return tuple(st.command for st in s.statements if st.script == script)


@versions
def test_version(version: int) -> None:
    assert parse_version(read(version, "version.txt")) == FULL_VERSION[version]
    # and the banner on stdout names the same version
    assert read(version, "tpcb_r.stdout").startswith(f"pgbench ({FULL_VERSION[version]})\n")


@versions
@pytest.mark.parametrize("run", sorted(TPS))
def test_tps_and_transactions(version: int, run: str) -> None:
    s = summary(version, run)
    assert (s.tps, s.transactions) == TPS[run][version]
    assert s.failed_transactions == 0
    assert s.maximum_tries == (None if version == 14 else 1)


@versions
def test_tpcb_with_statement_report(version: int) -> None:
    s = summary(version, "tpcb_r")
    assert s.transaction_type == "<builtin: TPC-B (sort of)>"
    assert (s.scaling_factor, s.query_mode, s.clients, s.threads) == (2, "simple", 2, 2)
    assert s.duration_s == 3.0
    assert (s.latency_avg_ms, s.initial_connection_time_ms) == TPCB_LATENCY[version]
    assert s.latency_stddev_ms is None  # printed only under -R / -L / -P
    assert (s.rate_lag_avg_ms, s.rate_lag_max_ms) == (None, None)
    assert (s.skipped_transactions, s.late_transactions) == (None, None)
    assert s.scripts == ()

    assert commands(s, 0) == TPCB_SCRIPT
    assert [st.line for st in s.statements] == list(range(1, len(TPCB_SCRIPT) + 1))
    failures = None if version == 14 else 0
    assert all(st.failures == failures and st.retries is None for st in s.statements)
    assert all(st.latency_ms >= 0 for st in s.statements)


@pytest.mark.parametrize(
    ("version", "line", "expected"),
    [
        (14, 6, StatementLatency(0, 6, 0.152, None, None, TPCB_SCRIPT[5])),
        (15, 6, StatementLatency(0, 6, 0.168, 0, None, TPCB_SCRIPT[5])),
        (18, 11, StatementLatency(0, 11, 0.297, 0, None, "END;")),
    ],
)
def test_statement_line_values(version: int, line: int, expected: StatementLatency) -> None:
    s = summary(version, "tpcb_r")
    assert s.statements[line - 1] == expected


@versions
def test_prepared_select_only(version: int) -> None:
    s = summary(version, "select_prepared")
    assert s.transaction_type == "<builtin: select only>"
    assert (s.query_mode, s.clients, s.threads, s.duration_s) == ("prepared", 2, 1, 2.0)
    assert s.statements == ()
    assert s.scripts == ()


@versions
def test_rate_and_latency_limit(version: int) -> None:
    s = summary(version, "rate")
    avg, stddev, lag_avg, lag_max, late = RATE[version]
    assert (s.latency_avg_ms, s.latency_stddev_ms) == (avg, stddev)
    assert (s.rate_lag_avg_ms, s.rate_lag_max_ms) == (lag_avg, lag_max)
    assert s.skipped_transactions == 0
    assert s.late_transactions == late


@versions
def test_weighted_builtin_scripts(version: int) -> None:
    s = summary(version, "weights")
    assert s.transaction_type == "multiple scripts"
    assert [(sc.index, sc.name, sc.weight) for sc in s.scripts] == [
        (0, "<builtin: select only>", 3),
        (1, "<builtin: simple update>", 1),
    ]
    assert tuple((sc.transactions, sc.tps) for sc in s.scripts) == WEIGHTS[version]
    assert sum(sc.transactions or 0 for sc in s.scripts) == s.transactions
    assert all(sc.latency_avg_ms is not None and sc.latency_avg_ms > 0 for sc in s.scripts)
    assert commands(s, 0) == SELECT_ONLY_SCRIPT
    assert commands(s, 1) == SIMPLE_UPDATE_SCRIPT
    assert [st.line for st in s.statements if st.script == 1] == list(range(1, 10))


@versions
def test_custom_script_file(version: int) -> None:
    s = summary(version, "custom")
    script_lines = tuple(
        line for line in (DATA / "scripts" / "custom.sql").read_text().splitlines() if line
    )
    assert [(sc.name, sc.weight) for sc in s.scripts] == [
        ("custom.sql", 2),
        ("<builtin: select only>", 1),
    ]
    assert commands(s, 0) == script_lines
    assert commands(s, 1) == SELECT_ONLY_SCRIPT
    assert sum(sc.transactions or 0 for sc in s.scripts) == s.transactions
    failures = None if version == 14 else 0
    assert {st.failures for st in s.statements} == {failures}


@pytest.mark.parametrize("version", [v for v in VERSIONS if v >= 15])
def test_max_tries_prints_retries_column(version: int) -> None:
    s = summary(version, "retries")
    assert s.maximum_tries == 3
    assert commands(s, 0) == TPCB_SCRIPT
    assert all(st.failures == 0 and st.retries == 0 for st in s.statements)


# scripts.stdout (tests/data/pgbench/README.md, "Several scripts"), copied by hand: the whole
# run's and each script's (successful, failed, serialization failures, retried, retries)
RETRIES = {
    15: ((4000, 0, 0, 182, 363), [(1809, 0, 0, 0, 0), (1690, 0, 0, 0, 0), (163, 0, 0, 4, 4),
                                  (338, 0, 0, 178, 359)]),
    18: ((3999, 1, 1, 161, 302), [(1802, 0, 0, 0, 0), (1729, 0, 0, 0, 0), (169, 0, 0, 13, 14),
                                  (299, 1, 1, 148, 288)]),
}  # fmt: skip


@pytest.mark.parametrize("version", [14, 15, 18])
def test_failures_and_retries_per_script(version: int) -> None:
    s = summary(version, "scripts")
    assert [sc.name for sc in s.scripts][2:] == ["<builtin: TPC-B (sort of)>", "hot_row.sql"]
    if version == 14:  # no --max-tries, no failure counts
        assert (s.maximum_tries, s.retries, s.retried_transactions) == (None, None, None)
        assert all(sc.failed_transactions is None and sc.retries is None for sc in s.scripts)
        return
    run, scripts = RETRIES[version]
    assert s.maximum_tries == 10 and s.deadlock_failures == 0
    got = (s.transactions, s.failed_transactions, s.serialization_failures)
    assert (*got, s.retried_transactions, s.retries) == run
    for sc, want in zip(s.scripts, scripts, strict=True):
        assert sc.deadlock_failures == 0
        assert (sc.transactions, sc.failed_transactions, sc.serialization_failures,
                sc.retried_transactions, sc.retries) == want  # fmt: skip
    assert sum(sc.retries or 0 for sc in s.scripts) == s.retries
    if version == 18:  # "latency average = 1.923 ms (including failures)"
        assert s.latency_avg_ms == 1.923 and s.scripts[3].latency_avg_ms == 7.484


@versions
def test_aborted_run_has_no_tps_line(version: int) -> None:
    assert read(version, "failure.exitcode").strip() == "2"
    assert "aborted" in read(version, "failure.stderr")
    with pytest.raises(ParseError, match="tps"):
        summary(version, "failure")


@versions
@pytest.mark.parametrize("name", ["init.txt", "init_client.txt", "txlog.log", "version.txt"])
def test_other_output_is_not_a_summary(version: int, name: str) -> None:
    with pytest.raises(ParseError):
        parse_summary(read(version, name))


@pytest.mark.parametrize(
    "text",
    [
        "",
        "hello\nworld\n",
        "tps = 12.5 (without initial connection time)\n",  # no transaction count
        "number of transactions actually processed: 5\ntps = fast\n",
        "number of transactions actually processed: many\ntps = 1.0\n",
        "number of transactions actually processed: 5\nlatency average = ? ms\ntps = 1.0\n",
        "number of transactions actually processed: 5\nduration: 3 minutes\ntps = 1.0\n",
    ],
)
def test_garbage_raises(text: str) -> None:
    with pytest.raises(ParseError):
        parse_summary(text)


@pytest.mark.parametrize("text", ["", "psql (PostgreSQL) 16.1", "pgbench (PostgreSQL)", "18.1"])
def test_version_garbage_raises(text: str) -> None:
    with pytest.raises(ParseError):
        parse_version(text)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("pgbench (PostgreSQL) 18.1", "18.1"),
        ("pgbench (PostgreSQL) 17devel\n", "17devel"),
        ("pgbench (PostgreSQL) 18beta2", "18beta2"),
        ("pgbench (PostgreSQL) 16.4 (Debian 16.4-1.pgdg120+2)", "16.4"),
    ],
)
def test_version_forms(text: str, expected: str) -> None:
    assert parse_version(text) == expected


def test_before_14_takes_tps_excluding_connections() -> None:
    text = (
        "number of transactions actually processed: 10000/10000\n"
        "tps = 85.184871 (including connections establishing)\n"
        "tps = 85.296346 (excluding connections establishing)\n"
    )
    s = parse_summary(text)
    assert (s.tps, s.transactions, s.duration_s) == (85.296346, 10000, None)


def test_stderr_mixed_in_and_crlf_are_tolerated() -> None:
    text = read(18, "tpcb_r.stdout").replace("\n", "\r\n")
    s = parse_summary("starting vacuum...end.\r\n" + text)
    assert s == summary(18, "tpcb_r")
