"""`pgdyno doctor` on this machine, on a real sandbox, and on saved snapshots."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, plain_role
from pgdyno.postgres.cluster import Sandbox

DATA = Path(__file__).parent.parent / "data" / "doctor"
THP = Path("/sys/kernel/mm/transparent_hugepage/enabled")
VM = Path("/proc/sys/vm")
AUTOGROUP = Path("/proc/sys/kernel/sched_autogroup_enabled")
DIRTY_PAIRS = (("dirty_ratio", "dirty_bytes"), ("dirty_background_ratio", "dirty_background_bytes"))


def active(text: str) -> str:
    return text.split("[", 1)[1].split("]", 1)[0] if "[" in text else text.strip()


@pytest.fixture
def folklore_host() -> Iterator[None]:
    """Kernel settings the seeds warn against, restored afterwards whatever happens."""
    if not IS_ROOT:
        pytest.skip("changes kernel settings: needs root")
    dirty = {name: (VM / name).read_text().strip() for pair in DIRTY_PAIRS for name in pair}
    thp = active(THP.read_text()) if THP.exists() else None
    autogroup = AUTOGROUP.read_text().strip() if AUTOGROUP.exists() else None
    try:
        (VM / "dirty_background_ratio").write_text("20\n")
        (VM / "dirty_ratio").write_text("40\n")
        if thp is not None:
            THP.write_text("always\n")
        if autogroup is not None:
            AUTOGROUP.write_text("1\n")
        yield
    finally:
        for ratio, size in DIRTY_PAIRS:  # writing one of a pair zeroes the other
            name = size if dirty[size] != "0" else ratio
            (VM / name).write_text(dirty[name] + "\n")
        if thp is not None:
            THP.write_text(thp + "\n")
        if autogroup is not None:
            AUTOGROUP.write_text(autogroup + "\n")
        assert {name: (VM / name).read_text().strip() for name in dirty} == dirty
        assert thp is None or active(THP.read_text()) == thp


def ids(output: str) -> set[str]:
    return {finding["id"] for finding in json.loads(output)["findings"]}


def test_finds_what_the_seeds_warn_against_and_nothing_after_restore(
    run_cli, shared_workdir: Path, folklore_host: None
) -> None:
    result = run_cli(shared_workdir, "doctor", "--sandbox", "--pg-version", "18", "--json")
    assert result.code == 1, result.stderr  # warnings found: --fail-on warning by default
    found = ids(result.stdout)
    assert {"dirty-writeback-large", "shared-buffers-small"} <= found
    assert THP.exists() <= ("thp-always" in found)
    assert AUTOGROUP.exists() <= ("sched-autogroup-on" in found)
    data = json.loads(result.stdout)
    dirty = next(f for f in data["findings"] if f["id"] == "dirty-writeback-large")
    assert "sysctl -w vm.dirty_background_bytes=67108864" in dirty["fix"]
    assert dirty["evidence"] and dirty["takes_effect"] == "now"


def test_terminal_report_groups_by_layer(run_cli, shared_workdir: Path, tmp_path: Path) -> None:
    snapshot = tmp_path / "vm.json"
    result = run_cli(
        shared_workdir, "doctor", "--sandbox", "--pg-version", "18", "--snapshot", str(snapshot),
        "--fail-on", "never",
    )  # fmt: skip
    assert result.code == 0, result.stderr
    for layer in ("cpu:", "memory:", "storage:", "filesystem:", "kernel:", "postgresql:"):
        assert layer in result.stdout
    assert "checks passed" in result.stdout
    assert "Traceback" not in result.stdout + result.stderr
    saved = json.loads(snapshot.read_text())
    assert saved["format"] == "pgdyno-doctor/1"
    assert saved["server"]["settings"]["shared_buffers"]["unit"] == "8kB"
    assert saved["devices"]["data"]["fstype"]

    # The saved snapshot audits the same offline.
    live = run_cli(shared_workdir, "doctor", "--from", str(snapshot), "--json")
    again = run_cli(shared_workdir, "doctor", "--from", str(snapshot), "--json")
    assert ids(live.stdout) == ids(again.stdout)
    assert "shared-buffers-small" in ids(live.stdout)


def test_host_only_says_what_was_not_checked(run_cli, workdir: Path) -> None:
    result = run_cli(workdir, "doctor", "--json", "--fail-on", "never")
    assert result.code == 0, result.stderr
    data = json.loads(result.stdout)
    reasons = {item["id"]: item["reason"] for item in data["not_checked"]}
    assert "--dsn" in reasons["fsync-off"]
    assert "--data-dir" in reasons["ext3-data"]
    with_dir = run_cli(workdir, "doctor", "--json", "--fail-on", "never", "--data-dir", "/")
    checked = {item["id"] for item in json.loads(with_dir.stdout)["not_checked"]}
    assert "ext3-data" not in checked and "read-ahead-off" not in checked


@pytest.mark.parametrize(
    ("name", "fail_on", "code"),
    [
        ("risky-server", "critical", 1),
        ("healthy", "warning", 0),
        ("healthy", "info", 1),
        ("risky-server", "never", 0),
    ],
)
def test_exit_status_follows_fail_on(run_cli, workdir: Path, name: str, fail_on: str, code: int):
    result = run_cli(workdir, "doctor", "--from", str(DATA / f"{name}.json"), "--fail-on", fail_on)
    assert result.code == code, result.stderr


@pytest.mark.parametrize(
    ("args", "content", "message", "code"),
    [
        (["--from", "{file}"], "not json", "is not a JSON file", 2),
        (["--from", "{file}"], '{"format": "other"}', "is not a pgdyno doctor snapshot", 2),
        (["--from", "{file}"], '{"format": "pgdyno-doctor/1", "host": []}', "'host' must be", 2),
        (["--from", "/nonexistent.json"], None, "cannot read snapshot", 2),
        (["--sandbox", "--dsn", "host=/tmp"], None, "at most one of", 2),
        (["--dsn", "host=/nonexistent-dir port=1 dbname=x"], None, "cannot connect", 3),
        (["--fail-on", "loud"], None, "--fail-on", 2),
    ],
)
def test_bad_input_is_one_sentence(run_cli, workdir: Path, tmp_path: Path, args, content,
                                   message: str, code: int) -> None:  # fmt: skip
    file = tmp_path / "snap.json"
    if content is not None:
        file.write_text(content)
    result = run_cli(workdir, "doctor", *[a.replace("{file}", str(file)) for a in args])
    assert result.code == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) <= 2


def test_unprivileged_role(run_cli, workdir: Path, box: Sandbox) -> None:
    """A plain role: the server is audited with what it may see, the host not (no data
    directory), unless the user names the data directory."""
    dsn = plain_role(box, "auditor") + " password=s3cret-xyz"
    saved = workdir / "auditor.json"
    result = run_cli(workdir, "doctor", "--dsn", dsn, "--json", "--fail-on", "never",
                     "--snapshot", str(saved))  # fmt: skip
    assert result.code == 0, result.stderr
    assert "s3cret-xyz" not in saved.read_text() + result.stdout + result.stderr
    data = json.loads(result.stdout)
    assert "server.settings.sourcefile" in data["unread"]
    assert "another machine" in data["unread"]["host"]
    assert "shared-buffers-small" not in data["passed"]  # needs the host's RAM
    named = run_cli(workdir, "doctor", "--dsn", dsn, "--data-dir", str(box.data_dir),
                    "--json", "--fail-on", "never")  # fmt: skip
    assert "shared-buffers-small" in ids(named.stdout)


def test_a_snapshot_written_by_hand(run_cli, workdir: Path) -> None:
    """Few facts, postgresql.conf-style values, one value of the wrong type: what can be
    judged is, the rest is listed as not checked, and nothing crashes."""
    result = run_cli(workdir, "doctor", "--from", str(DATA / "handwritten" / "numa-box.json"),
                     "--json")  # fmt: skip
    assert result.code == 1, result.stderr
    data = json.loads(result.stdout)
    found = {f["id"]: f for f in data["findings"]}
    assert {"numa-zone-reclaim", "synchronous-commit-off", "shared-buffers-small"} <= set(found)
    assert found["shared-buffers-small"]["current"] == "2GB of 128 GiB"
    assert found["shared-buffers-small"]["recommended"] == "32GB"
    reasons = {item["id"]: item["reason"] for item in data["not_checked"]}
    assert "unexpected value" in reasons["dirty-writeback-large"]
    assert "thp-always" in data["passed"] and "checkpoint-completion-target-low" in data["passed"]


# -- which PostgreSQL: the sandbox the user has been working with ------------------------------


def _system_majors() -> list[int]:
    from pgdyno.postgres.binaries import system_installations

    return [b.major for b in system_installations()]


def test_doctor_and_tune_on_the_sandbox_take_the_version_of_the_sandbox_that_exists(
    run_cli, workdir: Path, box: Sandbox
) -> None:
    """After a bench or `make demo` (the box: PostgreSQL 18), `doctor --sandbox` and
    `tune --sandbox` without --pg-version audit that sandbox, say so, and create no other
    (a system installation was picked before: an empty new cluster)."""
    if not any(major != 18 for major in _system_majors()):
        pytest.skip("no system PostgreSQL other than 18 here: the two choices would agree")
    doctor = run_cli(workdir, "doctor", "--sandbox", "--json")
    assert doctor.code in (0, 1), doctor.stderr  # 1: findings
    assert json.loads(doctor.stdout)["target"] == "sandbox pg18"
    tune = run_cli(workdir, "tune", "--sandbox", "--json")
    assert tune.code == 0, tune.stderr
    for result in (doctor, tune):
        assert "using PostgreSQL 18" in result.stderr and "sandbox pg18" in result.stderr
    assert sorted(p.name for p in (workdir / "clusters").iterdir()) == ["pg18"]


def test_a_new_work_directory_gets_the_bundled_postgresql_not_the_system_one(
    run_cli, workdir: Path
) -> None:
    """The default every plan and `make demo` use (18, bundled) whatever the host installed."""
    if not any(major != 18 for major in _system_majors()):
        pytest.skip("no system PostgreSQL other than 18 here: the two choices would agree")
    started = run_cli(workdir, "sandbox", "start")
    try:
        assert started.code == 0, started.stderr
        assert sorted(p.name for p in (workdir / "clusters").iterdir()) == ["pg18"]
        assert "the bundled default (also installed here: " in started.stderr
    finally:
        assert run_cli(workdir, "sandbox", "stop").code == 0
