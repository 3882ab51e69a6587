"""The OS sampler on /proc snapshots recorded on this VM (tests/data/proc/README.md).

Expected rates are computed here from counters copied by hand out of the recorded files, with
the iostat/vmstat formulas written out, and compared with `iostat -x` and `vmstat` output
recorded over the same second.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pgdyno.collect.procfs import (
    CpuTimes,
    DiskStats,
    Pressure,
    ProcReader,
    ProcSnapshot,
    ProcStat,
    os_sample,
    parse_diskstats,
    parse_pressure,
    parse_stat,
    parse_vmstat,
    read_snapshot,
)
from pgdyno.errors import ParseError

DATA = Path(__file__).parent.parent / "data" / "proc"
SCENARIOS = ("disk-write", "idle")

# disk-write, copied by hand from t0/ and t1/.
AT = (3005.395764, 3006.516583)
# cpu line: user nice system idle iowait irq softirq steal
CPU = (
    (126844, 0, 99334, 350408, 10506, 0, 1386, 1323),
    (126850, 0, 99395, 350508, 10559, 0, 1389, 1323),
)
CTXT = (38136933, 38140521)
# vda: reads sectors_read read_ms writes sectors_written write_ms io_ms weighted_io_ms
VDA = (
    (95756, 4496522, 118197, 1500801, 502502464, 1556244, 188792, 1732393),
    (95763, 4496578, 118198, 1502403, 504142912, 1557436, 189420, 1733586),
)
PGPGOUT = (251252256, 252071456)
IO_SOME_US = (94431786, 94967101)
IO_FULL_US = (75767888, 76267109)
CPU_SOME_US = (206379487, 206418793)
# t1 meminfo, kB
DIRTY_KB, CACHED_KB, SRECLAIMABLE_KB, AVAILABLE_KB = 560, 800388, 102256, 24273640


def snapshot(scenario: str, when: str) -> ProcSnapshot:
    root = DATA / scenario / when
    at = float((root / "at").read_text())
    return read_snapshot(root, clock=lambda: at)


def sample(scenario: str) -> dict[str, float]:
    return os_sample(snapshot(scenario, "t0"), snapshot(scenario, "t1"))


def recorded_iostat(scenario: str, device: str) -> dict[str, float]:
    """The interval report (the last one) of `iostat -x 1 2`, by column name."""
    lines = (DATA / scenario / "iostat.txt").read_text().splitlines()
    header = max(i for i, line in enumerate(lines) if line.startswith("Device"))
    names = lines[header].split()[1:]
    row = next(line.split() for line in lines[header + 1 :] if line.split()[:1] == [device])
    return dict(zip(names, map(float, row[1:]), strict=True))


def recorded_vmstat(scenario: str) -> dict[str, float]:
    lines = (DATA / scenario / "vmstat.txt").read_text().splitlines()
    return dict(zip(lines[1].split(), map(float, lines[-1].split()), strict=True))


# Parsers


def test_parse_stat_reads_the_cpu_line_and_counters():
    stat = parse_stat((DATA / "disk-write/t0/stat").read_text())
    assert stat.cpu == CpuTimes(*CPU[0])
    assert stat.ctxt == CTXT[0]
    assert (stat.procs_running, stat.procs_blocked) == (1, 1)


def test_parse_stat_pads_old_kernels_and_ignores_guest():
    stat = parse_stat("cpu 1 2 3 4\nctxt 5\nprocs_running 1\nprocs_blocked 0\n")
    assert stat.cpu == CpuTimes(1, 2, 3, 4, 0, 0, 0, 0)
    with_guest = parse_stat("cpu 1 2 3 4 5 6 7 8 900 900\nctxt 5\nprocs_running 1\nprocs_blocked 0")
    assert with_guest.cpu.user == 1  # guest ticks are already inside user


def test_parse_diskstats_reads_all_20_fields_of_a_6_18_kernel():
    disks = parse_diskstats((DATA / "disk-write/t0/diskstats").read_text())
    vda = disks["vda"]
    assert (vda.major, vda.minor) == (254, 0)
    reads, sectors_read, read_ms, writes, sectors_written, write_ms, io_ms, weighted = VDA[0]
    assert (vda.reads, vda.sectors_read, vda.read_ms) == (reads, sectors_read, read_ms)
    assert (vda.writes, vda.sectors_written, vda.write_ms) == (writes, sectors_written, write_ms)
    assert (vda.reads_merged, vda.writes_merged, vda.in_flight) == (11893, 109063, 2)
    assert (vda.io_ms, vda.weighted_io_ms) == (io_ms, weighted)
    assert (vda.discards, vda.discards_merged, vda.sectors_discarded, vda.discard_ms) == (
        176630,
        33,
        332240504,
        31025,
    )
    assert (vda.flushes, vda.flush_ms) == (593807, 26925)
    assert {"loop0", "loop7", "zram0"} <= disks.keys()


def test_parse_diskstats_leaves_missing_discard_and_flush_fields_none():
    old = parse_diskstats("   8       0 sda 1 2 3 4 5 6 7 8 9 10 11\n")["sda"]
    assert (old.weighted_io_ms, old.discards, old.flushes) == (11, None, None)
    no_flush = parse_diskstats("8 0 sda 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15\n")["sda"]
    assert (no_flush.discard_ms, no_flush.flushes) == (15, None)


def test_parse_vmstat_and_pressure():
    vmstat = parse_vmstat((DATA / "disk-write/t1/vmstat").read_text())
    assert vmstat["pgpgout"] == PGPGOUT[1]
    assert vmstat["pswpin"] == 0
    io = parse_pressure((DATA / "disk-write/t1/pressure/io").read_text())
    assert io == Pressure(IO_SOME_US[1], IO_FULL_US[1])
    assert parse_pressure("some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n").full_total_us is None


def test_read_snapshot_reads_every_file_under_the_root():
    snap = snapshot("disk-write", "t1")
    assert snap.at == AT[1]
    assert snap.meminfo["Dirty"] == DIRTY_KB * 1024
    assert set(snap.pressure) == {"cpu", "io", "memory"}
    assert snap.disks["vda"].sectors_written == VDA[1][4]


def test_read_snapshot_without_pressure_gives_an_empty_dict(tmp_path: Path):
    for name in ("stat", "diskstats", "meminfo", "vmstat"):
        (tmp_path / name).write_text((DATA / "idle/t0" / name).read_text())
    snap = read_snapshot(tmp_path, clock=lambda: 1.0)
    assert snap.pressure == {}
    assert "vda" in snap.disks


def copy_recorded(scenario: str, when: str, root: Path) -> None:
    """The recorded files written as new files into `root` (replacing those there)."""
    source = DATA / scenario / when
    for path in source.rglob("*"):
        if path.is_file() and path.name != "at":
            target = root / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.unlink(missing_ok=True)
            target.write_text(path.read_text())


def test_a_reader_reads_the_files_at_their_paths_at_each_snapshot(tmp_path: Path):
    copy_recorded("disk-write", "t0", tmp_path)
    times = iter(AT)
    reader = ProcReader(tmp_path, ["vda"], clock=lambda: next(times))
    first = reader.snapshot()
    copy_recorded("disk-write", "t1", tmp_path)
    second = reader.snapshot()
    assert first.stat.ctxt == CTXT[0] and second.stat.ctxt == CTXT[1]
    assert second.vmstat["pgpgout"] == PGPGOUT[1]
    expected = {key: value for key, value in sample("disk-write").items() if "zram0" not in key}
    assert os_sample(first, second) == expected


def test_a_reader_keeps_only_what_the_metrics_use():
    snap = snapshot("disk-write", "t1")
    only_vda = ProcReader(DATA / "disk-write" / "t1", ["vda"]).snapshot()
    assert set(snap.disks) == {"vda", "zram0"}  # ram* and loop* are never sampled
    assert set(only_vda.disks) == {"vda"}
    assert set(snap.vmstat) == {"pswpin", "pswpout", "pgpgin", "pgpgout"}
    assert set(snap.meminfo) == {
        "Dirty", "Writeback", "MemFree", "MemAvailable", "Cached", "SReclaimable", "SwapTotal",
        "SwapFree",
    }  # fmt: skip
    full = parse_vmstat((DATA / "disk-write/t1/vmstat").read_text())
    assert len(full) > 100 and all(full[key] == value for key, value in snap.vmstat.items())


def test_a_file_larger_than_the_buffer_is_read_whole(tmp_path: Path):
    copy_recorded("idle", "t0", tmp_path)
    disks = (tmp_path / "diskstats").read_text()
    many = "".join(f"   7 {i} loop{i} 1 2 3 4 5 6 7 8 9 10 11\n" for i in range(3000))
    (tmp_path / "diskstats").write_text(many + disks)
    assert len(many) > 64 * 1024
    reader = ProcReader(tmp_path)
    assert set(reader.snapshot().disks) == {"vda", "zram0"}
    assert set(reader.snapshot().disks) == {"vda", "zram0"}  # with the grown buffer


def test_a_reader_on_this_machines_proc():
    reader = ProcReader(Path("/proc"))
    first, second = reader.snapshot(), reader.snapshot()
    assert second.stat.ctxt >= first.stat.ctxt > 0
    assert set(first.vmstat) == set(second.vmstat) == {"pswpin", "pswpout", "pgpgin", "pgpgout"}
    assert first.meminfo["MemAvailable"] > 0


@pytest.mark.parametrize(
    ("parser", "text", "file"),
    [
        (parse_stat, "hello world\n", "/proc/stat"),
        (parse_stat, "cpu  1 2 x 4\nctxt 1\nprocs_running 1\nprocs_blocked 0\n", "/proc/stat"),
        (parse_stat, "cpu  1 2 3 4\nprocs_running 1\nprocs_blocked 0\n", "/proc/stat"),
        (parse_diskstats, "8 0 sda 1 2 3\n", "/proc/diskstats"),
        (parse_diskstats, "8 0 sda 1 2 3 4 5 6 seven 8 9 10 11\n", "/proc/diskstats"),
        (parse_vmstat, "pgpgin twelve\n", "/proc/vmstat"),
        (parse_vmstat, "<html>\n", "/proc/vmstat"),
        (parse_pressure, "some avg10=0.00 avg60=0.00\n", "/proc/pressure"),
        (parse_pressure, "full avg10=0.00 total=3\n", "/proc/pressure"),
        (parse_pressure, "some total=abc\n", "/proc/pressure"),
    ],
)
def test_garbage_raises_parse_error_naming_the_file(parser, text, file):
    with pytest.raises(ParseError, match=file):
        parser(text)


def test_read_snapshot_without_proc_stat_raises_parse_error(tmp_path: Path):
    with pytest.raises(ParseError, match="stat"):
        read_snapshot(tmp_path)


# Rates


def test_os_sample_matches_the_iostat_and_vmstat_formulas_by_hand():
    got = sample("disk-write")
    seconds = AT[1] - AT[0]

    d = [after - before for before, after in zip(CPU[0], CPU[1], strict=True)]
    user, nice, system, idle, iowait, irq, softirq, steal = d
    total = sum(d)
    assert got["cpu.user_pct"] == pytest.approx(100 * user / total)
    assert got["cpu.nice_pct"] == pytest.approx(100 * nice / total)
    assert got["cpu.system_pct"] == pytest.approx(100 * (system + irq + softirq) / total)
    assert got["cpu.iowait_pct"] == pytest.approx(100 * iowait / total)
    assert got["cpu.steal_pct"] == pytest.approx(100 * steal / total)
    assert got["cpu.idle_pct"] == pytest.approx(100 * idle / total)
    assert got["sys.context_switches_per_s"] == pytest.approx((CTXT[1] - CTXT[0]) / seconds)
    assert (got["sys.procs_running"], got["sys.procs_blocked"]) == (2, 1)

    reads, sectors_r, read_ms, writes, sectors_w, write_ms, io_ms, weighted = (
        after - before for before, after in zip(VDA[0], VDA[1], strict=True)
    )
    assert got["disk.vda.r_iops"] == pytest.approx(reads / seconds)
    assert got["disk.vda.w_iops"] == pytest.approx(writes / seconds)
    assert got["disk.vda.read_kbps"] == pytest.approx(sectors_r * 512 / 1024 / seconds)
    assert got["disk.vda.write_kbps"] == pytest.approx(sectors_w * 512 / 1024 / seconds)
    assert got["disk.vda.write_mbps"] == pytest.approx(sectors_w * 512 / 1024**2 / seconds)
    assert got["disk.vda.r_await_ms"] == pytest.approx(read_ms / reads)
    assert got["disk.vda.w_await_ms"] == pytest.approx(write_ms / writes)
    assert got["disk.vda.rareq_sz_kb"] == pytest.approx(sectors_r / 2 / reads)
    assert got["disk.vda.wareq_sz_kb"] == pytest.approx(sectors_w / 2 / writes)
    assert got["disk.vda.aqu_sz"] == pytest.approx(weighted / 1000 / seconds)
    assert got["disk.vda.util_pct"] == pytest.approx(100 * io_ms / 1000 / seconds)

    assert got["mem.dirty_mb"] == pytest.approx(DIRTY_KB / 1024)
    assert got["mem.cached_mb"] == pytest.approx((CACHED_KB + SRECLAIMABLE_KB) / 1024)
    assert got["mem.available_mb"] == pytest.approx(AVAILABLE_KB / 1024)
    assert got["mem.writeback_mb"] == 0
    assert got["swap.used_mb"] == 0
    assert got["vm.pgpgout_kb_per_s"] == pytest.approx((PGPGOUT[1] - PGPGOUT[0]) / seconds)
    assert got["vm.pswpout_per_s"] == 0
    assert got["psi.io.some_pct"] == pytest.approx(
        100 * (IO_SOME_US[1] - IO_SOME_US[0]) / 1e6 / seconds
    )
    assert got["psi.io.full_pct"] == pytest.approx(
        100 * (IO_FULL_US[1] - IO_FULL_US[0]) / 1e6 / seconds
    )
    assert got["psi.cpu.some_pct"] == pytest.approx(
        100 * (CPU_SOME_US[1] - CPU_SOME_US[0]) / 1e6 / seconds
    )
    assert got["psi.memory.some_pct"] == 0
    assert "psi.cpu.full_pct" not in got


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_cpu_percentages_sum_to_100(scenario):
    got = sample(scenario)
    parts = ("user", "nice", "system", "iowait", "steal", "idle")
    assert sum(got[f"cpu.{part}_pct"] for part in parts) == pytest.approx(100, abs=0.5)


def test_disk_write_agrees_with_iostat_and_vmstat_of_the_same_second():
    got = sample("disk-write")
    iostat = recorded_iostat("disk-write", "vda")
    assert iostat["wkB/s"] > 100_000  # the recording did catch dd
    assert 0.5 < got["disk.vda.write_kbps"] / iostat["wkB/s"] < 2
    assert 0.5 < got["disk.vda.w_iops"] / iostat["w/s"] < 2
    assert got["disk.vda.read_kbps"] < 0.001 * got["disk.vda.write_kbps"]
    assert got["disk.vda.wareq_sz_kb"] == pytest.approx(iostat["wareq-sz"], rel=0.1)
    vmstat = recorded_vmstat("disk-write")
    assert 0.5 < got["vm.pgpgout_kb_per_s"] / vmstat["bo"] < 2
    assert got["cpu.iowait_pct"] > 5


def test_idle_has_little_disk_traffic():
    got = sample("idle")
    assert got["disk.vda.write_kbps"] < 20_000
    assert got["disk.vda.util_pct"] < 10
    assert got["cpu.idle_pct"] > 50


def test_devices_default_to_all_but_ram_and_loop():
    got = sample("idle")
    disks = {key.split(".")[1] for key in got if key.startswith("disk.")}
    assert disks == {"vda", "zram0"}


def test_named_devices_only_and_unknown_names_left_out():
    got = os_sample(snapshot("idle", "t0"), snapshot("idle", "t1"), devices=["vda", "sdz"])
    disks = {key.split(".")[1] for key in got if key.startswith("disk.")}
    assert disks == {"vda"}


def test_a_counter_going_backwards_counts_as_zero():
    before, after = snapshot("disk-write", "t0"), snapshot("disk-write", "t1")
    wrapped_disk = replace(after.disks["vda"], writes=5, sectors_written=10)
    wrapped = replace(
        after,
        stat=replace(after.stat, ctxt=1),
        disks={**after.disks, "vda": wrapped_disk},
        vmstat={**after.vmstat, "pgpgout": 0},
    )
    got = os_sample(before, wrapped)
    assert got["sys.context_switches_per_s"] == 0
    assert (got["disk.vda.w_iops"], got["disk.vda.write_kbps"]) == (0, 0)
    assert got["disk.vda.w_await_ms"] == 0  # no writes in the interval: no division
    assert got["vm.pgpgout_kb_per_s"] == 0


def test_snapshots_out_of_order_are_refused():
    snap = snapshot("idle", "t0")
    with pytest.raises(ValueError):
        os_sample(snap, snap)


# Properties

counter = st.integers(min_value=0, max_value=2**63)
step = st.integers(min_value=0, max_value=2**40)


@st.composite
def snapshot_pairs(draw) -> tuple[ProcSnapshot, ProcSnapshot]:
    def pair() -> tuple[int, int]:
        first = draw(counter)
        return first, first + draw(step)

    def disks() -> tuple[DiskStats, DiskStats]:
        values = [pair() for _ in range(11)]
        return (
            DiskStats("sda", 8, 0, *(v[0] for v in values)),
            DiskStats("sda", 8, 0, *(v[1] for v in values)),
        )

    def stat() -> tuple[ProcStat, ProcStat]:
        cpu, ctxt = [pair() for _ in range(8)], pair()
        running, blocked = draw(st.integers(0, 10_000)), draw(st.integers(0, 10_000))
        return (
            ProcStat(CpuTimes(*(c[0] for c in cpu)), ctxt[0], running, blocked),
            ProcStat(CpuTimes(*(c[1] for c in cpu)), ctxt[1], running, blocked),
        )

    def keyed(names: tuple[str, ...]) -> tuple[dict[str, int], dict[str, int]]:
        values = {name: pair() for name in names}
        return {k: v[0] for k, v in values.items()}, {k: v[1] for k, v in values.items()}

    def pressure() -> tuple[dict[str, Pressure], dict[str, Pressure]]:
        some, full = pair(), pair()
        return {"io": Pressure(some[0], full[0])}, {"io": Pressure(some[1], full[1])}

    at = draw(st.floats(min_value=0, max_value=1e9))
    seconds = draw(st.floats(min_value=1e-3, max_value=1e6))
    stats, sda, vm, psi = stat(), disks(), keyed(("pgpgin", "pswpout")), pressure()
    meminfo = {"MemFree": draw(counter), "Dirty": draw(counter), "Cached": draw(counter)}
    return tuple(
        ProcSnapshot(t, stats[i], {"sda": sda[i]}, meminfo, vm[i], psi[i])
        for i, t in enumerate((at, at + seconds))
    )


@given(snapshot_pairs())
def test_os_sample_is_never_negative_nor_nan(pair):
    prev, cur = pair
    got = os_sample(prev, cur)
    assert all(math.isfinite(value) and value >= 0 for value in got.values()), got
    if sum(getattr(cur.stat.cpu, f) - getattr(prev.stat.cpu, f) for f in CpuTimes.__slots__):
        parts = ("user", "nice", "system", "iowait", "steal", "idle")
        assert sum(got[f"cpu.{part}_pct"] for part in parts) == pytest.approx(100)
