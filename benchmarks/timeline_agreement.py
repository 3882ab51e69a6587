"""Timeline agreement: pgdyno's per-second series against tools run beside it.

    python benchmarks/timeline_agreement.py [--seconds 60] [--remote]

Runs one tpcb-like `pgdyno bench` (checkpoint_timeout=30s, so checkpoints fall inside the run)
with `iostat -x 1` and `vmstat 1` (sysstat, procps) running beside it, and compares, second by
second, what each reports: TPS against pgbench's own `-P 1`, disk MB/s, IOPS and utilisation
of the data device against iostat, CPU split and context switches against vmstat.

Each tool ticks on its own phase within the second, so single seconds differ by whatever moved
between the two ticks; the run means over the common seconds must agree closely. Prints, per
metric: seconds compared, mean of each side, the ratio of the means and the median absolute
per-second difference. Not a speed benchmark: an acceptance check with figures.

With --remote, the same host is also reached over SSH (Debian's sshd on 127.0.0.1, started with
throwaway keys by tests/sshd.py, as root): `pgdyno bench --ssh` records the OS timeline through
its remote agent while pgdyno's local sampler records the same seconds in this process; the run
means of the two must agree within 2% (issue 22).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path

Series = dict[int, float]


def iostat_series(text: str, device: str) -> dict[str, Series]:
    """iostat -o JSON reports, each stamped when printed: it covers the second before."""
    out: dict[str, Series] = {"write_mbps": {}, "read_mbps": {}, "w_iops": {}, "util_pct": {}}
    doc = json.loads(text)
    for report in doc["sysstat"]["hosts"][0]["statistics"]:
        stamp = datetime.strptime(report["timestamp"], "%m/%d/%y %H:%M:%S").replace(tzinfo=UTC)
        t = int(stamp.timestamp()) - 1
        for disk in report["disk"]:
            if disk["disk_device"] == device:
                out["write_mbps"][t] = disk["wkB/s"] / 1024
                out["read_mbps"][t] = disk["rkB/s"] / 1024
                out["w_iops"][t] = disk["w/s"]
                out["util_pct"][t] = disk["util"]
    return out


def vmstat_series(text: str) -> dict[str, Series]:
    """vmstat -t -n rows; the first row is the average since boot and is skipped."""
    out: dict[str, Series] = {k: {} for k in ("us", "sy", "wa", "id", "cs")}
    rows = [line.split() for line in text.splitlines() if line[:1] == " " or line[:1].isdigit()]
    rows = [r for r in rows if len(r) >= 19 and r[0].isdigit()]
    for r in rows[1:]:
        stamp = datetime.fromisoformat(f"{r[17]} {r[18]}").replace(tzinfo=UTC)
        t = int(stamp.timestamp()) - 1
        out["us"][t], out["sy"][t], out["id"][t], out["wa"][t] = (
            float(r[12]), float(r[13]), float(r[14]), float(r[15]),
        )  # fmt: skip
        out["cs"][t] = float(r[11])
    return out


def agreement(name: str, ours: Mapping[int, float], theirs: Mapping[int, float]) -> str:
    common = sorted(set(ours) & set(theirs))[1:-1]  # edges: a tool started or stopped mid-second
    if not common:
        return f"{name:42} no common seconds"
    a = [ours[t] for t in common]
    b = [theirs[t] for t in common]
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    ratio = mean_a / mean_b if mean_b else float("nan")
    mad = statistics.median(abs(x - y) for x, y in zip(a, b, strict=True))
    return (
        f"{name:42} {len(common):3d} s  pgdyno {mean_a:10.2f}  other {mean_b:10.2f}  "
        f"ratio {ratio:6.3f}  median |diff| {mad:8.2f}"
    )


REMOTE_METRICS = (
    "cpu.user_pct", "cpu.system_pct", "cpu.idle_pct", "sys.context_switches_per_s",
    "mem.dirty_mb", "mem.free_mb",
)  # fmt: skip


def remote_against_local(seconds: int) -> None:
    """The remote agent's series against the local sampler's, on one host at once."""
    sys.path.insert(0, str(Path(__file__).parents[1] / "tests"))
    from pgdyno.collect.sampler import TimelineSampler
    from sshd import SshServer  # the test suite's throwaway sshd (needs root)

    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-agree-", dir="/tmp"))
    workdir.chmod(0o755)  # the sandbox user must reach it
    pgdyno = [sys.executable, "-m", "pgdyno"]
    try:
        with SshServer("agree-remote") as server:
            home = server.client_home("agree")
            subprocess.run([*pgdyno, "sandbox", "start", "--pg-version", "18", "--workdir",
                            str(workdir)], check=True, capture_output=True)  # fmt: skip
            status = subprocess.run(
                [*pgdyno, "sandbox", "status", "--json", "--workdir", str(workdir)],
                check=True, capture_output=True, text=True,
            )  # fmt: skip
            box = json.loads(status.stdout)[0]
            dsn = f"host={box['socket_dir']} port={box['port']} user=postgres dbname=postgres"
            local = TimelineSampler(log=print, proc_root=Path("/proc"))
            local.start()
            try:
                result = subprocess.run(
                    [*pgdyno, "bench", "--ssh", "agree", "--dsn", dsn, "--workdir", str(workdir),
                     "-w", "tpcb-like", "-s", "small", "-c", "2", "-T", str(seconds), "--json"],
                    capture_output=True, text=True, env={**os.environ, "HOME": str(home.home)},
                )  # fmt: skip
            finally:
                timeline = local.stop()
    finally:
        subprocess.run([*pgdyno, "sandbox", "destroy", "--workdir", str(workdir), "--yes"],
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(workdir, ignore_errors=True)
    if result.returncode != 0:
        sys.exit(f"pgdyno bench --ssh failed: {result.stderr.strip()}")
    run = json.loads(result.stdout)[0]
    mine: dict[str, Series] = {}
    for t, name, value in timeline.samples:
        mine.setdefault(name, {})[t] = value
    disk = run["devices"]["data"]["disk"] or run["devices"]["data"]["name"]
    print(f"remote agent (over SSH, host {run['host']['hostname']}) against the local sampler, "
          f"tpcb-like {seconds} s, pgbench on the remote side:")  # fmt: skip
    for name in (*REMOTE_METRICS, f"disk.{disk}.write_mbps", f"disk.{disk}.w_iops"):
        theirs = {int(t): v for t, v in run["samples"].get(name, {}).items()}
        print(agreement(f"{name} remote vs local", theirs, mine.get(name, {})))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--remote", action="store_true", help="also over SSH (root, sshd)")
    args = parser.parse_args()
    if args.remote:
        remote_against_local(args.seconds)
        return
    env = {**os.environ, "TZ": "UTC", "LC_ALL": "C"}
    workdir = Path(tempfile.mkdtemp(prefix="pgdyno-agree-", dir="/tmp"))
    workdir.chmod(0o755)  # the sandbox user must reach it
    try:
        argv = [
            sys.executable, "-m", "pgdyno", "bench", "--workdir", str(workdir),
            "--pg-version", "18", "-w", "tpcb-like", "-s", "small", "-c", "2",
            "-T", str(args.seconds), "--warmup", "0", "--set", "checkpoint_timeout=30s",
            "--pgbench-progress", "--json",
        ]  # fmt: skip
        iostat = subprocess.Popen(
            ["iostat", "-x", "-d", "-t", "-y", "-o", "JSON", "1"],
            stdout=subprocess.PIPE, text=True, env=env,
        )  # fmt: skip
        vmstat = subprocess.Popen(
            ["vmstat", "-t", "-n", "1"], stdout=subprocess.PIPE, text=True, env=env
        )
        try:
            result = subprocess.run(argv, capture_output=True, text=True)
        finally:
            for tool in (iostat, vmstat):
                tool.terminate()
        io_text, vm_text = iostat.communicate()[0], vmstat.communicate()[0]
    finally:
        # pgdyno bench stops the sandbox it started; destroy removes the cluster too.
        pgdyno = [sys.executable, "-m", "pgdyno"]
        subprocess.run([*pgdyno, "sandbox", "destroy", "--workdir", str(workdir), "--yes"],
                       capture_output=True, check=False)  # fmt: skip
        shutil.rmtree(workdir, ignore_errors=True)
    if result.returncode != 0:
        sys.exit(f"pgdyno bench failed: {result.stderr.strip()}")
    # iostat is cut off mid-document by terminate: close the JSON it was writing.
    io_text = io_text.rstrip().rstrip(",") + "]}]}}"
    run = json.loads(result.stdout)[0]
    device = run["devices"]["data"]["disk"] or run["devices"]["data"]["name"]
    samples: dict[str, Series] = {
        k: {int(t): v for t, v in s.items()} for k, s in run["samples"].items()
    }
    tps = {row["t"]: row["tps"] for row in run["seconds"]}
    io, vm = iostat_series(io_text, device), vmstat_series(vm_text)
    events = [e["kind"] for e in run["events"]]
    print(f"tpcb-like, {args.seconds} s, data device {device}; checkpoint events: {events}")
    print(agreement("TPS vs pgbench -P 1", tps, samples["pgbench.progress_tps"]))
    for ours, theirs in (("write_mbps", "write_mbps"), ("read_mbps", "read_mbps"),
                         ("w_iops", "w_iops"), ("util_pct", "util_pct")):  # fmt: skip
        print(agreement(f"disk {ours} vs iostat", samples[f"disk.{device}.{ours}"], io[theirs]))
    for ours, theirs in (("cpu.user_pct", "us"), ("cpu.system_pct", "sy"),
                         ("cpu.iowait_pct", "wa"), ("cpu.idle_pct", "id"),
                         ("sys.context_switches_per_s", "cs")):  # fmt: skip
        print(agreement(f"{ours} vs vmstat {theirs}", samples[ours], vm[theirs]))


if __name__ == "__main__":
    main()
