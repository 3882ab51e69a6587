"""A run's on-CPU profile: where the server's processes spent their CPU time, sampled by perf
(collect/cpu_profile.py takes it, host/perf.py parses perf's output, stats/cpu_profile.py sums
it up).

A function is named as perf resolves it from the binary's symbols (`hash_search_with_hash_value`,
`ExecInterpExpr`, a kernel function such as `copy_user_generic`), or `[unknown] DSO` when the
object it ran in has no symbol for the address. A process type is PostgreSQL's name for the
process (`client backend`, `checkpointer`, `walwriter`, `io worker`, ...), read from its title.
"""

from __future__ import annotations

from dataclasses import dataclass

KERNEL_DSO = "[kernel.kallsyms]"
UNKNOWN = "[unknown]"


@dataclass(frozen=True, slots=True)
class Frame:
    """One frame of a sampled call chain: the function and the object it belongs to."""

    symbol: str  # "[unknown]" when perf found no symbol
    dso: str  # the binary or library's path, "[kernel.kallsyms]" for the kernel

    @property
    def kernel(self) -> bool:
        return self.dso == KERNEL_DSO or self.dso.startswith("[kernel")

    @property
    def name(self) -> str:
        """The function's name, or `[unknown] FILE` when it has no symbol.

        >>> Frame("[unknown]", "/usr/lib/libc.so.6").name, Frame("PortalRun", "/x/postgres").name
        ('[unknown] libc.so.6', 'PortalRun')
        """
        if self.symbol != UNKNOWN:
            return self.symbol
        return f"{UNKNOWN} {self.dso.rsplit('/', 1)[-1]}" if self.dso != UNKNOWN else UNKNOWN


@dataclass(frozen=True, slots=True)
class CpuSample:
    """One sample of `perf script`: the process and its call chain, innermost frame first."""

    pid: int
    frames: tuple[Frame, ...]


@dataclass(frozen=True, slots=True)
class FunctionShare:
    """One function of one process type: its share of all the server's samples (self time:
    the samples whose innermost frame it was)."""

    process: str
    function: str
    share: float  # 0..1 of the run's samples
    kernel: bool = False


@dataclass(frozen=True, slots=True)
class CpuProfile:
    """The on-CPU profile of a run's server processes.

    `samples` were taken at `sample_hz` per CPU a process was on; shares are fractions of all
    of them. `top` keeps the largest functions of each process type (self time, largest
    first); `folded` the largest call chains, root first, as `process;outer;...;inner` with
    their sample counts (the flame graph's input); what the bounds left out is in `other`
    counts.
    """

    sample_hz: float
    samples: int
    kernel_share: float  # of the samples, those whose innermost frame was in the kernel
    by_process: tuple[tuple[str, float], ...]  # (process type, share), largest first
    top: tuple[FunctionShare, ...]
    folded: tuple[tuple[str, int], ...] = ()
    folded_other: int = 0  # samples of the call chains left out of `folded`

    def functions(self, process: str | None = None) -> dict[str, float]:
        """Each kept function's share, summed over process types (or of one type only).

        >>> p = CpuProfile(99, 10, 0.0, (("client backend", 1.0),),
        ...                (FunctionShare("client backend", "f", 0.5),
        ...                 FunctionShare("checkpointer", "f", 0.1)))
        >>> p.functions(), p.functions("checkpointer")
        ({'f': 0.6}, {'f': 0.1})
        """
        found: dict[str, float] = {}
        for f in self.top:
            if process is None or f.process == process:
                found[f.function] = found.get(f.function, 0.0) + f.share
        return found


@dataclass(frozen=True, slots=True)
class FunctionMove:
    """A function whose share of the server's CPU moved between two sets' runs."""

    function: str
    before: float  # share of CPU, 0..1, in the base set's runs
    after: float  # in the other set's runs

    @property
    def change(self) -> float:
        return self.after - self.before

    def text(self) -> str:
        """
        >>> FunctionMove("XLogInsertRecord", 0.14, 0.06).text()
        'XLogInsertRecord 14% -> 6%'
        """
        return f"{self.function} {self.before:.0%} -> {self.after:.0%}"
