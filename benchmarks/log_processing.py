"""Per-transaction log processing: pgdyno's summarize() against the floor, `wc -l`, on the same
files, and summarize()'s peak memory on a short and a long log.

    .venv/bin/python benchmarks/log_processing.py [--lines 10000000]

Writes a realistic log into a temporary directory (two thread files in pgbench's format, 16
clients, latencies lognormal around 1 ms, 20,000 transactions per second), plus a log of a
tenth of its length. Each measurement runs in a child process of its own, so its peak memory
(VmHWM, read by the child) is that child's alone. Deletes its files. Times are wall-clock on a
shared machine: read the ratios, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TPS = 20_000
THREADS = 2
CLIENTS_PER_THREAD = 8
START_EPOCH = 1_795_265_183
BATCH = 100_000


def write_logs(long_dir: Path, short_dir: Path, lines: int, short_lines: int) -> None:
    """Write `lines` transactions over THREADS files; the first `short_lines` also to short_dir.

    Each thread completes TPS / THREADS transactions a second, at random gaps; latencies are
    lognormal with a median of 1 ms (a long tail: p99.9 is about 5 ms).
    """
    rnd = random.Random(42)
    lognormal, uniform = rnd.lognormvariate, rnd.random
    mu, sigma = math.log(1000.0), 0.55
    mean_gap = 1_000_000 * THREADS // TPS  # µs between two completions of one thread
    per_thread, short_per_thread = lines // THREADS, short_lines // THREADS
    for thread in range(THREADS):
        suffix = "" if thread == 0 else f".{thread}"
        long_path = long_dir / f"tx.4242{suffix}"
        short_path = short_dir / f"tx.4242{suffix}"
        first_client = thread * CLIENTS_PER_THREAD
        tx_no = [0] * CLIENTS_PER_THREAD
        now = START_EPOCH * 1_000_000 + int(uniform() * 1_000_000)
        written = 0
        with long_path.open("w") as long_f, short_path.open("w") as short_f:
            while written < per_thread:
                out = []
                for _ in range(min(BATCH, per_thread - written)):
                    c = int(uniform() * CLIENTS_PER_THREAD)
                    tx_no[c] += 1
                    now += int(uniform() * (2 * mean_gap + 1))
                    out.append(
                        f"{first_client + c} {tx_no[c]} {int(lognormal(mu, sigma))} 0 "
                        f"{now // 1_000_000} {now % 1_000_000}\n"
                    )
                text = "".join(out)
                long_f.write(text)
                if written < short_per_thread:
                    keep = min(len(out), short_per_thread - written)
                    short_f.write(text if keep == len(out) else "".join(out[:keep]))
                written += len(out)


def run_child(argv: list[str]) -> tuple[float, bytes]:
    """Run a program; return its wall-clock seconds and its stdout."""
    started = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, check=True)
    return time.perf_counter() - started, proc.stdout


def peak_rss_kib() -> int:
    """This process's peak resident memory since it started its program (VmHWM).

    Not ru_maxrss: on Linux that also counts the parent's memory the child had before exec.
    """
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise SystemExit("no VmHWM in /proc/self/status")


def child_summarize(paths: list[str]) -> None:
    """In the child: time summarize() alone and report what it found."""
    from pgdyno.pgbench.txlog import summarize

    started = time.perf_counter()
    rows, total = summarize([Path(p) for p in paths])
    elapsed = time.perf_counter() - started
    print(
        json.dumps(
            {
                "elapsed": elapsed,
                "seconds": len(rows),
                "logged": total.logged,
                "p50_ms": total.p50_ms,
                "p99_ms": total.p99_ms,
                "p999_ms": total.p999_ms,
                "max_ms": total.max_ms,
                "peak_kib": peak_rss_kib(),
            }
        )
    )


def child_idle() -> None:
    """In the child: only import the module, for the baseline memory of an interpreter."""
    import pgdyno.pgbench.txlog  # noqa: F401

    print(json.dumps({"peak_kib": peak_rss_kib()}))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--child", choices=["summarize", "idle"], help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "summarize":
        child_summarize(args.files)
        return
    if args.child == "idle":
        child_idle()
        return

    lines = args.lines - args.lines % THREADS
    short_lines = lines // 10 - (lines // 10) % THREADS
    wc = shutil.which("wc")
    if wc is None:
        raise SystemExit("wc is not installed")
    me = [sys.executable, str(Path(__file__).resolve())]
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-txlog-bench-"))
    try:
        long_dir, short_dir = workdir / "long", workdir / "short"
        long_dir.mkdir()
        short_dir.mkdir()
        started = time.perf_counter()
        write_logs(long_dir, short_dir, lines, short_lines)
        long_files = sorted(str(p) for p in long_dir.iterdir())
        short_files = sorted(str(p) for p in short_dir.iterdir())
        size = sum(Path(p).stat().st_size for p in long_files)
        print(
            f"wrote {lines:,} lines ({size / 2**20:.0f} MiB, {THREADS} thread files) and "
            f"{short_lines:,} lines in {time.perf_counter() - started:.1f} s"
        )

        idle_kib = json.loads(run_child([*me, "--child", "idle"])[1])["peak_kib"]
        results = []
        for files, n in ((short_files, short_lines), (long_files, lines)):
            wc_s, wc_out = run_child([wc, "-l", *files])
            counted = int(wc_out.split()[-2])  # the "total" line
            assert counted == n, (counted, n)
            sum_s, out = run_child([*me, "--child", "summarize", *files])
            report = json.loads(out)
            assert report["logged"] == n, (report["logged"], n)
            results.append((n, wc_s, sum_s, report["peak_kib"], report))

        print()
        print(f"{'lines':>11} {'wc -l tx/s':>13} {'summarize tx/s':>15} {'vs wc -l':>13} "
              f"{'summarize() s':>14} {'peak RSS':>10}")  # fmt: skip
        for n, wc_s, sum_s, sum_kib, report in results:
            print(
                f"{n:>11,} {n / wc_s:>13,.0f} {n / sum_s:>15,.0f} {wc_s / sum_s:>12.4f}x "
                f"{report['elapsed']:>14.2f} {sum_kib / 1024:>6.1f} MiB"
            )
        (short_n, *_, short_peak, _), (long_n, *_, long_peak, rep) = results
        print(
            f"\npeak memory, {long_n:,} lines / {short_n:,} lines: {long_peak / short_peak:.2f} "
            f"(an interpreter that only imports the module: {idle_kib / 1024:.1f} MiB)"
        )
        print(
            f"{long_n:,} lines: {rep['seconds']} per-second rows, p50 {rep['p50_ms']} ms, "
            f"p99 {rep['p99_ms']} ms, p99.9 {rep['p999_ms']} ms, max {rep['max_ms']} ms"
        )
        long_wc, long_sum = results[-1][1], results[-1][2]
        print(
            f"log_processing: {long_n / long_sum:,.0f} transactions/s processed, "
            f"{long_wc / long_sum:.4f}x the speed of reading the file with wc -l; peak memory "
            f"{long_peak / 1024:.1f} MiB, {long_peak / short_peak:.2f}x that of a log "
            f"{long_n // short_n}x shorter"
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
