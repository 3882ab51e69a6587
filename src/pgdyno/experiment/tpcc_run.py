"""What a TPC-C-like run measures beside pgbench: the server's counters before and after the
measured window, the consistency check after it, and the figures made of them.

NOPM comes from the server (`sum(district.d_next_o_id)`, pgdyno.tpcc.counters), TPM from
pg_stat_database for the benchmark database alone. Both are read right before the measured
pgbench starts and after its clients are gone: a backend's statistics reach pg_stat_database when
it flushes them (at the latest when it exits), so the second reading waits, briefly, until no
session is left in the benchmark database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from pgdyno.experiment.measure import Measured
from pgdyno.pgbench.command import Workload
from pgdyno.postgres.client import Client, connect
from pgdyno.postgres.footprint import BENCH_DB
from pgdyno.postgres.stats import client_sessions, database_xacts
from pgdyno.process import wait_until
from pgdyno.records import Sample
from pgdyno.records.pgbench import Summary
from pgdyno.records.tpcc import TpccOptions, TpccResult
from pgdyno.stats.tpcc_figures import ScriptFigures, tpcc_result
from pgdyno.tpcc import consistency
from pgdyno.tpcc.counters import new_orders

NOPM_METRIC = "tpcc.nopm"  # the per-second series (data/metrics.toml)
SESSIONS_GONE_WAIT_S = 10.0  # how long the after-reading waits for the clients' sessions to end


@dataclass(frozen=True)
class Counters:
    new_orders: int  # sum(d_next_o_id) over all districts
    xacts: int | None  # commits + rollbacks of the benchmark database; None: not readable


def read_counters(client: Client, bench_dsn: str, password: str | None, bench_db: str) -> Counters:
    """The counters now: `client` is pgdyno's own connection (pg_stat_database), the new-order
    counter is read in the benchmark database itself."""
    with connect(bench_dsn, password) as bench:
        orders = new_orders(bench)
    return Counters(orders, database_xacts(client, bench_db))


def wait_sessions_gone(client: Client, bench_db: str) -> bool:
    """Wait until no client session is left in the benchmark database (their statistics are
    then flushed); False when some are still there after SESSIONS_GONE_WAIT_S."""

    def gone() -> bool:
        return client_sessions(client, bench_db) == 0

    return wait_until(gone, SESSIONS_GONE_WAIT_S, tick=0.05)


def check_consistency(bench_dsn: str, password: str | None) -> str:
    """ "passed", or the consistency condition that failed (specification 3.3.2)."""
    with connect(bench_dsn, password) as bench:
        failed = consistency.check(bench)
    return "passed" if failed is None else failed


@dataclass(frozen=True)
class TpccWindow:
    """The measured window of a TPC-C-like run: its counters at both ends and its length."""

    warehouses: int
    options: TpccOptions
    before: Counters
    after: Counters
    seconds: float

    def result(
        self, scripts: Sequence[tuple[str, ScriptFigures]], consistency_found: str
    ) -> TpccResult:
        xacts = None
        if self.before.xacts is not None and self.after.xacts is not None:
            xacts = self.after.xacts - self.before.xacts
        found = tpcc_result(
            self.warehouses, self.seconds, self.after.new_orders - self.before.new_orders, xacts,
            scripts, consistency_found,
        )  # fmt: skip
        return replace(
            found, all_warehouses=self.options.all_warehouses,
            keying_thinking=self.options.keying_thinking,
        )  # fmt: skip


def window_seconds(options: TpccOptions, summary: Summary, duration_s: float) -> float:
    """The seconds NOPM and TPM are rates over: -T, or with keying and think times on, the time
    pgbench really ran. pgbench does not cut a \\sleep short at -T, and a client ends only once
    its script is done: one waiting out its keying time when -T comes still commits its
    transaction, up to 18 + 120 s later (its keying, then the longest think time). Counted over
    -T alone, those orders would push NOPM past the 12.86-per-warehouse ceiling.

    >>> from types import SimpleNamespace as S
    >>> keyed = TpccOptions(keying_thinking=True)
    >>> window_seconds(keyed, S(transactions=10, tps=0.4), 5.0)
    25.0
    >>> window_seconds(TpccOptions(), S(transactions=10, tps=0.4), 5.0)
    5.0
    >>> window_seconds(keyed, S(transactions=0, tps=0.0), 5.0)
    5.0
    """
    if not options.keying_thinking or summary.tps <= 0:
        return duration_s
    # pgbench's tps is over the time it ran (without connecting): transactions / tps is it.
    return max(duration_s, summary.transactions / summary.tps)


def nopm_samples(
    counts_by_second: Sequence[tuple[int, tuple[int, ...]]], orders_made: int
) -> list[Sample]:
    """Per second, NOPM: the new-order script's completions in that second times 60, scaled by
    the share of them that made an order (the server's count over the log's, which includes the
    1% rolled back by design, and only a sample of the lines under --sampling-rate), so that the
    seconds add up to the run's new orders."""
    counts = [(t, counts[0]) for t, counts in counts_by_second if counts]
    completed = sum(n for _, n in counts)
    if not completed:
        return []
    made_per_logged = orders_made / completed
    return [(t, NOPM_METRIC, 60.0 * n * made_per_logged) for t, n in counts]


class TpccMeter:
    """Reads a TPC-C-like run's counters around its measured window and makes its figures."""

    def __init__(
        self, client: Client, bench_dsn: str, password: str | None, log: Callable[[str], None]
    ) -> None:
        self.client = client
        self.bench_dsn = bench_dsn
        self.password = password
        self.log = log

    def before(self) -> Counters:
        return read_counters(self.client, self.bench_dsn, self.password, BENCH_DB)

    def figures(
        self, warehouses: int, workload: Workload, before: Counters, measured: Measured,
        seconds: float,
    ) -> Measured:  # fmt: skip
        """The run's figures once its clients are gone, with its consistency check."""
        if not wait_sessions_gone(self.client, BENCH_DB):
            self.log("TPM may miss the last transactions: pgbench's sessions were slow to end")
        after = read_counters(self.client, self.bench_dsn, self.password, BENCH_DB)
        found = check_consistency(self.bench_dsn, self.password)
        options = workload.tpcc or TpccOptions()
        window = TpccWindow(
            warehouses, options, before, after, window_seconds(options, measured.summary, seconds)
        )
        names = [s.name for s in workload.scripts]
        result = window.result(list(zip(names, measured.scripts, strict=True)), found)
        made = after.new_orders - before.new_orders
        samples = (*measured.samples, *nopm_samples(measured.script_counts, made))
        return replace(measured, tpcc=result, samples=samples)
