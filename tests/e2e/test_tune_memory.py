"""Issue 31 item 1, on a real sandbox: what `pgdyno tune --out` writes and `--apply` applies
starts the server, and never a server that runs out of memory or of WAL space.

- huge pages: the written vm.nr_hugepages is what the real binary's `postgres -C
  shared_memory_size_in_huge_pages` says for the written configuration (asked here of the
  sandbox's own data directory, not recomputed), huge_pages = on only over pages that hold it,
  and the files, the table and --json agree; the pages reserved are mapped by the server;
- connections: each backend's own memory caps max_connections, with a pooler recommended;
- WAL: max_wal_size within a quarter of the WAL file system's free space, left out unknown;
- effective_cache_size above its maximum is capped, not dropped.

Tests that reserve huge pages change vm.nr_hugepages: run them under
`flock /tmp/pgdyno-host.lock`; they put it back and skip visibly when the kernel cannot.
"""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conftest import IS_ROOT, make_env, new_workdir, remove_workdir
from host_conditions import huge_pages
from pgdyno.collect.interference import parse_pid_stat
from pgdyno.errors import ClusterError, ParseError
from pgdyno.experiment.target import open_sandbox
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.process import pid_cmdline, run
from pgdyno.textsafe import strict_loads
from pgdyno.tune.files import PG_CONF, README, SYSCTL
from tune_files import conf_values

SNAPSHOT = Path(__file__).parent.parent / "data" / "doctor" / "ram-8g-1108-huge-pages.json"
MiB = 1024**2
needs_root = pytest.mark.skipif(not IS_ROOT, reason="reserves huge pages: needs root")


def sysctl_values(out: Path) -> dict[str, str]:
    if not (out / SYSCTL).exists():
        return {}
    return conf_values((out / SYSCTL).read_text())


def recommended(data: dict[str, Any]) -> dict[str, str]:
    return {s["name"]: s["recommended"] for s in data["settings"] if s["status"] == "apply"}


def tune_out(run_cli, workdir: Path, out: Path, *args: str) -> dict[str, Any]:
    """`pgdyno tune ARGS --out OUT --json`: the JSON it printed (the files are in OUT)."""
    made = run_cli(workdir, "tune", *args, "--out", str(out), "--json")
    assert made.code == 0, made.stderr
    data: dict[str, Any] = strict_loads(made.stdout)
    return data


def with_written_conf(box: Sandbox, out: Path) -> None:
    """The sandbox, stopped, with the written include file as its last word."""
    box.stop()
    (box.data_dir / PG_CONF).write_text((out / PG_CONF).read_text())
    with (box.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(f"include '{PG_CONF}'\n")


def servers_count(box: Sandbox, binaries: Binaries) -> int:
    """shared_memory_size_in_huge_pages of the stopped sandbox with the written file, as the
    real binary computes it."""
    done = run(
        [binaries.tool("postgres"), "-D", box.data_dir, "-C", "shared_memory_size_in_huge_pages"],
        what="postgres -C", run_as=box.run_as, timeout=60,
    )  # fmt: skip
    return int(done.stdout.strip().splitlines()[-1])


def shown(box: Sandbox, *names: str) -> dict[str, str]:
    with connect(box.conninfo()) as client:
        return {name: str(client.rows(f"SHOW {name}")[0][0]) for name in names}


# -- huge pages --------------------------------------------------------------------------------


def snapshot_with(tmp_path: Path, **host: int) -> Path:
    snap = json.loads(SNAPSHOT.read_text())
    snap["host"].update(host)
    path = tmp_path / "snapshot.json"
    path.write_text(json.dumps(snap))
    return path


@needs_root
@pytest.mark.parametrize("reserved", [0, 1000, 1108])
def test_out_huge_pages_are_the_servers_count_and_start_it(
    run_cli, workdir: Path, box: Sandbox, binaries: Binaries, tmp_path: Path, reserved: int
) -> None:
    """The 8 GiB snapshot of issue 31 (1108 pages reserved there, --connections 5000), with
    0, 1000 and 1108 pages reserved on its host."""
    snap = snapshot_with(tmp_path, nr_hugepages=reserved, hugepages_free=reserved)
    out = tmp_path / "tuned"
    data = tune_out(run_cli, workdir, out, "--from", str(snap), "--connections", "5000")
    written, sysctl = conf_values((out / PG_CONF).read_text()), sysctl_values(out)
    with_written_conf(box, out)
    count = servers_count(box, binaries)
    assert int(sysctl["vm.nr_hugepages"]) == max(count, reserved)
    assert written["huge_pages"] == ("on" if reserved >= count else "try")
    # the table, --json and the files say the same
    json_values = recommended(data)
    assert json_values["huge_pages"] == written["huge_pages"]
    assert json_values["vm.nr_hugepages"] == sysctl["vm.nr_hugepages"]
    table = run_cli(workdir, "tune", "--from", str(snap), "--connections", "5000")
    assert re.search(rf"huge_pages +│ \S+ +│ (->|=) {written['huge_pages']} ", table.stdout)
    # deployed as README.txt says: the sysctl first, then the server, which maps every page
    with huge_pages(int(sysctl["vm.nr_hugepages"])) as got:
        if got != int(sysctl["vm.nr_hugepages"]):
            pytest.skip(
                f"{got} huge pages were already reserved on this host, not exactly the count"
            )
        try:
            started = start_or_why(box)
            status = shown(box, "huge_pages", "huge_pages_status") if started is None else {}
            if status.get("huge_pages_status") != "on":
                if taken := taken_by_others(box):
                    pytest.skip(f"another process on this shared host took {taken} of the pages")
                if (total := meminfo()["HugePages_Total"]) != got:
                    pytest.skip(f"another process set vm.nr_hugepages to {total} meanwhile")
            assert started is None, started
            assert status == {"huge_pages": written["huge_pages"], "huge_pages_status": "on"}
            # the doctor finds no page reserved for nothing, none short, none missing
            doctor = run_cli(workdir, "doctor", "--sandbox", "--pg-version", "18", "--json")
            found = {f["id"] for f in strict_loads(doctor.stdout)["findings"]}
            assert not found & {"huge-pages-unused", "huge-pages-short", "huge-pages-missing"}
        finally:
            box.stop()  # before the pages go back


@needs_root
def test_a_sandbox_leaves_reserved_huge_pages_to_the_server_they_are_for(
    box: Sandbox, binaries: Binaries
) -> None:
    """Pages an administrator reserved stay free while a sandbox runs, even enough of them for
    it: under PostgreSQL's default (try) the sandbox mapped them, and the server they were
    reserved for could then not start with huge_pages = on. A sandbox asks for huge pages only
    when a set or `tune --apply` does (their settings win over its base file)."""
    box.stop()
    with huge_pages(servers_count(box, binaries)):
        box.start({}, owner_pid=None)
        try:
            assert shown(box, "huge_pages", "huge_pages_status") == {
                "huge_pages": "off", "huge_pages_status": "off"
            }  # fmt: skip
        finally:
            box.stop()
        box.start({"huge_pages": "try"}, owner_pid=None)  # asked for: it takes them
        try:
            status = shown(box, "huge_pages_status")
            if status != {"huge_pages_status": "on"} and (taken := taken_by_others(box)):
                pytest.skip(f"another process on this shared host took {taken} of the pages")
            assert status == {"huge_pages_status": "on"}
        finally:
            box.stop()


@needs_root
def test_a_new_sandbox_maps_no_reserved_huge_page(binaries: Binaries, cache_dir: Path) -> None:
    """initdb's processes ran under huge_pages = try and mapped reserved pages for a second or
    two, long enough to make another server's start with huge_pages = on fail. A mapping of
    huge pages shows in /proc/PID/maps from the mmap on, before any page is touched."""
    if binaries.major < 16:
        pytest.skip(f"initdb {binaries.major} cannot be given huge_pages (initdb -c is from 16)")
    workdir = new_workdir()
    held: set[str] = set()
    done = threading.Event()

    def watch() -> None:  # the sandbox's own processes only: their working directory is in it
        elsewhere: set[str] = set()  # pids seen working outside it: not looked at again
        while not done.is_set():
            for proc in Path("/proc").iterdir():
                pid = proc.name
                if not pid.isdigit() or pid in elsewhere:
                    continue
                try:
                    if not (proc / "cwd").readlink().is_relative_to(workdir):
                        elsewhere.add(pid)
                    elif "anon_hugepage" in (proc / "maps").read_text():
                        held.add(command_of(int(pid)))
                except OSError:  # gone meanwhile
                    continue
            time.sleep(0)  # a few of initdb's processes live for milliseconds: look again

    watcher = threading.Thread(target=watch)
    try:
        with huge_pages(64):
            watcher.start()
            try:
                box = open_sandbox(make_env(workdir, cache_dir), binaries, lambda _m: None)
                box.start({}, owner_pid=None)
                box.stop()
            finally:
                done.set()
                watcher.join()
    finally:
        remove_workdir(workdir)
    assert held == set(), f"the sandbox's processes mapped reserved huge pages: {held}"


def start_or_why(box: Sandbox) -> str | None:
    try:
        box.start({}, owner_pid=None)
    except ClusterError as exc:
        return str(exc)
    return None


def meminfo() -> dict[str, int]:
    rows = (line.split(":") for line in Path("/proc/meminfo").read_text().splitlines())
    return {name: int(value.split()[0]) for name, value in rows}


def taken_by_others(box: Sandbox) -> str:
    """Who holds huge pages (in use or promised) besides the sandbox's server, as "N (pid P
    COMMAND: M, ...)", or "" when nobody: another tenant's PostgreSQL with huge_pages = try maps
    free pages whenever it starts."""
    info = meminfo()
    used = info["HugePages_Total"] - info["HugePages_Free"] + info["HugePages_Rsvd"]
    held = {int(p.parent.name): n for p in Path("/proc").glob("[0-9]*/smaps_rollup")
            if (n := hugetlb_pages(p))}  # fmt: skip
    parents = {pid: parent_of(pid) for pid in held}
    # A server's children map its shared memory too: each server is named once, by its root.
    roots = [pid for pid in held if parents[pid] not in held]
    mine = box.postmaster_pid()
    ours = held.get(mine, 0) if mine is not None else 0
    holders = [f"pid {pid} {command_of(pid)}: {held[pid]}" for pid in roots if pid != mine]
    taken = max(0, used - ours)
    return f"{taken} ({', '.join(holders) or 'no process maps them: promised'})" if taken else ""


def hugetlb_pages(smaps: Path) -> int:
    """The 2 MB pages a process maps, from its smaps_rollup (0 when it is gone)."""
    try:
        lines = smaps.read_text().splitlines()
    except OSError:
        return 0
    return sum(int(line.split()[1]) // 2048 for line in lines
               if line.startswith(("Shared_Hugetlb:", "Private_Hugetlb:")))  # fmt: skip


def parent_of(pid: int) -> int | None:
    try:
        return parse_pid_stat(Path(f"/proc/{pid}/stat").read_bytes()).ppid
    except (OSError, ParseError):
        return None


def command_of(pid: int) -> str:
    return " ".join(pid_cmdline(pid))[:200] or "?"


def test_out_without_a_binary_of_the_version_reserves_nothing_and_says_how(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    """PostgreSQL 14 does not report the count: try, nothing reserved, the method printed."""
    snap = json.loads(SNAPSHOT.read_text())
    snap["server"]["version_num"] = 140012
    snap["server"]["version"] = "14.12"
    path = tmp_path / "pg14.json"
    path.write_text(json.dumps(snap))
    out = tmp_path / "tuned"
    data = tune_out(run_cli, workdir, out, "--from", str(path))
    assert recommended(data)["huge_pages"] == "try"
    assert "vm.nr_hugepages" not in sysctl_values(out)
    assert conf_values((out / PG_CONF).read_text())["huge_pages"] == "try"
    assert any("VmPeak" in note for note in data["notes"]), data["notes"]
    assert "VmPeak" in (out / README).read_text()


# -- connections -------------------------------------------------------------------------------

CONNECTIONS = {
    "512MB-5000": ["--ram", "512MB", "--cpus", "2", "--connections", "5000"],
    "2GB-1000": ["--ram", "2GB", "--cpus", "2", "--connections", "1000"],
}


@pytest.mark.parametrize("case", sorted(CONNECTIONS))
def test_out_caps_connections_by_memory_and_recommends_a_pooler(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path, case: str
) -> None:
    args = CONNECTIONS[case]
    asked = int(args[args.index("--connections") + 1])
    out = tmp_path / "tuned"
    data = tune_out(run_cli, workdir, out, "--pg-version", "18", *args)
    written = conf_values((out / PG_CONF).read_text())
    fitting = int(written["max_connections"])
    assert 4 <= fitting < asked and written["work_mem"] == "64kB"
    (note,) = [n for n in data["notes"] if "PgBouncer" in n]
    assert f"{asked} connections do not fit" in note and f"at most {fitting} server" in note
    with_written_conf(box, out)
    box.start({}, owner_pid=None)
    assert shown(box, "max_connections") == {"max_connections": str(fitting)}


@needs_root
def test_apply_caps_connections_on_the_sandbox(run_cli, workdir: Path, box: Sandbox) -> None:
    """--apply with more connections than the host's memory holds: the cap, applied."""
    advice = strict_loads(run_cli(workdir, "tune", "--sandbox", "--pg-version", "18",
                                  "--connections", "20000", "--json").stdout)  # fmt: skip
    fitting = recommended(advice)["max_connections"]
    assert int(fitting) < 20000, "this host's memory holds 20000 connections: give fewer"
    assert any("PgBouncer" in note for note in advice["notes"]), advice["notes"]
    applied = run_cli(workdir, "tune", "--sandbox", "--pg-version", "18", "--connections",
                      "20000", "--apply", "--yes", "--layers", "postgresql", "--json")  # fmt: skip
    try:
        assert applied.code == 0, applied.stderr
        assert shown(box, "max_connections") == {"max_connections": fitting}
    finally:
        assert run_cli(workdir, "rollback").code == 0


# -- WAL -------------------------------------------------------------------------------------------


def test_out_wal_within_a_quarter_of_600mib_free_starts(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    snap = json.loads(SNAPSHOT.read_text())
    snap["host"].update(memory_bytes=2 * 1024**3, nr_hugepages=0, hugepages_free=0)  # small
    for role in ("wal", "data"):
        snap["devices"][role]["free_bytes"] = 600 * MiB
    path = tmp_path / "small-wal.json"
    path.write_text(json.dumps(snap))
    out = tmp_path / "tuned"
    tune_out(run_cli, workdir, out, "--from", str(path), "--profile", "oltp")
    written = conf_values((out / PG_CONF).read_text())
    assert written["max_wal_size"] == "144MB"  # 150 MiB, in whole 16MB segments
    assert written["min_wal_size"] == "64MB"
    with_written_conf(box, out)
    box.start({}, owner_pid=None)
    assert shown(box, "max_wal_size", "min_wal_size") == {
        "max_wal_size": "144MB", "min_wal_size": "64MB",
    }  # fmt: skip


def test_out_offline_leaves_max_wal_size_out_with_the_reason(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "tuned"
    data = tune_out(run_cli, workdir, out, "--pg-version", "18", "--ram", "16GB", "--cpus", "4")
    written = conf_values((out / PG_CONF).read_text())
    assert "max_wal_size" not in written and "min_wal_size" not in written
    assert "needs wal_free" in data["unknown"]["postgresql:max_wal_size"]
    assert "max_wal_size" in (out / README).read_text()
    with_written_conf(box, out)
    box.start({}, owner_pid=None)
    assert shown(box, "max_wal_size") == {"max_wal_size": "1GB"}  # PostgreSQL's default


@needs_root
def test_apply_keeps_wal_within_the_sandbox_disk(run_cli, workdir: Path, box: Sandbox) -> None:
    applied = run_cli(workdir, "tune", "--sandbox", "--pg-version", "18", "--apply", "--yes",
                      "--layers", "postgresql", "--json")  # fmt: skip
    try:
        assert applied.code == 0, applied.stderr
        stat = os.statvfs(box.data_dir / "pg_wal")
        free = stat.f_bavail * stat.f_frsize
        with connect(box.conninfo()) as client:
            size = int(
                client.rows("SELECT setting FROM pg_settings WHERE name = 'max_wal_size'")[0][0]
            )
        assert size * MiB <= max(free // 4, 32 * MiB)  # within a quarter of what was free
    finally:
        assert run_cli(workdir, "rollback").code == 0


# -- effective_cache_size ----------------------------------------------------------------------


def test_out_effective_cache_size_above_the_maximum_is_the_maximum(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    """24 TB of RAM: three quarters is above the maximum; the maximum is written and taken."""
    out = tmp_path / "tuned"
    tune_out(run_cli, workdir, out, "--pg-version", "18", "--ram", "24TB", "--cpus", "64")
    written = conf_values((out / PG_CONF).read_text())["effective_cache_size"]
    box.stop()  # only this line: the rest of a 24 TB configuration does not start here
    (box.data_dir / PG_CONF).write_text(f"effective_cache_size = '{written}'\n")
    with (box.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(f"include '{PG_CONF}'\n")
    box.start({}, owner_pid=None)
    with connect(box.conninfo()) as client:
        setting, most = client.rows(
            "SELECT setting, max_val FROM pg_settings WHERE name = 'effective_cache_size'"
        )[0]
    assert setting == most


# -- --apply with huge pages on the sandbox ------------------------------------------------------


@pytest.fixture
def no_pages() -> Iterator[None]:
    """vm.nr_hugepages as it is, written back after (--apply raises it; rollback lowers it)."""
    with huge_pages(0):
        yield


@needs_root
def test_apply_reserves_the_servers_count_then_sets_on(
    run_cli, workdir: Path, box: Sandbox, no_pages: None
) -> None:
    applied = run_cli(workdir, "tune", "--sandbox", "--pg-version", "18", "--apply", "--yes",
                      "--json")  # fmt: skip
    try:
        if applied.code != 0 and "could not map anonymous shared memory" in applied.stderr:
            pytest.skip(
                "the reserved huge pages were gone at the restart: on this shared host another "
                "tenant's PostgreSQL (huge_pages = try) maps free pages when it starts: "
                + f"{applied.stderr.strip()}; taken: {taken_by_others(box) or 'none now'}"
            )
        assert applied.code == 0, applied.stderr
        report = strict_loads(applied.stdout)
        done = {a["name"]: a for a in report["applied"]}
        if "vm.nr_hugepages" not in done:
            pytest.skip(f"this host's shared_buffers take no huge pages: {report['notes']}")
        if any("huge_pages stays try" in n for n in report["notes"]):
            pytest.skip(f"the kernel could not reserve the pages: {report['notes']}")
        with connect(box.conninfo()) as client:
            count = client.rows("SHOW shared_memory_size_in_huge_pages")[0][0]
        # the server's count, on top of what other processes held then (theirs stay theirs)
        said = re.search(r"other processes hold (\d+) huge pages", applied.stderr)
        others = int(said[1]) if said else 0
        assert int(done["vm.nr_hugepages"]["effective"]) == int(count) + others
        assert shown(box, "huge_pages", "huge_pages_status") == {
            "huge_pages": "on", "huge_pages_status": "on",
        }  # fmt: skip
        assert done["huge_pages"]["requested"] == "on" and done["huge_pages"]["took_effect"]
    finally:
        assert run_cli(workdir, "rollback").code == 0
