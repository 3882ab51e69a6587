"""What a comparison needs beside its run loop (pgdyno.experiment.sets_runner): the plan
checked against the sandbox's host, the look at a busy host before the budget is spent, and the
runs that failed. The use case itself is pgdyno.lab.compare."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from pgdyno.collect.interference import interference_now, is_flagged
from pgdyno.environment import Environment
from pgdyno.errors import ParseError
from pgdyno.experiment.matrix import bench_spec
from pgdyno.experiment.storage_sets import expected_dataset_bytes, image_size
from pgdyno.host.disks import device_for_path
from pgdyno.host.machine import read_host
from pgdyno.plan.check import CheckedSet, HostTarget, MetaLoader, check_plan
from pgdyno.plan.load import Plan
from pgdyno.plan.policy import Allowed
from pgdyno.records.interference import Interference
from pgdyno.records.stored import RunOutcome


def checked_sets(
    env: Environment, plan: Plan, meta_for: MetaLoader, allowed: Allowed
) -> list[CheckedSet]:
    """The plan checked against the sandbox's versions and the disk of its clusters."""
    env.clusters_dir.mkdir(parents=True, exist_ok=True)
    return check_plan(plan, cache_dir=env.cache_dir, meta_for=meta_for,
                      host=sandbox_host(env, plan, allowed, env.clusters_dir))  # fmt: skip


def sandbox_host(env: Environment, plan: Plan, allowed: Allowed, clusters: Path) -> HostTarget:
    """Where a plan's host settings and storage are checked for the sandbox: the disk under
    `clusters` (its sandboxes' directory, or the nearest existing one above it), root or not,
    the work directory for loop images and the image a storage set gets by default."""
    device = device_for_path(clusters, env.proc_root, env.sys_root)
    host = read_host(env.proc_root, env.sys_root)
    image = image_size(expected_dataset_bytes(bench_spec(plan, host.cpu_count), host))
    return HostTarget(device.disk if device else None, env.is_root, env.proc_root,
                      env.sys_root, allowed, env.data_dir, image)  # fmt: skip


def unresolved_failures(runs: list[RunOutcome]) -> list[RunOutcome]:
    """The runs that did not finish and whose cell (set, workload, scale, clients, round) has
    no finished run either: a run interrupted and then made again by `--resume` is not a
    failure of the comparison.

    >>> from pgdyno.records.health import RunHealth
    >>> def run(id, status, repeat):
    ...     return RunOutcome(id, "a", status, "tpcb", 1, 1, repeat, None, None, None,
    ...                       RunHealth(), "18.1")
    >>> [r.id for r in unresolved_failures([run(1, "interrupted", 1), run(2, "ok", 1),
    ...                                     run(3, "failed", 2)])]
    [3]
    """
    finished = {_cell(r) for r in runs if r.status == "ok"}
    return [r for r in runs if r.status != "ok" and _cell(r) not in finished]


def cell_count(runs: list[RunOutcome]) -> int:
    """The runs the comparison planned and made, a run made again on --resume counted once."""
    return len({_cell(r) for r in runs})


def _cell(run: RunOutcome) -> tuple[str | None, str, int, int, int]:
    return (run.set_name, run.workload, run.scale, run.clients, run.repeat)


# How long the look at the host's processes before a comparison lasts. A second is 100 clock
# ticks per CPU: another process at the 5% default limit shows as 10 of the 200 ticks of a
# 2-CPU host, enough to say the host is busy; each run is then judged on its own measure.
BUSY_CHECK_S = 1.0


def busy_host_check(
    proc_root: Path, cpus: int, limit_pct: float, log: Callable[[str], None]
) -> Interference | None:
    """Before a comparison spends its budget: whether other processes take more of the CPU
    than a run tolerates (each such run is flagged and left out of the verdicts). Says so, with
    the biggest consumers, and returns what it saw; None when the host is quiet enough."""
    try:
        found = interference_now(proc_root, [os.getpid()], cpus, BUSY_CHECK_S)
    except (OSError, ParseError) as exc:
        log(f"the host's processes could not be read before the runs ({exc}): no busy check")
        return None
    if not is_flagged(found, limit_pct):
        return None
    top = ", ".join(f"{command} {pct:.1f}%" for command, pct in found.top) or "-"
    log(
        f"this host is busy: other processes took {found.foreign_cpu_pct:.1f}% of its CPU "
        f"(steal {found.steal_pct:.1f}%) over {BUSY_CHECK_S:.0f} s (top: {top}); runs where "
        f"they take more than {limit_pct:g}% are flagged and left out of the verdicts (sets "
        "switched inside one run, adaptively, keep them, adjusted for it): stop them first, or "
        "raise --foreign-cpu-limit"
    )
    return found
