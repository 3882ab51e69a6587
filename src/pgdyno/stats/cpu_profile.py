"""A run's on-CPU profile from perf's samples, and which functions moved between two sets.

Shares are fractions of all the samples of the server's processes: with perf's cpu-clock event
at a fixed rate per CPU a process is on, a share is that fraction of the server's CPU time
(Gregg, 2016, "The flame graph", Communications of the ACM 59(6)). The share of a function
over n samples has a binomial standard error sqrt(p (1 - p) / n): at 99 Hz a 60 s run of two
busy backends gives about 12,000 samples, so a 10% function is known to +/- 0.3 points.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

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


def mean_shares(profiles: Sequence[CpuProfile]) -> dict[str, float]:
    """Each function's share of CPU averaged over runs (summed over process types; a run that
    did not keep a function counts 0 for it).

    >>> a = CpuProfile(99, 10, 0.0, (), (FunctionShare("client backend", "f", 0.4),))
    >>> b = CpuProfile(99, 10, 0.0, (), (FunctionShare("client backend", "g", 0.2),))
    >>> mean_shares([a, b])
    {'f': 0.2, 'g': 0.1}
    """
    found: dict[str, float] = {}
    for p in profiles:
        for name, share in p.functions().items():
            found[name] = found.get(name, 0.0) + share / len(profiles)
    return found


def moved(
    before: Sequence[CpuProfile],
    after: Sequence[CpuProfile],
    *,
    limit: int = 10,
    floor: float = 0.005,
) -> tuple[FunctionMove, ...]:
    """The functions whose mean share of CPU moved most from one set's runs to another's,
    largest move first; moves under `floor` (half a point) are left out, as are both sides
    without a profile.

    >>> a = CpuProfile(99, 10, 0.0, (), (FunctionShare("client backend", "XLogInsertRecord", 0.14),
    ...                                  FunctionShare("client backend", "PortalRun", 0.05)))
    >>> b = CpuProfile(99, 10, 0.0, (), (FunctionShare("client backend", "XLogInsertRecord", 0.06),
    ...                                  FunctionShare("client backend", "PortalRun", 0.052)))
    >>> [(m.function, m.before, m.after) for m in moved([a], [b])]
    [('XLogInsertRecord', 0.14, 0.06)]
    """
    if not before or not after:
        return ()
    base, other = mean_shares(before), mean_shares(after)
    found = [
        FunctionMove(name, base.get(name, 0.0), other.get(name, 0.0))
        for name in sorted(set(base) | set(other))
    ]
    found = [m for m in found if abs(m.change) >= floor]
    found.sort(key=lambda m: (-abs(m.change), m.function))
    return tuple(found[:limit])
