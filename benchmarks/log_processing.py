"""Per-transaction log processing: pgdyno's summarize() against the floor, `wc -l`, on the same
files, and summarize()'s peak memory on a short and a long log.

    .venv/bin/python benchmarks/log_processing.py [--lines 10000000]
    .venv/bin/python benchmarks/log_processing.py --scripts 5 [--baseline REV] [--repeat 3]

Writes a realistic log into a temporary directory (two thread files in pgbench's format, 16
clients, latencies lognormal around 1 ms, 20,000 transactions per second), plus a log of a
tenth of its length. Each measurement runs in a child process of its own, so its peak memory
(VmHWM, read by the child) is that child's alone. Deletes its files. Times are wall-clock on a
shared machine: read the ratios, not the seconds.

With ``--scripts N`` (N > 1) it also writes logs of the same lengths as a weighted N-script run
with ``--max-tries`` would (script numbers 0 to N-1, TPC-C's 45/43/4/4/4 mix for five, a
retries column, 0.5% serialization failures), read with ``with_retries=True``, and prints how
fast they are read against the one-script log. ``--baseline REV`` also times the code of git
revision REV (its ``src/`` unpacked into the temporary directory) on the one-script log: the
before/after ratio in the same run. ``--repeat K`` times each case K times, interleaved, and
keeps the fastest; these cases are timed in CPU seconds of summarize() (process time), which
other work on the machine disturbs less than wall-clock time.
"""

from __future__ import annotations

import argparse
import inspect
import io
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TPS = 20_000
THREADS = 2
CLIENTS_PER_THREAD = 8
START_EPOCH = 1_795_265_183
BATCH = 100_000
TPCC_WEIGHTS = (45, 43, 4, 4, 4)
RETRIED = 0.05  # share of transactions of a multi-script log retried (1 to 3 times)
FAILED = 0.005  # ... and failed after 9 retries


def script_line_tail(rnd: random.Random, scripts: int) -> tuple[int, str, str]:
    """A multi-script line's script number, failure word (or "") and retries field."""
    weights = TPCC_WEIGHTS if scripts == len(TPCC_WEIGHTS) else (1,) * scripts
    script = rnd.choices(range(scripts), weights)[0]
    draw = rnd.random()
    if draw < FAILED:
        return script, "serialization", " 9"
    return script, "", f" {rnd.randint(1, 3)}" if draw < RETRIED else " 0"


def write_logs(
    long_dir: Path, short_dir: Path, lines: int, short_lines: int, scripts: int = 1
) -> None:
    """Write `lines` transactions over THREADS files; the first `short_lines` also to short_dir.

    Each thread completes TPS / THREADS transactions a second, at random gaps; latencies are
    lognormal with a median of 1 ms (a long tail: p99.9 is about 5 ms). With several scripts,
    script k's median is (1 + k / 2) ms and each line has a retries field; `long_dir`/twin
    gets the same long log with every script number 0 (a one-script run's log, line for line).
    """
    rnd = random.Random(42)
    lognormal, uniform = rnd.lognormvariate, rnd.random
    mu, sigma = math.log(1000.0), 0.55
    mus = [math.log(1000.0 * (1 + k / 2)) for k in range(scripts)]
    mean_gap = 1_000_000 * THREADS // TPS  # µs between two completions of one thread
    per_thread, short_per_thread = lines // THREADS, short_lines // THREADS
    for thread in range(THREADS):
        suffix = "" if thread == 0 else f".{thread}"
        long_path = long_dir / f"tx.4242{suffix}"
        short_path = short_dir / f"tx.4242{suffix}"
        twin_path = long_dir / "twin" / f"tx.4242{suffix}" if scripts > 1 else None
        first_client = thread * CLIENTS_PER_THREAD
        tx_no = [0] * CLIENTS_PER_THREAD
        now = START_EPOCH * 1_000_000 + int(uniform() * 1_000_000)
        written = 0
        if twin_path is not None:
            twin_path.parent.mkdir(exist_ok=True)
        with (
            long_path.open("w") as long_f,
            short_path.open("w") as short_f,
            open(os.devnull if twin_path is None else twin_path, "w") as twin_f,  # noqa: PTH123
        ):
            while written < per_thread:
                out, twin = [], []
                for _ in range(min(BATCH, per_thread - written)):
                    c = int(uniform() * CLIENTS_PER_THREAD)
                    tx_no[c] += 1
                    now += int(uniform() * (2 * mean_gap + 1))
                    if scripts == 1:
                        out.append(
                            f"{first_client + c} {tx_no[c]} {int(lognormal(mu, sigma))} 0 "
                            f"{now // 1_000_000} {now % 1_000_000}\n"
                        )
                        continue
                    k, word, retries = script_line_tail(rnd, scripts)
                    head = f"{first_client + c} {tx_no[c]} {word or int(lognormal(mus[k], sigma))}"
                    tail = f"{now // 1_000_000} {now % 1_000_000}{retries}\n"
                    out.append(f"{head} {k} {tail}")
                    twin.append(f"{head} 0 {tail}")
                text = "".join(out)
                long_f.write(text)
                twin_f.write("".join(twin))
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


def child_summarize(paths: list[str], with_retries: bool) -> None:
    """In the child: time summarize() alone and report what it found."""
    import pgdyno.pgbench.txlog as txlog

    options: dict[str, bool] = {}
    if with_retries:  # a revision before with_retries read a 7th field as retries so
        new = "with_retries" in inspect.signature(txlog.summarize).parameters
        options = {"with_retries": True} if new else {"with_lag": False}
    started, cpu_started = time.perf_counter(), time.process_time()
    rows, total = txlog.summarize([Path(p) for p in paths], **options)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    by_script = getattr(total, "by_script", ())
    print(
        json.dumps(
            {
                "elapsed": elapsed,
                "cpu": cpu,
                "module": txlog.__file__,
                "seconds": len(rows),
                "logged": total.logged,
                "p50_ms": total.p50_ms,
                "p99_ms": total.p99_ms,
                "p999_ms": total.p999_ms,
                "max_ms": total.max_ms,
                "failed": total.failed,
                "scripts": [[s.transactions, s.p50_ms, s.retries] for s in by_script],
                "peak_kib": peak_rss_kib(),
            }
        )
    )


def child_idle() -> None:
    """In the child: only import the module, for the baseline memory of an interpreter."""
    import pgdyno.pgbench.txlog  # noqa: F401

    print(json.dumps({"peak_kib": peak_rss_kib()}))


def unpack_revision(rev: str, into: Path) -> Path:
    """The `src/` of git revision `rev` of this repository, unpacked under `into`."""
    repo = Path(__file__).resolve().parent.parent
    git = shutil.which("git")
    if git is None:
        raise SystemExit("--baseline needs git")
    archive = subprocess.run(
        [git, "-C", str(repo), "archive", "--format=tar", rev, "src"],
        stdout=subprocess.PIPE,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into / "src"


@dataclass
class Case:
    """One timed configuration: which code reads which log."""

    name: str
    files: list[str]
    lines: int
    with_retries: bool = False
    pythonpath: Path | None = None  # a baseline revision's src/
    best_s: float = math.inf
    peak_kib: int = 0
    report: dict[str, object] | None = None

    def run(self, me: list[str]) -> None:
        env = dict(os.environ)
        if self.pythonpath is not None:
            env["PYTHONPATH"] = str(self.pythonpath)
        argv = [*me, "--child", "summarize", *(["--with-retries"] if self.with_retries else [])]
        out = subprocess.run([*argv, *self.files], stdout=subprocess.PIPE, check=True, env=env)
        report = json.loads(out.stdout)
        # summarize()'s CPU time alone: not the interpreter's start, nor the time it waited for
        # a CPU on a shared machine
        elapsed = float(report["cpu"])
        assert report["logged"] == self.lines, (report["logged"], self.lines)
        if self.pythonpath is not None:
            assert str(report["module"]).startswith(str(self.pythonpath)), report["module"]
        if elapsed < self.best_s:
            self.best_s, self.peak_kib, self.report = elapsed, report["peak_kib"], report


def files_of(directory: Path) -> list[str]:
    return sorted(str(p) for p in directory.iterdir() if p.is_file())


def memory_table(
    me: list[str], wc: str, logs: list[tuple[list[str], int]], with_retries: bool = False
) -> None:
    """summarize() against wc -l on a short and a long log, and its peak memory on each."""
    retries = ["--with-retries"] if with_retries else []
    idle_kib = json.loads(run_child([*me, "--child", "idle"])[1])["peak_kib"]
    results = []
    for files, n in logs:
        wc_s, wc_out = run_child([wc, "-l", *files])
        counted = int(wc_out.split()[-2])  # the "total" line
        assert counted == n, (counted, n)
        sum_s, out = run_child([*me, "--child", "summarize", *retries, *files])
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


def scripts_table(
    me: list[str], cases: list[Case], ratios: list[tuple[Case, Case]], repeat: int
) -> None:
    """Time every case `repeat` times, interleaved; print the fastest of each and the ratios
    of their speeds."""
    for _ in range(repeat):
        for case in cases:
            case.run(me)
    print(f"\n{'case (best of ' + str(repeat) + ')':<44} {'lines':>11} {'CPU s':>7} {'tx/s':>11} "
          f"{'peak RSS':>10}")  # fmt: skip
    for case in cases:
        print(
            f"{case.name:<44} {case.lines:>11,} {case.best_s:>7.2f} "
            f"{case.lines / case.best_s:>11,.0f} {case.peak_kib / 1024:>6.1f} MiB"
        )
    print()
    for a, b in ratios:
        print(f"speed, {a.name} / {b.name}: {b.best_s / a.best_s:.3f}")
    for case in cases:
        if case.with_retries and case.report is not None:
            print(
                f"{case.name}: per script [successful, p50 ms, retries]: {case.report['scripts']}"
            )


def build_cases(
    args: argparse.Namespace, dirs: dict[str, Path], lines: int
) -> tuple[list[Case], list[tuple[Case, Case]]]:
    """The cases asked for and the pairs whose speeds to compare."""
    one = Case("1 script", files_of(dirs["long"]), lines)
    cases, ratios = [one], []
    base = None
    if args.baseline is not None:
        base = unpack_revision(args.baseline, dirs["long"].parent / "baseline")
        before = Case(f"1 script, {args.baseline}", one.files, lines, pythonpath=base)
        cases.append(before)
        ratios.append((one, before))
    if args.scripts > 1:
        many, twin = files_of(dirs["long_n"]), files_of(dirs["long_n"] / "twin")
        scripts = Case(f"{args.scripts} scripts, retries", many, lines, True)
        same = Case("same lines, all script 0", twin, lines, True)
        cases += [scripts, same]
        ratios.append((scripts, same))
        if base is not None:
            same_before = Case(
                f"same lines, all script 0, {args.baseline}", twin, lines, True, base
            )
            cases.append(same_before)
            ratios += [(same, same_before), (scripts, same_before)]
    return cases, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    parser.add_argument("--scripts", type=int, default=1, help="also time an N-script log")
    parser.add_argument("--baseline", metavar="REV", help="also time git revision REV")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", choices=["summarize", "idle"], help=argparse.SUPPRESS)
    parser.add_argument("--with-retries", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("files", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "summarize":
        child_summarize(args.files, args.with_retries)
        return
    if args.child == "idle":
        child_idle()
        return
    if not 1 <= args.scripts <= 10:
        raise SystemExit("--scripts must be from 1 to 10")

    lines = args.lines - args.lines % THREADS
    short_lines = lines // 10 - (lines // 10) % THREADS
    wc = shutil.which("wc")
    if wc is None:
        raise SystemExit("wc is not installed")
    me = [sys.executable, str(Path(__file__).resolve())]
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-txlog-bench-"))
    try:
        dirs = {name: workdir / name for name in ("long", "short", "long_n", "short_n")}
        for d in dirs.values():
            d.mkdir()
        started = time.perf_counter()
        write_logs(dirs["long"], dirs["short"], lines, short_lines)
        if args.scripts > 1:
            write_logs(dirs["long_n"], dirs["short_n"], lines, short_lines, args.scripts)
        size = sum(Path(p).stat().st_size for p in files_of(dirs["long"]))
        print(
            f"wrote {lines:,} lines ({size / 2**20:.0f} MiB, {THREADS} thread files) and "
            f"{short_lines:,} lines in {time.perf_counter() - started:.1f} s"
            + (f", for 1 and for {args.scripts} scripts" if args.scripts > 1 else "")
        )
        memory_table(
            me, wc, [(files_of(dirs["short"]), short_lines), (files_of(dirs["long"]), lines)]
        )
        if args.scripts > 1:  # the same for the multi-script log: memory stays bounded
            memory_table(
                me,
                wc,
                [(files_of(dirs["short_n"]), short_lines), (files_of(dirs["long_n"]), lines)],
                True,
            )
        cases, ratios = build_cases(args, dirs, lines)
        if ratios:
            scripts_table(me, cases, ratios, args.repeat)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
