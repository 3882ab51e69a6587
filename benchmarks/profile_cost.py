"""What the on-CPU profile costs: perf record's own CPU over a pgbench run, perf script's time
after it, and the samples it gives; then the run's top functions, as `runs show --profile`
lists them.

    python benchmarks/profile_cost.py [--rounds 3] [--seconds 10] [--clients 2]

Select-only at scale 10 on a throwaway sandbox, profiled by pgdyno's own profiler
(collect/cpu_profile.py). perf's CPU is read from /proc before it is stopped: what it took while
the server was measured (its start, before pgbench, and the writing of its file after it are
outside the window and printed apart). The sampling interrupts taken inside the sampled
processes are not in perf's own CPU: harness_overhead.py --profile-only measures the TPS.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

from throwaway import throwaway_sandbox

from pgdyno.collect.cpu_profile import CpuProfiler
from pgdyno.host.perf import find_perf
from pgdyno.stats.cpu_profile import cpu_profile


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--clients", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    perf = find_perf(os.environ)
    if perf is None:
        raise SystemExit("perf is not installed (Debian: apt-get install linux-perf)")
    cpus = len(os.sched_getaffinity(0))
    with throwaway_sandbox("pgdyno-profile-cost-") as (workdir, binaries, box):
        pgbench = str(binaries.tool("pgbench"))
        subprocess.run([pgbench, "-i", "-q", "-s", "10", box.conninfo()], check=True,
                       capture_output=True)  # fmt: skip
        postmaster = int((box.data_dir / "postmaster.pid").read_text().split()[0])
        found = None
        for i in range(args.rounds):
            profiler = CpuProfiler(perf, postmaster, workdir / f"round-{i}", log=print)
            profiler.start()
            started = profiler.perf_cpu_s() or 0.0
            t0 = time.monotonic()
            out = subprocess.run(
                [pgbench, "-n", "-S", "-c", str(args.clients), "-j", str(args.clients),
                 "-T", str(args.seconds), box.conninfo()],
                capture_output=True, text=True, check=True,
            ).stdout  # fmt: skip
            window = time.monotonic() - t0
            during = (profiler.perf_cpu_s() or 0.0) - started
            t1 = time.monotonic()
            data = profiler.stop()
            after = time.monotonic() - t1
            if data is None:
                raise SystemExit("no profile: see the line above")
            found = cpu_profile(data.samples, data.types, data.sample_hz)
            tps = next(line for line in out.splitlines() if line.startswith("tps"))
            print(f"round {i + 1}: perf record {started:.2f} s CPU to start, {during:.3f} s "
                  f"over the {window:.1f} s run ({100 * during / window / cpus:.2f}% of "
                  f"{cpus} CPUs); stop and perf script {after:.2f} s; "
                  f"{len(data.samples):,} samples; {tps}")  # fmt: skip
        if found is not None:
            print("top functions of the last round (% of the server's CPU samples):")
            for f in sorted(found.top, key=lambda f: -f.share)[:10]:
                kind = " (kernel)" if f.kernel else ""
                print(f"  {100 * f.share:5.1f}  {f.process}: {f.function}{kind}")
            print(f"  kernel {100 * found.kernel_share:.1f}% of the samples")


if __name__ == "__main__":
    main()
