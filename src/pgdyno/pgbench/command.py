"""pgbench command lines, workloads and the jobs policy: pure functions, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgdyno.errors import UsageError
from pgdyno.records.tpcc import TpccOptions
from pgdyno.tpcc.scripts import TRANSACTIONS, write_scripts

BUILTINS = ("tpcb-like", "simple-update", "select-only")
TPCC = "tpcc"  # the TPC-C-like workload (pgdyno.tpcc): five scripts on its own dataset
WORKLOADS = (*BUILTINS, TPCC)
# pgbench retries a TPC-C transaction that failed on a serialization or deadlock error up to
# this many times (--max-tries, pgbench 15+), and counts the retries.
TPCC_MAX_TRIES = 10
READ_ONLY_BUILTINS = frozenset({"select-only"})
PROTOCOLS = ("simple", "extended", "prepared")
# pgbench -i steps: drop, tables, client-side generate, vacuum, primary keys. Client-side
# generation measured faster than server-side ("G") on these machines: benchmarks/dataset_prep.py.
INIT_STEPS = "dtgvp"


@dataclass(frozen=True)
class Script:
    """One pgbench script: a built-in (`-b name@w`) or a file (`-f path@w`)."""

    name: str
    weight: int = 1
    path: Path | None = None

    @property
    def option(self) -> list[str]:
        if self.path is not None:
            return ["-f", f"{self.path}@{self.weight}"]
        return ["-b", f"{self.name}@{self.weight}"]


@dataclass(frozen=True)
class Workload:
    """What the clients run: one or more weighted scripts.

    The TPC-C-like workload (`tpcc` set) has its five scripts rendered from templates into a
    directory before it runs (`with_scripts`); until then `scripts` only names them."""

    name: str
    scripts: tuple[Script, ...]
    tpcc: TpccOptions | None = None

    @property
    def may_write(self) -> bool:
        """False only when every script is a read-only built-in (custom files may write)."""
        if self.tpcc is not None:
            return True
        return not all(s.path is None and s.name in READ_ONLY_BUILTINS for s in self.scripts)

    @property
    def dataset(self) -> str:
        """The dataset the workload runs on: pgbench's (`pgbench -i`) or the TPC-C-like one."""
        return TPCC if self.tpcc is not None else "pgbench"

    @property
    def max_tries(self) -> int:
        return TPCC_MAX_TRIES if self.tpcc is not None else 1

    def with_scripts(self, directory: Path) -> Workload:
        """The TPC-C-like workload with its scripts written into `directory`; others as they
        are."""
        if self.tpcc is None:
            return self
        written = write_scripts(directory, self.tpcc)
        return Workload(self.name, tuple(Script(n, w, p) for n, w, p in written), self.tpcc)


def one_dataset(workloads: list[Workload]) -> None:
    """Refuse a matrix whose workloads need different datasets (the TPC-C-like one and
    pgbench's): a scale means warehouses for one and pgbench's scale for the other."""
    if len({w.dataset for w in workloads}) > 1:
        raise UsageError(
            "tpcc runs on a dataset of its own whose scale is warehouses, so it cannot share a "
            "matrix with pgbench's workloads: bench or plan them separately."
        )


def with_tpcc_options(workloads: list[Workload], options: TpccOptions) -> list[Workload]:
    """The workloads with the TPC-C-like one's options set; options asked for without it are
    refused (they would silently do nothing)."""
    if options != TpccOptions() and not any(w.tpcc is not None for w in workloads):
        raise UsageError(
            "--tpcc-all-warehouses and --tpcc-keying apply to the tpcc workload only: add "
            "-w tpcc or leave them out."
        )
    return [w if w.tpcc is None else Workload(w.name, w.scripts, options) for w in workloads]


def tpcc_workload(options: TpccOptions | None = None) -> Workload:
    """
    >>> w = tpcc_workload()
    >>> [(s.name, s.weight) for s in w.scripts][:2], w.may_write, w.dataset
    ([('new_order', 45), ('payment', 43)], True, 'tpcc')
    """
    return Workload(
        TPCC, tuple(Script(name, weight) for name, weight in TRANSACTIONS),
        options or TpccOptions(),
    )  # fmt: skip


def _split_weight(spec: str) -> tuple[str, int]:
    """
    >>> _split_weight("mix.sql@3")
    ('mix.sql', 3)
    >>> _split_weight("select-only")
    ('select-only', 1)
    """
    name, sep, weight = spec.rpartition("@")
    if not sep:
        return spec, 1
    if not weight.isdigit() or int(weight) < 1:
        raise UsageError(f"{spec!r} has a bad weight: write NAME@N with N a whole number >= 1.")
    return name, int(weight)


def builtin_workload(name: str) -> Workload:
    """
    >>> builtin_workload("select-only").may_write
    False
    >>> builtin_workload("tpcb").name  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: unknown workload 'tpcb': choose from tpcb-like, ...
    """
    base, weight = _split_weight(name)
    if base == TPCC:
        if "@" in name:
            raise UsageError(f"{name!r}: tpcc takes no weight; write tpcc.")
        return tpcc_workload()
    if base not in BUILTINS:
        raise UsageError(
            f"unknown workload {base!r}: choose from {', '.join(WORKLOADS)}, or give a script "
            "file with --script."
        )
    return Workload(base, (Script(base, weight),))


def script_workload(specs: list[str], builtins: list[str] | None = None) -> Workload:
    """One workload mixing script files (`FILE[@WEIGHT]`) and optionally built-ins."""
    scripts = []
    for spec in specs:
        path, weight = _split_weight(spec)
        file = _script_file(path)
        scripts.append(Script(file.stem, weight, file))
    for name in builtins or []:
        if _split_weight(name)[0] == TPCC:
            raise UsageError(
                "tpcc cannot join a mix with script files: its scripts run on a dataset of "
                "their own; run it as a workload of its own (-w tpcc)."
            )
        scripts.extend(builtin_workload(name).scripts)
    label = "+".join(f"{s.name}@{s.weight}" if len(scripts) > 1 else s.name for s in scripts)
    return Workload(f"custom:{label}", tuple(scripts))


def _script_file(path: str) -> Path:
    """A script's resolved path; UsageError when it is not a file.

    >>> _script_file("/no/such.sql")
    Traceback (most recent call last):
    ...
    pgdyno.errors.UsageError: script file '/no/such.sql' does not exist: give a path to a \
pgbench script.
    """
    try:
        file = Path(path).expanduser().resolve()
        if file.is_file():
            return file
    except (OSError, ValueError, RuntimeError):  # NUL in the name, ~nobody, symlink loops
        pass
    raise UsageError(f"script file {path!r} does not exist: give a path to a pgbench script.")


def jobs_for(clients: int, policy: str, cpus: int) -> int:
    """pgbench threads for a client count.

    `auto`: one thread per client up to the CPU count; `clients`: jobs = clients, as in seed 002
    (Vondra); a number: that many, never more than the clients.

    >>> jobs_for(8, "auto", 2), jobs_for(8, "clients", 2), jobs_for(1, "4", 2)
    (2, 8, 1)
    """
    if policy == "auto":
        return max(1, min(clients, cpus))
    if policy == "clients":
        return clients
    if policy.isdigit() and int(policy) >= 1:
        return min(int(policy), clients)
    raise UsageError(f"--jobs {policy!r} is not valid: use auto, clients or a number >= 1.")


def parse_int_list(text: str, option: str) -> list[int]:
    """`1,2,4` -> [1, 2, 4], for sweeps.

    >>> parse_int_list("1, 2,8", "-c")
    [1, 2, 8]
    """
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise UsageError(
            f"{option} {text!r} is not a list of whole numbers: write e.g. 1,2,4."
        ) from None
    if not values or any(v < 1 for v in values):
        raise UsageError(f"{option} {text!r} needs whole numbers >= 1: write e.g. 1,2,4.")
    return values


@dataclass(frozen=True)
class RunOptions:
    workload: Workload
    clients: int
    jobs: int
    duration_s: int
    protocol: str = "simple"
    rate: float | None = None  # -R, transactions per second in total
    latency_limit_ms: float | None = None  # -L
    # Off by default: beside the transaction log, either costs about 5% of TPS on a busy
    # 2-CPU machine (benchmarks/harness_overhead.py), and the timeline does not need them.
    per_statement: bool = False  # -r: average latency per statement
    progress: bool = False  # -P 1: pgbench's own per-second report, kept as a cross-check
    max_tries: int = 1  # --max-tries (pgbench 15+): retries of serialization/deadlock failures


def run_argv(
    pgbench: Path,
    conninfo: str,
    opts: RunOptions,
    log_prefix: Path | None,
    *,
    sampling_rate: float = 1.0,
    scale: int | None = None,
) -> list[str]:
    """The pgbench command line of a run.

    A measured run (`log_prefix` given) writes the per-transaction log (-l), sampled when
    `sampling_rate` < 1, and on request per-statement latencies (-r) and pgbench's own
    per-second report (-P 1). No vacuum (-n): every run starts from a fresh copy of a vacuumed
    dataset. Custom scripts get the dataset's scale as `:scale` (pgbench only detects it for
    built-ins).

    >>> from pathlib import Path
    >>> o = RunOptions(builtin_workload("select-only"), clients=2, jobs=2, duration_s=5)
    >>> run_argv(Path("pgbench"), "dbname=b", o, Path("/r/tx"), sampling_rate=0.1)[10:]
    ['-M', 'simple', '-l', '--log-prefix=/r/tx', '--sampling-rate=0.1', 'dbname=b']
    >>> o = RunOptions(builtin_workload("select-only"), 2, 2, 5, per_statement=True, progress=True)
    >>> run_argv(Path("pgbench"), "dbname=b", o, Path("/r/tx"))[10:]
    ['-M', 'simple', '-r', '-P', '1', '-l', '--log-prefix=/r/tx', 'dbname=b']
    >>> from dataclasses import replace
    >>> run_argv(Path("pgbench"), "dbname=b", replace(o, max_tries=10), None)[12]
    '--max-tries=10'
    """
    if any(s.path is None and s.name not in BUILTINS for s in opts.workload.scripts):
        raise ValueError(f"workload {opts.workload.name} has scripts not written yet")
    argv = [str(pgbench), "-n"]
    for script in opts.workload.scripts:
        argv += script.option
    if scale is not None and any(s.path is not None for s in opts.workload.scripts):
        argv += ["-s", str(scale)]
    argv += ["-c", str(opts.clients), "-j", str(opts.jobs), "-T", str(opts.duration_s)]
    argv += ["-M", opts.protocol]
    if opts.rate is not None:
        argv += ["-R", f"{opts.rate:g}"]
    if opts.latency_limit_ms is not None:
        argv += ["-L", f"{opts.latency_limit_ms:g}"]
    if opts.max_tries != 1:
        argv += [f"--max-tries={opts.max_tries}"]
    if log_prefix is not None:
        argv += ["-r"] if opts.per_statement else []
        argv += ["-P", "1"] if opts.progress else []
        argv += ["-l", f"--log-prefix={log_prefix}"]
        if sampling_rate < 1.0:
            argv.append(f"--sampling-rate={sampling_rate:g}")
    argv.append(conninfo)
    return argv


def init_argv(pgbench: Path, conninfo: str, scale: int, steps: str = INIT_STEPS) -> list[str]:
    """
    >>> init_argv(Path("pgbench"), "dbname=t", 10)
    ['pgbench', '-i', '-s', '10', '-I', 'dtgvp', 'dbname=t']
    """
    return [str(pgbench), "-i", "-s", str(scale), "-I", steps, conninfo]
