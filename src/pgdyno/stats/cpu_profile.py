"""A run's on-CPU profile from perf's samples, and which functions moved between two sets.

Shares are fractions of all the samples of the server's processes: with perf's cpu-clock event
at a fixed rate per CPU a process is on, a share is that fraction of the server's CPU time
(Gregg, 2016, "The flame graph", Communications of the ACM 59(6)). The share of a function
over n samples has a binomial standard error sqrt(p (1 - p) / n): at 49 Hz a 60 s run on two
busy CPUs gives about 5,900 samples, so a 10% function is known to +/- 0.4 points.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from pgdyno.records.profile import (
    UNKNOWN,
    CpuProfile,
    CpuSample,
    FunctionMove,
    FunctionShare,
)

TOP_PER_PROCESS = 15  # functions kept per process type
MAX_STACKS = 300  # call chains kept per run for the flame graph
UNKNOWN_PROCESS = "unknown"
MOVES_SHOWN = 3  # functions beside each verdict row
# A function's move is shown when it is at least a point of CPU and beyond sampling error at
# this many standard errors (about 1 in 4,300 by one function's chance alone; a run keeps some
# tens of functions).
MOVE_Z = 3.5
MOVE_FLOOR = 0.01


def _leaf(sample: CpuSample) -> tuple[str, bool]:
    if not sample.frames:
        return UNKNOWN, False
    return sample.frames[0].name, sample.frames[0].kernel


def _stack(process: str, sample: CpuSample) -> str:
    """A folded call chain, root first: `process;outer;...;inner` (`;` in a name becomes `:`).

    >>> from pgdyno.records.profile import Frame
    >>> _stack("checkpointer", CpuSample(1, (Frame("f", "/p"), Frame("g", "/p"))))
    'checkpointer;g;f'
    """
    names = [f.name.replace(";", ":") for f in reversed(sample.frames)] or [UNKNOWN]
    return ";".join([process, *names])


def _ranked(counts: Mapping[str, int], total: int) -> tuple[tuple[str, float], ...]:
    return tuple((k, n / total) for k, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def cpu_profile(
    samples: Sequence[CpuSample],
    types: Mapping[int, str],
    sample_hz: float,
    *,
    top_per_process: int = TOP_PER_PROCESS,
    max_stacks: int = MAX_STACKS,
) -> CpuProfile | None:
    """The profile of a run from its samples and each pid's process type (a pid not in
    `types` is `unknown`); None without a sample.

    >>> from pgdyno.records.profile import Frame
    >>> pg, k = "/pg/bin/postgres", "[kernel.kallsyms]"
    >>> s = [CpuSample(1, (Frame("hash_search", pg),)), CpuSample(1, (Frame("hash_search", pg),)),
    ...      CpuSample(2, (Frame("copy_page", k), Frame("XLogWrite", pg)))]
    >>> p = cpu_profile(s, {1: "client backend", 2: "walwriter"}, 99)
    >>> p.samples, round(p.kernel_share, 3), p.by_process[0], p.top[0].function
    (3, 0.333, ('client backend', 0.6666666666666666), 'hash_search')
    >>> p.folded
    (('client backend;hash_search', 2), ('walwriter;XLogWrite;copy_page', 1))
    """
    if not samples:
        return None
    total = len(samples)
    per_process: Counter[str] = Counter()
    per_function: Counter[tuple[str, str, bool]] = Counter()
    stacks: Counter[str] = Counter()
    kernel = 0
    for sample in samples:
        process = types.get(sample.pid, UNKNOWN_PROCESS)
        name, in_kernel = _leaf(sample)
        kernel += in_kernel
        per_process[process] += 1
        per_function[(process, name, in_kernel)] += 1
        stacks[_stack(process, sample)] += 1
    top: list[FunctionShare] = []
    for process, _ in per_process.most_common():
        mine = [(k, n) for k, n in per_function.items() if k[0] == process]
        mine.sort(key=lambda kn: (-kn[1], kn[0][1]))
        top += [FunctionShare(p, f, n / total, k) for (p, f, k), n in mine[:top_per_process]]
    kept = sorted(stacks.items(), key=lambda kv: (-kv[1], kv[0]))[:max_stacks]
    return CpuProfile(
        sample_hz=sample_hz, samples=total, kernel_share=kernel / total,
        by_process=_ranked(per_process, total), top=tuple(top),
        folded=tuple(kept), folded_other=total - sum(n for _, n in kept),
    )  # fmt: skip


def symbols_missing(samples: Iterable[CpuSample], binary: str = "postgres") -> bool:
    """True when the samples that ran in the server's binary name no function (a stripped
    binary), so the profile can only say which object the time went to.

    >>> from pgdyno.records.profile import Frame
    >>> symbols_missing([CpuSample(1, (Frame("[unknown]", "/bin/postgres"),))])
    True
    >>> symbols_missing([CpuSample(1, (Frame("PortalRun", "/bin/postgres"),))])
    False
    """
    named = unnamed = 0
    for sample in samples:
        for frame in sample.frames[:1]:
            if frame.dso.rsplit("/", 1)[-1] == binary:
                named += frame.symbol != UNKNOWN
                unnamed += frame.symbol == UNKNOWN
    return unnamed > 0 and named < 0.1 * (named + unnamed)


def _run_bounds(found: CpuProfile) -> tuple[dict[str, float], dict[str, float], float]:
    """A run's kept shares per function (summed over process types), what a function it did
    not keep may have had at most, per function it kept, and for one it kept nowhere: each
    process type's smallest kept share stands for the functions below its bound.

    >>> p = CpuProfile(99, 10, 0.0, (("client backend", 0.8), ("walwriter", 0.2)),
    ...                (FunctionShare("client backend", "f", 0.5),
    ...                 FunctionShare("client backend", "g", 0.1),
    ...                 FunctionShare("walwriter", "g", 0.2)))
    >>> low, high, unseen = _run_bounds(p)
    >>> low["f"], high["f"], round(high["g"], 3), round(unseen, 3)
    (0.5, 0.7, 0.3, 0.3)
    """
    kept: dict[str, dict[str, float]] = {}
    for f in found.top:
        kept.setdefault(f.process, {})[f.function] = (
            kept.get(f.process, {}).get(f.function, 0.0) + f.share
        )
    low = found.functions()
    floors = {process: min(shares.values()) for process, shares in kept.items()}
    high = {
        name: sum(shares.get(name, floors[process]) for process, shares in kept.items())
        for name in low
    }
    return low, high, sum(floors.values())


@dataclass(frozen=True)
class Pooled:
    """Each function's share of the CPU samples of several runs (summed over process types,
    weighted by the runs' samples) as bounds: at least what the runs kept of it (0 where a
    run did not keep it), at most that with, where a run did not keep it, the run's smallest
    kept share in its place (`unseen` for a function no run kept); and the samples in all."""

    low: dict[str, float]
    high: dict[str, float]
    unseen: float
    samples: int

    def bounds(self, name: str) -> tuple[float, float]:
        return self.low.get(name, 0.0), self.high.get(name, self.unseen)


def pooled(profiles: Sequence[CpuProfile]) -> Pooled:
    """
    >>> a = CpuProfile(99, 30, 0.0, (), (FunctionShare("client backend", "f", 0.4),
    ...                                  FunctionShare("client backend", "g", 0.1)))
    >>> b = CpuProfile(99, 10, 0.0, (), (FunctionShare("client backend", "g", 0.2),))
    >>> found = pooled([a, b])
    >>> [round(x, 3) for x in (*found.bounds("f"), *found.bounds("h"))], found.samples
    ([0.3, 0.35, 0.0, 0.125], 40)
    """
    total = sum(p.samples for p in profiles)
    if total == 0:
        return Pooled({}, {}, 0.0, 0)
    runs = [(_run_bounds(p), p.samples / total) for p in profiles]
    names = sorted({name for (low, _, _), _ in runs for name in low})
    return Pooled(
        low={n: sum(low.get(n, 0.0) * w for (low, _, _), w in runs) for n in names},
        high={n: sum(high.get(n, floor) * w for (_, high, floor), w in runs) for n in names},
        unseen=sum(floor * w for (_, _, floor), w in runs),
        samples=total,
    )


def _clear(before: float, n_before: int, after: float, n_after: int, z: float) -> bool:
    """True when two shares differ by more than `z` standard errors of their difference, each
    share a binomial proportion of its samples (a two-proportion z test's statistic)."""
    variance = before * (1 - before) / n_before + after * (1 - after) / n_after
    return abs(after - before) > z * math.sqrt(variance)


def _least_favoured(
    base: tuple[float, float], other: tuple[float, float]
) -> tuple[float, float] | None:
    """A share's move between two (least, most) bounds, taken the way least in its favour: a
    rise from the most it may have had in the base to the least it had in the other, a fall
    the other way round; None when the bounds overlap.

    >>> _least_favoured((0.1, 0.2), (0.3, 0.4)), _least_favoured((0.1, 0.3), (0.2, 0.4))
    ((0.2, 0.3), None)
    """
    (b_low, b_high), (o_low, o_high) = base, other
    if o_low > b_high:
        return b_high, o_low
    if b_low > o_high:
        return b_low, o_high
    return None


def _shown(
    before: float, n_before: int, after: float, n_after: int, z: float, floor: float
) -> bool:
    """A move is shown when at least `floor` and beyond `z` standard errors of sampling."""
    return abs(after - before) >= floor and _clear(before, n_before, after, n_after, z)


def _move(name: str, base: Pooled, other: Pooled) -> FunctionMove:
    """A function's move, taken the way least in its favour (no move where the bounds
    overlap)."""
    found = _least_favoured(base.bounds(name), other.bounds(name))
    if found is None:
        low = base.bounds(name)[0]
        return FunctionMove(name, low, low)
    return FunctionMove(name, *found)


def moved(
    before: Sequence[CpuProfile],
    after: Sequence[CpuProfile],
    *,
    limit: int = MOVES_SHOWN,
    z: float = MOVE_Z,
    floor: float = MOVE_FLOOR,
) -> tuple[FunctionMove, ...]:
    """The functions whose pooled share of CPU moved most from one set's runs to another's,
    largest move first. A move is taken the way least in its favour (a run keeps only its
    largest functions: where it did not keep one, the function had anything from 0 to the
    smallest share it kept) and kept when it is at least `floor` and more than `z` standard
    errors of sampling (tests/unit/test_cpu_profile.py's A/A simulation: two sets of the same
    server show a move in under 5% of comparisons); () when either side has no profile.

    >>> a = CpuProfile(99, 900, 0.0, (), (FunctionShare("client backend", "XLogInsertRecord", 0.14),
    ...                                   FunctionShare("client backend", "PortalRun", 0.05)))
    >>> b = CpuProfile(99, 900, 0.0, (), (FunctionShare("client backend", "XLogInsertRecord", 0.06),
    ...                                   FunctionShare("client backend", "PortalRun", 0.052)))
    >>> [m.text() for m in moved([a], [b])]
    ['XLogInsertRecord 14% -> 6%']
    >>> moved([a], [b], z=20.0)  # not beyond sampling error at that bar
    ()
    """
    base, other = pooled(before), pooled(after)
    if not base.samples or not other.samples:
        return ()
    found = [_move(name, base, other) for name in sorted(set(base.low) | set(other.low))]
    found = [m for m in found if _shown(m.before, base.samples, m.after, other.samples, z, floor)]
    found.sort(key=lambda m: (-abs(m.change), m.function))
    return tuple(found[:limit])


@dataclass(frozen=True, slots=True)
class FrameMove:
    """A frame of the differential flame graph: a call-chain prefix (`process;outer;...;f`) of
    the other set's runs, its pooled share of the CPU samples in each set (the least each set
    had: what its kept call chains show) and its move, taken the way least in its favour; the
    move is 0 within sampling error or under the floor."""

    path: str
    samples: int  # the other set's samples under this frame: the frame's width
    before: float
    after: float
    change: float


def _frame_counts(profiles: Sequence[CpuProfile]) -> tuple[Counter[str], int, int]:
    """The samples under every prefix of the runs' kept call chains, the samples of the call
    chains a run did not keep (any of them may lie under any prefix), and all the samples.

    >>> p = CpuProfile(99, 4, 0.0, (), (), (("client backend;a;b", 2), ("client backend;a", 1)), 1)
    >>> counts, other, total = _frame_counts([p, p])
    >>> dict(counts), other, total
    ({'client backend': 6, 'client backend;a': 6, 'client backend;a;b': 4}, 2, 8)
    """
    counts: Counter[str] = Counter()
    for found in profiles:
        for stack, n in found.folded:
            frames = stack.split(";")
            for depth in range(1, len(frames) + 1):
                counts[";".join(frames[:depth])] += n
    return (
        counts,
        sum(p.folded_other for p in profiles),
        sum(p.samples for p in profiles),
    )


def _frame_change(
    kept: tuple[int, int], other: tuple[int, int], total: tuple[int, int], z: float, floor: float
) -> float:
    """A frame's move from base to other share, the way least in its favour (each side's
    share at least its kept samples, at most those plus all it did not keep); 0 unless
    shown by `moved`'s rule."""
    found = _least_favoured(
        (kept[0] / total[0], (kept[0] + other[0]) / total[0]),
        (kept[1] / total[1], (kept[1] + other[1]) / total[1]),
    )
    if found is None or not _shown(found[0], total[0], found[1], total[1], z, floor):
        return 0.0
    return found[1] - found[0]


def frame_moves(
    before: Sequence[CpuProfile],
    after: Sequence[CpuProfile],
    *,
    z: float = MOVE_Z,
    floor: float = MOVE_FLOOR,
) -> tuple[FrameMove, ...]:
    """Every frame of the other set's kept call chains with its share in both sets and its
    move: the differential flame graph (Gregg, 2014, "Differential Flame Graphs",
    https://www.brendangregg.com/blog/2014-11-09/differential-flame-graphs.html), the frames
    drawn as the other set has them, coloured by how much more or less of the CPU they took.
    Then the frames the other set never reached whose caller it did (0 samples: they cannot
    be drawn in its shape), so their loss can be said. The same rule as `moved`, per frame;
    () when either side has no call chain.

    >>> a = CpuProfile(99, 1000, 0.0, (), (), (("client backend;exec;parse", 300),
    ...                                        ("client backend;exec;plan", 700)))
    >>> b = CpuProfile(99, 1000, 0.0, (), (), (("client backend;exec;plan", 700),
    ...                                        ("client backend;exec;cached", 300)))
    >>> [(m.path.rsplit(";", 1)[-1], m.samples, round(m.change, 2)) for m in frame_moves([a], [b])]
    [('client backend', 1000, 0.0), ('exec', 1000, 0.0), ('cached', 300, 0.3), \
('plan', 700, 0.0), ('parse', 0, -0.3)]
    """
    if not any(p.folded for p in before) or not any(p.folded for p in after):
        return ()
    base, base_other, base_total = _frame_counts(before)
    mine, mine_other, mine_total = _frame_counts(after)
    gone = [
        path for path in sorted(base)
        if path not in mine and (";" not in path or path.rsplit(";", 1)[0] in mine)
    ]  # fmt: skip
    totals = (base_total, mine_total)
    return tuple(
        FrameMove(
            path=path,
            samples=mine.get(path, 0),
            before=base.get(path, 0) / base_total,
            after=mine.get(path, 0) / mine_total,
            change=_frame_change(
                (base.get(path, 0), mine.get(path, 0)), (base_other, mine_other), totals, z, floor
            ),
        )
        for path in [*sorted(mine), *gone]
    )
