"""Twin servers: for sets that differ by settings a restart makes current, one sandbox per set,
each on its own copy of the dataset, started once with its set's settings and kept running for
the whole comparison; each run goes to the server of its set, so no run follows a restart.

The run-per-set design on one sandbox restarts it at every switch between such sets: the run
after a restart starts from a cold cache and a fresh checkpoint cycle, and the restart costs
time. With twins the state a run starts from is the one its own server left, as when the same
set ran twice. What the design assumes (docs/statistics.md, "Twin servers"): the servers'
dataset copies are identical (generated the same way on each) and their only difference is the
set; the idle twins' background work (checkpoints, autovacuum, their CPU) is interference that
lands on the measured server, measured and said.

`qualify_twins` says whether a plan may run on twins (the memory rule is data/twins.toml),
`choose` turns the plan's `[matrix] design` into the design that runs (switching inside one
run first, pgdyno.experiment.switching), and `TwinSwitcher` is the `SetSwitcher` that keeps the
twins and stops every server it started on every way out.
"""

from __future__ import annotations

import os
import time
import tomllib
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

from pgdyno.changes.alter import refuse_changed_sandbox
from pgdyno.collect.interference import CLOCK_TICKS, ProcessTable, read_processes, tree_ticks
from pgdyno.environment import Environment
from pgdyno.errors import ClusterError, ConnectionFailed, QueryRefused
from pgdyno.experiment.matrix import BenchSpec
from pgdyno.experiment.switching import Choice, differing, plan_design
from pgdyno.experiment.target import Target, sandbox_as_target
from pgdyno.pgbench.scale import DEFAULT_SHARED_BUFFERS
from pgdyno.plan.check import CheckedSet, MetaLoader
from pgdyno.plan.load import Plan
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox, recover, taken_ports
from pgdyno.postgres.sandbox_user import sandbox_user
from pgdyno.postgres.settings import SettingMeta, convert_to_setting_unit, read_number
from pgdyno.postgres.stats import checkpoints_done
from pgdyno.records import Event

TWINS_DATA = Path(str(resources.files("pgdyno") / "data" / "twins.toml"))
GIB = 1024**3


@dataclass(frozen=True)
class MemoryRule:
    """data/twins.toml: the fraction of memory kept free, and what a server needs beyond its
    shared_buffers and its dataset."""

    headroom: float
    server_bytes: int


def parse_rule(text: str) -> MemoryRule:
    """
    >>> parse_rule("[memory]\\nheadroom = 0.25\\nserver_bytes = 1024\\n")
    MemoryRule(headroom=0.25, server_bytes=1024)
    """
    memory = tomllib.loads(text)["memory"]
    return MemoryRule(float(memory["headroom"]), int(memory["server_bytes"]))


@cache
def memory_rule() -> MemoryRule:
    return parse_rule(TWINS_DATA.read_text(encoding="utf-8"))


def shared_buffers_bytes(pg: Mapping[str, str]) -> int:
    """A set's shared_buffers in bytes as its settings write it (8kB pages when bare), or
    PostgreSQL's default.

    >>> shared_buffers_bytes({"shared_buffers": "256MB"}), shared_buffers_bytes({})
    (268435456, 134217728)
    >>> shared_buffers_bytes({"shared_buffers": "1024"})
    8388608
    """
    text = pg.get("shared_buffers")
    found = read_number(text, integer=True) if text is not None else None
    if found is None:
        return DEFAULT_SHARED_BUFFERS
    number, unit = found
    if not unit:  # pages of 8kB (the setting's unit)
        return int(number) * 8192
    in_kb = convert_to_setting_unit(number, unit, "kB")
    return DEFAULT_SHARED_BUFFERS if in_kb is None else int(in_kb) * 1024


def _size(n: int) -> str:
    """
    >>> _size(6 * 1024**3), _size(128 * 1024**2), _size(1536 * 1024**2), _size(1024**4)
    ('6GB', '128MB', '1.5GB', '1024GB')
    >>> _size(12630000000), _size(15 * 1024**2 + 1)
    ('11.8GB', '15MB')
    """
    value, unit = (n / GIB, "GB") if n >= GIB else (n / 1024**2, "MB")
    return f"{value:.0f}{unit}" if value >= 100 else f"{value:.3g}{unit}"


def memory_shortfall(
    buffers: Sequence[int], dataset_bytes: int, memory_bytes: int, rule: MemoryRule
) -> str | None:
    """Why the servers do not fit in memory side by side (each its shared_buffers, the
    rule's `server_bytes` and its own dataset in the page cache, all under the usable memory
    less the headroom); None when they fit.

    >>> rule = MemoryRule(0.25, 64 * 1024**2)
    >>> memory_shortfall([128 * 1024**2, 256 * 1024**2], 16 * 1024**2, 8 * GIB, rule) is None
    True
    >>> memory_shortfall([6 * GIB, 8 * GIB], 0, 16 * GIB, rule)
    'not enough memory for 2 servers with shared_buffers 6GB + 8GB (RAM 16 GiB, 25% headroom)'
    >>> memory_shortfall([GIB], 0, 0, rule)
    "this host's memory is unknown"
    """
    if memory_bytes <= 0:
        return "this host's memory is unknown"
    need = sum(b + rule.server_bytes + dataset_bytes for b in buffers)
    if need <= memory_bytes * (1 - rule.headroom):
        return None
    sizes = " + ".join(_size(b) for b in buffers)
    dataset = f", a {_size(dataset_bytes)} dataset each" if dataset_bytes >= 1024**2 else ""
    return (
        f"not enough memory for {len(buffers)} servers with shared_buffers {sizes}{dataset} "
        f"(RAM {memory_bytes / GIB:.0f} GiB, {rule.headroom:.0%} headroom)"
    )


@dataclass(frozen=True)
class TwinFit:
    """Whether the plan may run on twin servers and why (not); `restart`: some setting that
    differs between the sets needs a restart (what twins are for)."""

    fits: bool
    reason: str
    restart: bool


def qualify_twins(
    checked: Sequence[CheckedSet],
    meta: Mapping[str, SettingMeta],
    memory_bytes: int,
    dataset_bytes: int,
    rule: MemoryRule | None = None,
    dataset: str = "pgbench",
) -> TwinFit:
    """Whether the sets differ only by PostgreSQL settings on one version and storage, with a
    setting that needs a restart among them, and their servers fit in memory side by side.
    `dataset`: pgbench's (the same rows on every server) or the TPC-C-like one."""
    names = differing([c.pg for c in checked])
    restart = [n for n in names if n in meta and meta[n].needs_restart]
    if not restart:
        return TwinFit(False, "no setting that differs between the sets needs a restart", False)
    if dataset != "pgbench":
        return TwinFit(
            False, "the TPC-C-like dataset is generated at random on each server: the twins' "
            "copies would differ", True,
        )  # fmt: skip
    if len({c.binaries.version for c in checked}) > 1:
        return TwinFit(False, "the sets run different PostgreSQL versions", True)
    for c in checked:
        if c.spec.storage is not None:
            return TwinFit(False, f"set {c.name} puts the data on a filesystem of its own", True)
    hosts = [{str(knob): value for knob, value in c.host} for c in checked]
    if differing(hosts):
        return TwinFit(False, "the sets change host settings, which every server would see", True)
    if any(knob.name == "vm.nr_hugepages" for c in checked for knob, _ in c.host):
        return TwinFit(False, "a set reserves huge pages, which stops the servers", True)
    short = memory_shortfall(
        [shared_buffers_bytes(c.pg) for c in checked], dataset_bytes, memory_bytes,
        rule or memory_rule(),
    )  # fmt: skip
    if short is not None:
        return TwinFit(False, short, True)
    return TwinFit(
        True,
        f"{', '.join(restart)} needs a restart; the {len(checked)} servers fit in memory side "
        "by side, each started once with its set's settings on its own copy of the dataset",
        True,
    )


def choose(
    plan: Plan,
    checked: Sequence[CheckedSet],
    meta_for: MetaLoader,
    spec: BenchSpec,
    memory: tuple[int, int],
    refusal: str | None = None,
    one_server: str | None = None,
) -> Choice:
    """The design `compare` runs for `plan` (and `plan check` says it will): switching inside
    one run when the plan asks or qualifies (`switching.plan_design`), else twin servers when
    the plan asks ("twins") or ("auto") qualifies for them, else one run per set and round on
    one server, with the reason. `memory`: the host's usable memory and the largest dataset's
    bytes; `one_server`: why this invocation has one server only (`--dsn`). A plan asking for
    twins that cannot have them runs one run per set and round, and says why."""
    design = plan.spec.matrix.design
    base = None if design == "twins" else plan_design(plan, list(checked), meta_for, spec, refusal)
    if base is not None and (design != "auto" or base.inside):
        return base
    why_not = refusal or one_server
    if not checked:
        return Choice("runs", "the plan has no set")
    found = qualify_twins(checked, meta_for(checked[0].binaries), *memory, dataset=spec.dataset)
    if why_not is not None and (design == "twins" or found.fits):
        return Choice("runs", f"twins: {why_not}")
    if found.fits:
        return Choice("twins", found.reason)
    if base is None or found.restart:
        return Choice("runs", f"twins: {found.reason}")
    return base


# -- The idle twins' background work ---------------------------------------------------------------

IDLE_EVENT = "idle_twin"  # the run event that holds one idle twin's work during the run


# Checkpoints so far: pg_stat_checkpointer from PostgreSQL 17, pg_stat_bgwriter before
# (https://www.postgresql.org/docs/17/monitoring-stats.html#MONITORING-PG-STAT-CHECKPOINTER-VIEW).
@dataclass(frozen=True)
class IdleShare:
    """What the idle twins did while one set's runs were measured on its own server: their
    CPU time (every process of their servers), the runs' wall time, and their checkpoints."""

    set_name: str  # the set whose runs were measured meanwhile
    cpu_s: float
    wall_s: float
    checkpoints: int
    runs: int

    @property
    def cpu_share(self) -> float:
        """The idle twins' CPU as a share of one CPU over the runs' wall time."""
        return self.cpu_s / self.wall_s if self.wall_s > 0 else 0.0

    def line(self) -> str:
        """
        >>> IdleShare("b", 0.25, 10.0, 1, 2).line()
        'Idle twin used 2.5% of a CPU during the runs of b (0.25 s of CPU over 10.0 s of 2 runs; 1 checkpoint).'
        """  # noqa: E501
        point = "checkpoint" if self.checkpoints == 1 else "checkpoints"
        return (
            f"Idle twin used {self.cpu_share:.1%} of a CPU during the runs of {self.set_name} "
            f"({self.cpu_s:.2f} s of CPU over {self.wall_s:.1f} s of {self.runs} runs; "
            f"{self.checkpoints} {point})."
        )

    def as_dict(self) -> dict[str, object]:
        return {
            "set_name": self.set_name, "cpu_s": round(self.cpu_s, 3),
            "wall_s": round(self.wall_s, 3), "cpu_share": round(self.cpu_share, 5),
            "checkpoints": self.checkpoints, "runs": self.runs,
        }  # fmt: skip


def idle_shares(events: Sequence[tuple[int, str, Event]]) -> tuple[IdleShare, ...]:
    """Every measured set's idle-twin work, summed over its runs' `idle_twin` events (the run,
    its set, the event): the CPU of every idle twin, each run's wall time once; sets in the
    order first met.

    >>> e = Event(0.0, IDLE_EVENT, {"cpu_s": 0.1, "wall_s": 5.0, "checkpoints": 1})
    >>> idle_shares([(1, "a", e), (1, "a", e), (2, "b", e)])[0]
    IdleShare(set_name='a', cpu_s=0.2, wall_s=5.0, checkpoints=2, runs=1)
    """
    found: dict[str, IdleShare] = {}
    seen: set[int] = set()
    for run_id, set_name, event in events:
        if event.kind != IDLE_EVENT:
            continue
        d, first = event.detail, run_id not in seen
        seen.add(run_id)
        was = found.get(set_name, IdleShare(set_name, 0.0, 0.0, 0, 0))
        found[set_name] = IdleShare(
            set_name, was.cpu_s + float(str(d["cpu_s"])),
            was.wall_s + (float(str(d["wall_s"])) if first else 0.0),
            was.checkpoints + int(str(d["checkpoints"] or 0)), was.runs + first,
        )  # fmt: skip
    return tuple(found.values())


def checkpoints(box: Sandbox) -> int | None:
    """The checkpoints a running sandbox made since its statistics were last reset; None when
    it cannot say (it stopped meanwhile): the run is stored all the same."""
    try:
        with connect(box.conninfo()) as client:
            return checkpoints_done(client, box.binaries().major)
    except (ConnectionFailed, QueryRefused):
        return None


@dataclass(frozen=True)
class _Before:
    table: ProcessTable
    checkpoints: dict[str, int | None]  # per idle twin
    pids: dict[str, int]  # each idle twin's postmaster


# -- The twins themselves --------------------------------------------------------------------------


def twin_name(major: int, set_name: str) -> str:
    """The sandbox directory of a set's twin (set names are plain: plan/model.py SET_NAME).

    >>> twin_name(18, "big-buffers")
    'pg18-big-buffers'
    """
    return f"pg{major}-{set_name}"


def open_twin(
    env: Environment, binaries: Binaries, set_name: str, log: Callable[[str], None]
) -> Sandbox:
    """A set's twin sandbox, made as the sandbox is (pgdyno.experiment.target.open_sandbox)
    under a name of its own when missing; leftovers of interrupted commands recovered."""
    run_as = sandbox_user(env.is_root)
    for note in recover(env.clusters_dir, run_as):
        log(note)
    box = Sandbox(env.clusters_dir / twin_name(binaries.major, set_name), run_as)
    if not box.exists():
        log(f"creating sandbox {box.root.name} (PostgreSQL {binaries.version}, the twin of set "
            f"{set_name}) in {box.root}")  # fmt: skip
        box.init(binaries, taken_ports(env.clusters_dir))
    return box


class TwinSwitcher:
    """One sandbox per set, all started at the first use, each once with its set's settings,
    and kept running; `use` says where the set's runs go. `close` stops every server it started (the
    comparison's stack calls it on every way out, Ctrl-C included; a SIGKILL leaves them to
    each sandbox's watchdog)."""

    def __init__(
        self, env: Environment, sets: Sequence[CheckedSet], log: Callable[[str], None]
    ) -> None:
        self.env = env
        self.sets = tuple(sets)
        self.log = log
        self.running: dict[str, Sandbox] = {}

    def use(self, checked: CheckedSet) -> Target:
        """The target of the set's runs; on first use every twin starts (in the plan's
        order), so that every measured run has the same idle servers beside it."""
        if not self.running:
            for each in self.sets:
                self._start(each)
        return sandbox_as_target(self.running.get(checked.name) or self._start(checked))

    def _start(self, checked: CheckedSet) -> Sandbox:
        box = open_twin(self.env, checked.binaries, checked.name, self.log)
        if box.postmaster_pid() is not None:
            raise ClusterError(
                f"sandbox {box.root.name} is already running, and compare must start it with "
                f"set {checked.name}'s settings: stop it with `pgdyno sandbox stop` first."
            )
        refuse_changed_sandbox(box)
        box.start(
            checked.pg, owner_pid=os.getpid(), binaries=checked.binaries,
            taken_ports=taken_ports(self.env.clusters_dir),
        )  # fmt: skip
        self.running[checked.name] = box
        self.log(f"set {checked.name}: its twin server {box.root.name} started")
        return box

    def others(self, name: str) -> list[Sandbox]:
        """The running twins of the sets other than `name` (idle while its runs are measured)."""
        return [box for set_name, box in self.running.items() if set_name != name]

    def watch(self, name: str) -> Callable[[], tuple[Event, ...]]:
        """Starts watching the idle twins while a run of set `name` begins (their checkpoints,
        then the process table); the function returned ends it as the run ends (the process
        table first, so the checkpoint query's own connection is not counted) and gives one
        `idle_twin` event per idle twin (pgdyno.experiment.bench.run_cells stores them)."""
        idle = self.others(name)
        proc_root = self.env.proc_root
        pids = {b.root.name: pid for b in idle if (pid := b.postmaster_pid()) is not None}
        counted = {b.root.name: checkpoints(b) for b in idle if b.root.name in pids}
        before = _Before(read_processes(proc_root), counted, pids)
        started = time.time()

        def done() -> tuple[Event, ...]:
            after = read_processes(proc_root)
            wall = after.at - before.table.at
            events = []
            for box in idle:
                server = box.root.name
                if server not in before.pids or box.postmaster_pid() is None:
                    continue
                cpu = tree_ticks(before.table, after, before.pids[server]) / CLOCK_TICKS
                now, then = checkpoints(box), before.checkpoints[server]
                made = now - then if now is not None and then is not None else None
                events.append(Event(started, IDLE_EVENT, {
                    "server": server, "measured_set": name, "cpu_s": round(cpu, 3),
                    "wall_s": round(wall, 3), "cpu_share": round(cpu / wall, 5) if wall else 0,
                    "checkpoints": made,
                }))  # fmt: skip
            return tuple(events)

        return done

    def close(self) -> None:
        with ExitStack() as stack:  # every server stops, even when one of them fails to
            for box in self.running.values():
                stack.callback(box.stop)
            self.running.clear()
