"""The host probe's noise on this machine (issue 33, "Covariates"): `count` probes
(`pgdyno.host.probe`, each in a child interpreter) on the quiet host, then beside CPU hogs
(busy loops in child processes, one per CPU asked for), each figure's median and robust
coefficient of variation, and how far the hogs moved the median.

    .venv/bin/python benchmarks/probe_noise.py [count] [hogs ...]

prints one line per condition and one JSON object; docs/statistics.md, "Covariates", has the
figures of this 2-CPU host.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from pgdyno.host.probe import Probe, Spread, probe, spread

HOG = "while True: pass"


@contextmanager
def hogs(count: int) -> Iterator[None]:
    """`count` busy loops, each a child interpreter, stopped on the way out."""
    procs = [subprocess.Popen([sys.executable, "-c", HOG]) for _ in range(count)]
    try:
        yield
    finally:
        for proc in procs:
            proc.kill()
            proc.wait()


def condition(count: int, busy: int) -> tuple[Spread, Spread]:
    with hogs(busy):
        found: Sequence[Probe] = [probe() for _ in range(count)]
    return spread([p.cpu_ops_s for p in found]), spread([p.memory_bytes_s for p in found])


def figures(found: Spread, quiet: Spread | None) -> dict[str, float | int | None]:
    moved = found.median / quiet.median - 1 if quiet else None
    return {"median": found.median, "cv": found.cv, "count": found.count, "vs_quiet": moved}


def main(argv: Sequence[str]) -> None:
    count = int(argv[0]) if argv else 30
    levels = [int(a) for a in argv[1:]] or [0, 1, 2]
    rows = {}
    for busy in levels:
        cpu, memory = condition(count, busy)
        rows[busy] = {"cpu": cpu, "memory": memory}
        print(
            f"{busy} hog(s): CPU loop {cpu.median / 1e6:.2f} M steps/s (cv {cpu.cv:.2%}), "
            f"memory {memory.median / 1e9:.2f} GB/s (cv {memory.cv:.2%}), {count} probes"
        )
    quiet = rows.get(0)
    out = {
        str(busy): {name: figures(s, quiet[name] if quiet else None) for name, s in row.items()}
        for busy, row in rows.items()
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
