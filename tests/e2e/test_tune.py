"""`pgdyno tune` through the CLI: offline baselines and advice, the sandbox's configuration, files,
`--apply` then `pgdyno rollback` restoring every host and server setting exactly, `--verify`.

Host settings are read and restored here with plain file reads and writes, independent of
pgdyno: `host_guard` puts back whatever a failing test left changed. tests/faults/
test_tune_sigkill.py uses the same helpers for a SIGKILL in the middle of `--apply`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from conftest import IS_ROOT, one_clear_sentence
from host_conditions import holding_huge_pages, huge_pages, no_steal, quiet_pgdyno
from pgdyno.postgres.cluster import Sandbox
from pgdyno.postgres.queries import load
from pgdyno.postgres.settings import check_setting, settings_meta_from_rows
from pgdyno.textsafe import strict_loads
from pgdyno.tune.files import ALTER_SQL, PG_CONF, SYSCTL, THP
from plans import tiny_plan

PROC_SYS = Path("/proc/sys")
THP_DIR = Path("/sys/kernel/mm/transparent_hugepage")
# Every sysctl tune may change, and the ratios its *_bytes settings zero.
SYSCTLS = (
    "vm.nr_hugepages", "vm.dirty_background_bytes", "vm.dirty_bytes", "vm.dirty_ratio",
    "vm.dirty_background_ratio", "vm.swappiness", "vm.zone_reclaim_mode", "vm.overcommit_memory",
    "vm.overcommit_ratio", "kernel.numa_balancing", "kernel.sched_autogroup_enabled",
    "kernel.sched_migration_cost_ns",
)  # fmt: skip
DIRTY_PAIRS = (("vm.dirty_ratio", "vm.dirty_bytes"),
               ("vm.dirty_background_ratio", "vm.dirty_background_bytes"))  # fmt: skip

# The box fixture's embedded PostgreSQL 18 (a system installation would be the default).
SANDBOX = ("--sandbox", "--pg-version", "18")
HELD_ELSEWHERE = 3  # huge pages another process holds while tune --apply reserves them
needs_root = pytest.mark.skipif(not IS_ROOT, reason="changes host settings: needs root")


def sysctl_path(name: str) -> Path:
    return PROC_SYS / name.replace(".", "/")


def active(text: str) -> str:
    """The bracketed word of a /sys choice file, else the text."""
    match = re.search(r"\[(.+?)\]", text)
    return match.group(1) if match else text.strip()


def data_disk(path: Path) -> Path | None:
    """/sys/block/<disk> of the whole disk under `path`; None without a block device."""
    st = path.stat()
    node = Path(f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}")
    if not node.exists():
        return None
    node = node.resolve()
    if (node / "partition").exists():
        node = node.parent
    return node if (node / "queue").is_dir() else None


def host_state(workdir: Path) -> dict[str, str]:
    """Every host value tune may touch, read without pgdyno."""
    state = {name: sysctl_path(name).read_text().strip() for name in SYSCTLS
             if sysctl_path(name).exists()}  # fmt: skip
    for leaf in ("enabled", "defrag"):
        if (THP_DIR / leaf).exists():
            state[f"thp/{leaf}"] = active((THP_DIR / leaf).read_text())
    disk = data_disk(workdir)
    if disk is not None:
        state["scheduler"] = active((disk / "queue/scheduler").read_text())
        state["read_ahead_kb"] = (disk / "queue/read_ahead_kb").read_text().strip()
    return state


def write_host(workdir: Path, wanted: dict[str, str]) -> None:
    """Put the host values back with plain writes (the guard of a failing test)."""
    now = host_state(workdir)
    coupled = {name for pair in DIRTY_PAIRS for name in pair}
    for ratio, size in DIRTY_PAIRS:  # writing one of a pair zeroes the other
        if (now[ratio], now[size]) != (wanted[ratio], wanted[size]):
            name = size if wanted[size] != "0" else ratio
            sysctl_path(name).write_text(wanted[name] + "\n")
    for name, value in wanted.items():
        if name in coupled or now.get(name) == value:
            continue
        if name.startswith("thp/"):
            (THP_DIR / name.removeprefix("thp/")).write_text(value + "\n")
        elif name in ("scheduler", "read_ahead_kb"):
            disk = data_disk(workdir)
            assert disk is not None
            (disk / "queue" / name).write_text(value + "\n")
        else:
            sysctl_path(name).write_text(value + "\n")


@contextmanager
def seeded_host(workdir: Path) -> Iterator[dict[str, str]]:
    """The seeds' flagged defaults (THP always, swappiness 60) so that tune has something to
    change; yields the host state then, and restores the original state whatever happens."""
    original = host_state(workdir)
    try:
        seeded = {**original, "vm.swappiness": "60"}
        if "thp/enabled" in original:
            seeded["thp/enabled"] = "always"
        write_host(workdir, seeded)
        before = host_state(workdir)
        assert before == seeded
        yield before
    finally:
        write_host(workdir, original)
        assert host_state(workdir) == original


@pytest.fixture
def host_guard(workdir: Path) -> Iterator[dict[str, str]]:
    if not IS_ROOT:
        pytest.skip("changes host settings: needs root")
    with seeded_host(workdir) as before:
        yield before


def pg_state(box: Sandbox) -> dict[str, Any]:
    """pg_settings (name, setting, source, pending_restart) and postgresql.auto.conf's text."""
    with psycopg.connect(box.conninfo(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting, source, pending_restart FROM pg_settings ORDER BY name"
        ).fetchall()
    auto_conf = (box.data_dir / "postgresql.auto.conf").read_text()
    return {"settings": {r[0]: r[1:] for r in rows}, "auto_conf": auto_conf}


def differences(after: dict[str, Any], before: dict[str, Any]) -> dict[str, Any]:
    """What differs between two pg_state readings, by setting (and auto.conf)."""
    names = set(after["settings"]) | set(before["settings"])
    found: dict[str, Any] = {
        name: (before["settings"].get(name), after["settings"].get(name))
        for name in sorted(names)
        if after["settings"].get(name) != before["settings"].get(name)
    }
    if after["auto_conf"] != before["auto_conf"]:
        found["postgresql.auto.conf"] = (before["auto_conf"], after["auto_conf"])
    return found


def tuned_names(result_stdout: str) -> set[str]:
    data = strict_loads(result_stdout)
    return {a["name"] for a in data["applied"] if a["layer"] == "postgresql"}


# -- offline ---------------------------------------------------------------------------------------

# PGTUNE.md's worked example, as pgtune prints it (tests/unit/test_tune_baselines.py holds the
# 3,000 recorded cases); the order is pgtune's too.
PGTUNE_OLTP_64G = {
    "max_connections": 500, "shared_buffers": "16GB", "effective_cache_size": "48GB",
    "maintenance_work_mem": "4GB", "checkpoint_completion_target": 0.9, "wal_buffers": "16MB",
    "default_statistics_target": 100, "random_page_cost": 1.1, "effective_io_concurrency": 1000,
    "work_mem": "29261kB", "huge_pages": "try", "jit": "off", "wal_compression": "lz4",
    "autovacuum_max_workers": 4, "autovacuum_work_mem": "2GB", "min_wal_size": "2GB",
    "max_wal_size": "8GB", "max_worker_processes": 16, "max_parallel_workers_per_gather": 4,
    "max_parallel_workers": 16, "max_parallel_maintenance_workers": 4,
}  # fmt: skip


def test_pgtune_baseline_offline_is_pgtune_to_the_unit(run_cli, workdir: Path) -> None:
    result = run_cli(
        workdir, "tune", "--baseline", "pgtune", "--pg-version", "16", "--profile", "oltp",
        "--ram", "64GB", "--cpus", "16", "--connections", "500", "--storage", "nvme",
        "--data-size", "greater_ram", "--json",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    data = strict_loads(result.stdout)
    assert data == {"baseline": "pgtune", "settings": PGTUNE_OLTP_64G}
    assert list(data["settings"]) == list(PGTUNE_OLTP_64G)
    # a number stays a JSON number, a size a string: as pgtune writes postgresql.conf
    assert isinstance(data["settings"]["random_page_cost"], float)
    assert isinstance(data["settings"]["max_connections"], int)
    assert list(workdir.iterdir()) == []  # offline: no sandbox, no journal, no results file


def test_offline_advice_reads_nothing_of_this_host(run_cli, workdir: Path) -> None:
    result = run_cli(
        workdir, "tune", "--ram", "64GB", "--pg-version", "17", "--profile", "web", "--json"
    )
    assert result.code == 0, result.stderr
    data = strict_loads(result.stdout)
    facts = data["facts"]
    assert facts["ram"] == 64 * 2**30 and facts["pg"] == 17
    # nothing read from a host: the facts of one are the offline defaults, no disk, no cpus
    assert facts["local"] is False and facts["devices"] == {} and "cpus" not in facts
    # huge pages: x86-64's 2MB assumed (and said), not read
    assert (facts["huge_page"], facts["autogroup"], facts["numa_nodes"]) == (2 * 2**20, False, 1)
    assert facts["sources"]["huge_page"] == "assumed offline: x86-64's 2MB huge pages"
    sources = set(facts["sources"].values())
    assert not {"host", "cgroup memory limit"} & sources, sources
    assert {"cpus", "storage", "data_bytes", "wal_free"} <= set(data["unknown"])
    assert data["unknown"]["cpus"] == "give --cpus"
    assert data["unknown"]["postgresql:max_parallel_workers"] == "needs cpus (give --cpus)"
    settings = data["settings"]
    assert all(s["current"] is None for s in settings)
    assert not [s for s in settings if s["layer"] == "device"]
    names = {s["name"] for s in settings}
    assert {"shared_buffers", "effective_cache_size"} <= names
    # no WAL file system read: its sizes are left out, with the reason (issue 31)
    assert "max_wal_size" not in names and "postgresql:max_wal_size" in data["unknown"]
    assert not {"kernel.sched_autogroup_enabled", "max_parallel_workers"} & names
    # reserving huge pages is a to-do on the server's host, never applied from here
    todo = [s for s in settings if s["name"] == "vm.nr_hugepages"]
    assert [s["status"] for s in todo] == ["todo"]
    assert list(workdir.iterdir()) == []


BAD_INPUT = [
    (["--ram", "64"], "--ram '64' is not a size: give it with a unit"),
    (["--ram", "64GB", "--sandbox"], "--ram tunes offline: leave out --dsn and --sandbox"),
    (["--layers", "foo"], "--layers 'foo': each layer is one of postgresql, host, device"),
    (["--apply", "--ram", "64GB", "--pg-version", "17"], "--apply needs a server"),
    # what no server takes, and options that would do nothing, refused before anything is made
    (["--ram", "64GB", "--pg-version", "13"], "--pg-version 13 is not a version pgdyno knows"),
    (["--ram", "64GB", "--pg-version", "-1"], "--pg-version -1 is not a version pgdyno knows"),
    (["--ram", "infGB"], "--ram 'infGB' is not a size"),
    (["--ram", "0x10GB"], "--ram '0x10GB' is not a size"),
    (["--ram", "1e-9GB"], "--ram '1e-9GB' is not a size"),
    (["--ram", "64GB", "--ladder"], "--ladder does nothing offline"),
    (["--ram", "64GB", "--workload", "select-only"], "--workload does nothing offline"),
    (["--ram", "64GB", "--data-dir", "/tmp"], "--data-dir does nothing offline"),
    (["--ram", "64GB", "--out", ""], "--out needs a directory"),
    (["--ram", "64GB", "--connections", "2"], "give at least 4"),
    (["--sandbox", "--connections", "3"], "give at least 4"),  # before a sandbox is made
    (
        [
            "--baseline",
            "pgtune",
            "--ram",
            "8GB",
            "--pg-version",
            "17",
            "--connections",
            "1",
            "--json",
        ],
        "give at least 4",
    ),
    (["--ram", "64GB", "--connections", "262143", "--pg-version", "18"], "give at most 262107"),
    (["--sandbox", "--verify", "--scale", "huge"], "--scale 'huge' is not valid"),
    (["--sandbox", "--verify", "--budget", "soon"], "--budget 'soon' is not a duration"),
    (["--sandbox", "--budget", "5m"], "--budget only acts with --verify"),
    (["--sandbox", "--warmup", "0"], "--warmup only acts with --verify"),
    (
        [
            "--baseline",
            "timescaledb-tune",
            "--ram",
            "8GB",
            "--cpus",
            "4",
            "--pg-version",
            "16",
            "--connections",
            "20",
        ],
        "timescaledb-tune refuses fewer than 25 connections",
    ),
]


@pytest.mark.parametrize(("args", "message"), BAD_INPUT, ids=[" ".join(a) for a, _ in BAD_INPUT])
def test_bad_input_is_one_sentence(run_cli, workdir: Path, args: list[str], message: str) -> None:
    result = run_cli(workdir, "tune", *args)
    assert result.code == 2, result.stderr
    assert message in one_clear_sentence(result.stderr)
    assert result.stdout == ""
    assert list(workdir.iterdir()) == []  # no sandbox, no plan, no file


def test_pgtune_baseline_json_and_table_leave_out_the_same(run_cli, workdir: Path) -> None:
    """pgtune's io_method = io_uring on 18: the recorded build has no io_uring, so both the
    table and the JSON name it as left out, with the same reason."""
    args = ["tune", "--baseline", "pgtune", "--pg-version", "18", "--ram", "16GB", "--cpus", "8"]
    data = strict_loads(run_cli(workdir, *args, "--json").stdout)
    assert data["settings"]["io_method"] == "io_uring"  # what pgtune prints, exactly
    reason = data["left_out"]["io_method"]
    assert reason.startswith("pgtune's io_method = io_uring left out:")
    table = run_cli(workdir, *args).stdout
    assert reason in " ".join(table.split())
    assert not re.search(r"│ io_method\s", table)


# -- the sandbox -----------------------------------------------------------------------------------


def test_sandbox_configuration_shows_current_values_the_server_accepts(
    run_cli, workdir: Path, box: Sandbox
) -> None:
    result = run_cli(workdir, "tune", *SANDBOX, "--profile", "oltp", "--json")
    assert result.code == 0, result.stderr
    data = strict_loads(result.stdout)
    assert data["target"] == f"sandbox {box.root.name}" and data["notes"] == []
    pg = [s for s in data["settings"] if s["layer"] == "postgresql"]
    assert len(pg) >= 15
    assert all(s["current"] is not None for s in pg), [s["name"] for s in pg if not s["current"]]
    by_name = {s["name"]: s for s in pg if s["status"] == "apply"}
    assert by_name["shared_buffers"]["current"] == "128MB" and by_name["shared_buffers"]["changes"]
    assert by_name["wal_buffers"] == {**by_name["wal_buffers"], "current": "-1", "changes": False}
    with psycopg.connect(box.conninfo(), autocommit=True) as conn:
        meta = settings_meta_from_rows(conn.execute(load("settings_meta")).fetchall())
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
    for setting in pg:
        assert check_setting(meta, setting["name"], setting["recommended"], version)
        restart = meta[setting["name"]].needs_restart
        assert setting["takes_effect"] == ("restart" if restart else "reload"), setting["name"]
    host = {s["name"]: s for s in data["settings"] if s["layer"] == "host"}
    # /proc/sys is readable by everyone: the current value is shown with or without root.
    assert host["vm.swappiness"]["current"] == sysctl_path("vm.swappiness").read_text().strip()
    devices = [s for s in data["settings"] if s["layer"] == "device"]
    disk = data_disk(workdir)
    if disk is not None:
        assert {s["device"] for s in devices} == {disk.name}
        ahead = next(s for s in devices if s["name"] == "read_ahead_kb")
        assert ahead["current"] == (disk / "queue/read_ahead_kb").read_text().strip()
    else:  # the work directory is on no block device (tmpfs, overlay): nothing to tune there
        assert devices == []


def test_out_writes_files_naming_the_settings(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "tuned"
    result = run_cli(workdir, "tune", *SANDBOX, "--out", str(out))
    assert result.code == 0, result.stderr
    assert "wrote 6 file(s) to" in result.stderr
    names = {p.name for p in out.iterdir()}
    assert {PG_CONF, ALTER_SQL, SYSCTL} <= names
    conf = (out / PG_CONF).read_text()
    assert re.search(r"^shared_buffers = '?\d+[GM]B'?", conf, re.M), conf
    assert "ALTER SYSTEM SET shared_buffers" in (out / ALTER_SQL).read_text()
    assert "vm.swappiness = 1" in (out / SYSCTL).read_text()
    if (THP_DIR / "enabled").exists():  # whatever its mode: the file pins it to never
        assert THP in names and "never" in (out / THP).read_text()
    else:  # a kernel built without transparent huge pages
        assert THP not in names


# -- apply and rollback ----------------------------------------------------------------------------


def advised_huge_pages(tune_json: str) -> int:
    """The vm.nr_hugepages `tune --json` recommends (the server's own count, postgres -C)."""
    settings = strict_loads(tune_json)["settings"]
    return next(int(s["recommended"]) for s in settings if s["name"] == "vm.nr_hugepages")


@pytest.fixture
def huge_host(run_cli, workdir: Path, box: Sandbox) -> Iterator[dict[str, str]]:
    """host_guard's seeded host, with the huge pages tune asks for reserved beforehand, so that
    the kernel can give them to --apply (which only lowers the count to what the server needs);
    the sandbox restarted on them, so that every reading before and after sees them. Skips
    visibly when the kernel cannot reserve them; vm.nr_hugepages is put back exactly."""
    if not IS_ROOT:
        pytest.skip("changes host settings: needs root")
    advice = run_cli(workdir, "tune", *SANDBOX, "--json")
    assert advice.code == 0, advice.stderr
    with huge_pages(advised_huge_pages(advice.stdout)):
        box.stop()
        box.start({}, owner_pid=None)
        try:
            with seeded_host(workdir) as before:
                yield before
        finally:
            box.stop()  # before the pages go back


@needs_root
def test_apply_then_rollback_restores_everything_exactly(
    run_cli, workdir: Path, box: Sandbox, huge_host: dict[str, str]
) -> None:
    before_host = huge_host
    before_pg = pg_state(box)

    refused = run_cli(workdir, "tune", *SANDBOX, "--apply")
    assert refused.code == 2
    assert "add --yes to consent" in one_clear_sentence(refused.stderr)
    assert host_state(workdir) == before_host and differences(pg_state(box), before_pg) == {}
    journal = workdir / "pg-journal.jsonl"
    assert not journal.exists() or journal.read_text() == ""

    # Another process holds huge pages of the pool throughout, as a second cluster would.
    with holding_huge_pages(HELD_ELSEWHERE):
        applied = run_cli(workdir, "tune", *SANDBOX, "--apply", "--yes", "--json")
    assert applied.code == 0, applied.stderr
    report = strict_loads(applied.stdout)
    done = {a["name"]: a for a in report["applied"]}
    assert done["vm.swappiness"]["old"] == "60" and done["vm.swappiness"]["effective"] == "1"
    if "thp/enabled" in before_host:  # seeded to always
        assert active((THP_DIR / "enabled").read_text()) == "never"
    else:  # a kernel built without transparent huge pages
        assert "transparent_hugepage/enabled" not in done
    assert done["shared_buffers"]["old"] == "128MB" and done["shared_buffers"]["took_effect"]
    after_apply = pg_state(box)
    assert after_apply["settings"]["shared_buffers"] != before_pg["settings"]["shared_buffers"]
    assert "shared_buffers" in after_apply["auto_conf"]
    assert report["restarts"] >= 1
    huge = done["vm.nr_hugepages"]
    assert after_apply["settings"]["huge_pages"][0] == "on", report["notes"]
    assert after_apply["settings"]["huge_pages_status"][0] == "on"
    # reserved from what the running server says it needs, not from tune's estimate, on top of
    # the pages others hold (the sandbox started with huge_pages off: it held none before)
    needed = int(after_apply["settings"]["shared_memory_size_in_huge_pages"][0])
    assert int(huge["requested"]) >= needed + HELD_ELSEWHERE
    assert int(huge["effective"]) >= int(huge["requested"])
    said = re.search(r"other processes hold (\d+) huge pages", applied.stderr)
    assert said is not None, applied.stderr
    others = int(said[1])
    assert others >= HELD_ELSEWHERE and int(huge["requested"]) == needed + others

    listed = run_cli(workdir, "datasets", "list", *SANDBOX)
    assert listed.code == 0, listed.stderr
    marked = [line for line in listed.stdout.splitlines() if "set by pgdyno tune --apply" in line]
    assert {line.split()[0] for line in marked} == tuned_names(applied.stdout) | {
        "pgdyno.changed_by"
    }

    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert "restored shared_buffers on sandbox" in restored.stdout
    assert "restored sysctl vm.swappiness to 60 (pgdyno had set 1)" in restored.stdout
    assert host_state(workdir) == before_host
    # huge_pages_status (not a setting) says whether the server maps huge pages: rollback stops
    # the sandbox before the host gives the pages back, so it starts again without them.
    assert differences(pg_state(box), before_pg) == {}

    again = run_cli(workdir, "rollback")
    assert again.code == 0 and "nothing to restore" in again.stdout
    assert host_state(workdir) == before_host
    relisted = run_cli(workdir, "datasets", "list", *SANDBOX)
    assert "set by pgdyno" not in relisted.stdout


def test_apply_then_the_advised_apply_yes_continues_and_rollback_takes_back_both(
    run_cli, workdir: Path, box: Sandbox
) -> None:
    """The sequence a user follows: `--apply` applies what reloads and says "run again with
    --yes" for what needs a restart; that second command continues the first (it is not sent
    to `rollback` first), and one rollback restores everything."""
    before = pg_state(box)
    first = run_cli(workdir, "tune", *SANDBOX, "--apply", "--layers", "postgresql")
    assert first.code == 0, first.stderr
    assert "again with --yes" in first.stdout
    assert "shared_buffers" not in pg_state(box)["auto_conf"]
    second = run_cli(workdir, "tune", *SANDBOX, "--apply", "--layers", "postgresql", "--yes")
    assert second.code == 0, second.stderr
    assert "continuing the earlier apply" in second.stderr
    assert "shared_buffers" in pg_state(box)["auto_conf"]
    assert "again with --yes" not in second.stdout
    restored = run_cli(workdir, "rollback", "--yes")
    assert restored.code == 0, restored.stderr
    assert differences(pg_state(box), before) == {}


def test_an_apply_of_other_values_is_still_refused_while_changes_are_pending(
    run_cli, workdir: Path, box: Sandbox
) -> None:
    """Only an apply that contains every pending value continues it: other advice (another
    profile) over pending changes is refused as before."""
    first = run_cli(workdir, "tune", *SANDBOX, "--apply", "--layers", "postgresql")
    assert first.code == 0, first.stderr
    other = run_cli(
        workdir, "tune", *SANDBOX, "--apply", "--layers", "postgresql", "--profile", "desktop"
    )
    assert other.code == 2
    assert "rollback" in one_clear_sentence(other.stderr)
    assert run_cli(workdir, "rollback", "--yes").code == 0


def test_destroy_refuses_while_changes_are_pending(run_cli, workdir: Path, box: Sandbox) -> None:
    applied = run_cli(workdir, "tune", *SANDBOX, "--apply", "--layers", "postgresql")
    assert applied.code == 0, applied.stderr
    refused = run_cli(workdir, "sandbox", "destroy", "--yes", "--pg-version", "18")
    assert refused.code == 2
    assert "not rolled back: run `pgdyno rollback` first" in one_clear_sentence(refused.stderr)
    assert box.exists()
    assert run_cli(workdir, "rollback").code == 0
    destroyed = run_cli(workdir, "sandbox", "destroy", "--yes", "--pg-version", "18")
    assert destroyed.code == 0, destroyed.stderr
    assert not box.exists()


def test_a_sandbox_compare_refuses_while_tune_settings_are_applied(
    run_cli, workdir: Path, box: Sandbox
) -> None:
    """postgresql.auto.conf wins over every set's settings: the comparison would measure the
    tuned configuration under every name."""
    assert run_cli(workdir, "tune", *SANDBOX, "--apply", "--layers", "postgresql").code == 0
    box.stop()
    plan = workdir / "p.toml"
    plan.write_text(tiny_plan("p", warmup=None))
    refused = run_cli(workdir, "compare", str(plan))
    assert refused.code == 2
    assert "still has settings `pgdyno tune --apply` changed" in one_clear_sentence(refused.stderr)
    assert run_cli(workdir, "rollback").code == 0


@needs_root
def test_rollback_after_the_sandbox_was_removed_restores_the_host(
    run_cli, workdir: Path, box: Sandbox, host_guard: dict[str, str]
) -> None:
    """Its settings went with it; the host's did not, and must still come back."""
    applied = run_cli(workdir, "tune", *SANDBOX, "--apply", "--yes", "--layers", "postgresql,host")
    assert applied.code == 0, applied.stderr
    assert host_state(workdir) != host_guard
    box.stop()
    shutil.rmtree(box.root)
    restored = run_cli(workdir, "rollback")
    assert restored.code == 0, restored.stderr
    assert "sandbox pg18 no longer exists: nothing of it is left to restore" in restored.stdout
    assert host_state(workdir) == host_guard
    assert run_cli(workdir, "rollback").stdout.startswith("nothing to restore")


# -- verify ----------------------------------------------------------------------------------------


@needs_root
@pytest.mark.slow
def test_verify_ends_with_a_line_per_configuration_and_a_report(
    workdir: Path, host_guard: dict[str, str]
) -> None:
    """pgdyno in a PID namespace of its own sees no foreign CPU: no run is discarded, so each
    configuration gets its interval and verdict whatever else the host runs (no timing)."""
    # A budget under two rounds: the two rounds every verdict needs are run, no third.
    result = quiet_pgdyno(
        workdir, "tune", *SANDBOX, "--verify", "--workload", "select-only", "--duration", "5",
        "--warmup", "1", "--budget", "30s", "--precision", "20", "--scale", "1",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    (plan,) = (workdir / "tune").glob("verify-*.toml")
    assert "warmup = 1\n" in plan.read_text()  # --warmup reaches the plan
    with sqlite3.connect(workdir / "results.sqlite") as db:
        stored = db.execute("SELECT interference FROM runs").fetchall()
    assert len(stored) >= 3 * 2  # three configurations, at least two rounds
    no_steal([json.loads(text) if text else None for (text,) in stored])
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    *_, pgtune_line, pgdyno_line, report_line = lines
    # "+x% [a, b] TPS, p99 -y%, vs current: <verdict>"
    verdict = re.compile(r"select-only scale 1, \d+ clients: [+-]\d+\.\d% .* vs current: ")
    for name, line in (("pgtune", pgtune_line), ("pgdyno", pgdyno_line)):
        assert line.startswith(f"{name} ") and verdict.search(line), line
    report = Path(report_line.removeprefix("report: ").strip())
    assert report_line.startswith("report: ") and report.is_file()
    assert host_state(workdir) == host_guard
