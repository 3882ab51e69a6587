"""Advice that knows its context (issue 31, item 2), on a real sandbox: for each case, `tune
--out` (and `--apply` where a live server takes it) writes files the server starts with, and
the doctor on the running server agrees with what tune wrote.

Cases: a 4 GB container on a 64 GB host (the recorded-and-edited snapshot), the desktop profile
on this host, a small offline host whose dirty-page limits scale down, and a server already
holding every restart-only value (no restart asked, wal_buffers = -1 not re-applied).
PostgreSQL 14 (wal_compression = on) is checked against its recorded catalog in
tests/unit/test_tune_context.py: no PostgreSQL 14 binary is at hand here.
"""

from __future__ import annotations

from pathlib import Path

from pgdyno.postgres.client import connect
from pgdyno.postgres.cluster import Sandbox
from pgdyno.textsafe import strict_loads
from pgdyno.tune.files import ALTER_SQL, PG_CONF, README, SYSCTL, THP, UDEV
from tune_files import conf_values

DATA = Path(__file__).parent.parent / "data" / "doctor"
SANDBOX = ("--sandbox", "--pg-version", "18")  # the box fixture's embedded PostgreSQL 18
MiB = 1024**2


def start_with(box: Sandbox, out: Path) -> dict[str, str]:
    """The sandbox restarted with the written include file; every value as the server shows it
    (a ClusterError with the server's log if it does not start)."""
    written = conf_values((out / PG_CONF).read_text())
    box.stop()
    (box.data_dir / PG_CONF).write_text((out / PG_CONF).read_text())
    with (box.data_dir / "postgresql.conf").open("a") as conf:
        conf.write(f"include '{PG_CONF}'\n")
    box.start({}, owner_pid=None)
    with connect(box.conninfo()) as client:
        shown = {name: str(client.rows(f"SHOW {name}")[0][0]) for name in written}
    for name, value in written.items():
        # -1: automatic (wal_buffers), shown as what the server computed
        assert shown[name] == value or value == "-1", (name, shown[name], value)
    return shown


def doctor_json(run_cli, workdir: Path) -> dict:  # type: ignore[type-arg]
    result = run_cli(workdir, "doctor", *SANDBOX, "--json", "--fail-on", "never")
    assert result.code == 0, result.stderr
    return strict_loads(result.stdout)  # type: ignore[no-any-return]


def test_a_container_snapshot_writes_no_host_file_and_starts_the_server(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "tuned"
    made = run_cli(workdir, "tune", "--from", str(DATA / "container-4g-on-64g.json"), "--out",
                   str(out))  # fmt: skip
    assert made.code == 0, made.stderr
    names = {p.name for p in out.iterdir()}
    assert names == {PG_CONF, ALTER_SQL, README}
    assert not {SYSCTL, UDEV, THP} & names
    readme = (out / README).read_text()
    assert "For the host's administrator: this server runs in a docker container" in readme
    assert "vm.swappiness = 1" in readme and "sysctl --system" not in readme
    shown = start_with(box, out)
    assert shown["shared_buffers"] == "1GB"  # from the 4 GB limit, not the 64 GB host


def test_the_desktop_profile_starts_and_the_doctor_accepts_it(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "tuned"
    made = run_cli(workdir, "tune", *SANDBOX, "--profile", "desktop", "--out", str(out))
    assert made.code == 0, made.stderr
    shown = start_with(box, out)
    fired = {f["id"]: f for f in doctor_json(run_cli, workdir)["findings"]}
    assert not {"shared-buffers-small", "effective-cache-size-low"} & set(fired), shown


def test_the_doctor_recommends_the_shared_buffers_tune_writes(
    run_cli, workdir: Path, box: Sandbox
) -> None:
    """Before: the doctor said 5GB and tune 6016MB for this host's 23.5 GB."""
    fired = {f["id"]: f for f in doctor_json(run_cli, workdir)["findings"]}
    assert "shared-buffers-small" in fired  # the sandbox's 128MB
    advice = run_cli(workdir, "tune", *SANDBOX, "--json")
    assert advice.code == 0, advice.stderr
    settings = strict_loads(advice.stdout)["settings"]
    tuned = next(s["recommended"] for s in settings if s["name"] == "shared_buffers")
    assert fired["shared-buffers-small"]["recommended"] == tuned


def test_a_small_hosts_dirty_limits_scale_down_and_its_files_start_the_server(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    out = tmp_path / "tuned"
    made = run_cli(workdir, "tune", "--pg-version", "18", "--ram", "1GB", "--cpus", "2",
                   "--storage", "ssd", "--out", str(out))  # fmt: skip
    assert made.code == 0, made.stderr
    sysctl = (out / SYSCTL).read_text()
    # 1 GB: the kernel's defaults give at least 10% / 20% of the quarter of RAM PostgreSQL's
    # budget leaves (25.6 MB / 51.2 MB); 64 MB / 512 MB raised them.
    assert f"vm.dirty_background_bytes = {25 * MiB}" in sysctl
    assert f"vm.dirty_bytes = {51 * MiB}" in sysctl
    start_with(box, out)


def test_no_restart_is_asked_for_values_in_effect(
    run_cli, workdir: Path, box: Sandbox, tmp_path: Path
) -> None:
    applied = run_cli(workdir, "tune", *SANDBOX, "--apply", "--yes", "--layers", "postgresql",
                      "--json")  # fmt: skip
    assert applied.code == 0, applied.stderr
    report = strict_loads(applied.stdout)
    try:
        done = {a["name"] for a in report["applied"]}
        assert "shared_buffers" in done and report["restarts"] >= 1
        # -1 at its default is in effect already: neither written nor a reason to restart
        assert "wal_buffers" not in done and "wal_buffers" in report["unchanged"]
        # on only over pages the host holds (tune/huge_pages.py): with none reserved, try is
        # recommended; with them, on was asked and try stays (the host layer is not applied).
        # Either way it is written: the sandbox runs with huge_pages = off until asked.
        advice = strict_loads(run_cli(workdir, "tune", *SANDBOX, "--json").stdout)
        asked = next(s["recommended"] for s in advice["settings"] if s["name"] == "huge_pages")
        assert "huge_pages" in done and "huge_pages" not in report["unchanged"]
        noted = any("huge_pages is set to try" in note for note in report["notes"])
        assert noted == (asked == "on")

        out = tmp_path / "tuned"
        made = run_cli(workdir, "tune", *SANDBOX, "--out", str(out))
        assert made.code == 0, made.stderr
        assert "restart PostgreSQL" not in (out / README).read_text()
        assert "Restart PostgreSQL" not in (out / ALTER_SQL).read_text()
    finally:
        restored = run_cli(workdir, "rollback")
        assert restored.code == 0, restored.stderr
    start_with(box, out)  # the same values from the include file, after the rollback
