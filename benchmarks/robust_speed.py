"""The robust interval's cost per look, against the same module at an earlier commit.

    python benchmarks/robust_speed.py [--against REV] [--comparisons 150] [--seed 1]

An adaptive comparison computes `pgdyno.stats.robust.prefix_intervals` once per look, and the
statistical simulations of the suite drive that loop hundreds of thousands of times, so its
cost is most of their CPU. This script draws ``--comparisons`` comparisons (2-150 rounds of
normal differences with a few 5x outliers, alphas of a whole plan and of one comparison), runs
every look of each through the current module and through ``src/pgdyno/stats/robust.py`` as it
was at ``--against`` (read with `git show`, the baseline, measured in the same run, arms
alternated), and prints the seconds of each, their ratio and the largest difference between
the two arms' interval ends (in units of the differences: log ratios).
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from pgdyno.stats import robust  # noqa: E402

# The commit before the in-place ufuncs and the 24-bit search (2026-11-29).
DEFAULT_AGAINST = "ebfe677"


def baseline(rev: str, where: Path) -> ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{rev}:src/pgdyno/stats/robust.py"],
                            capture_output=True, text=True, check=True).stdout  # fmt: skip
    path = where / "robust_baseline.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("robust_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def comparisons(count: int, seed: int) -> list[tuple[list[float], float]]:
    rng = random.Random(seed)
    drawn = []
    for _ in range(count):
        rounds = rng.randint(2, 150)
        centre = rng.choice([0.0, 0.01, 0.03])
        diffs = [rng.gauss(centre, 0.03) * (5.0 if rng.random() < 0.05 else 1.0)
                 for _ in range(rounds)]  # fmt: skip
        drawn.append((diffs, rng.choice([0.025, 0.004])))
    return drawn


def every_look(module: ModuleType, drawn: list[tuple[list[float], float]]
               ) -> tuple[float, list[tuple[float, float]]]:  # fmt: skip
    module._BETS_SEEN.clear()
    ends: list[tuple[float, float]] = []
    start = time.perf_counter()
    for diffs, alpha in drawn:
        for k in range(2, len(diffs) + 1):
            ends.extend(module.prefix_intervals(diffs[:k], alpha=alpha, first=k))
    return time.perf_counter() - start, ends


def largest_gap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    gap = 0.0
    for pair_a, pair_b in zip(a, b, strict=True):
        for x, y in zip(pair_a, pair_b, strict=True):
            if x != y:  # equal infinities are no gap
                gap = max(gap, abs(x - y))
    return gap


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", default=DEFAULT_AGAINST)
    parser.add_argument("--comparisons", type=int, default=150)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    drawn = comparisons(args.comparisons, args.seed)
    looks = sum(len(d) - 1 for d, _ in drawn)
    with tempfile.TemporaryDirectory() as where:
        old = baseline(args.against, Path(where))
        now_s, old_s = [], []
        for _ in range(args.repeats):
            seconds, old_ends = every_look(old, drawn)
            old_s.append(seconds)
            seconds, now_ends = every_look(robust, drawn)
            now_s.append(seconds)
    best_now, best_old = min(now_s), min(old_s)
    print(f"{looks} looks of {len(drawn)} comparisons, best of {args.repeats}:")
    print(f"  at {args.against}: {best_old:.2f} s ({1e6 * best_old / looks:.0f} us a look)")
    print(f"  now: {best_now:.2f} s ({1e6 * best_now / looks:.0f} us a look)")
    print(f"  ratio now / {args.against}: {best_now / best_old:.3f}")
    print(f"  largest difference between the arms' ends: {largest_gap(old_ends, now_ends):.2e}")


if __name__ == "__main__":
    main()
