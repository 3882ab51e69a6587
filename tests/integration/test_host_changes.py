"""Host changes on the real kernel: harmless writeback sysctls and a loop device of our own.

Every test that changes something runs under a guard fixture that snapshots the settings
first and, whatever happens, writes them back with plain code independent of pgdyno, then
asserts they match the snapshot.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT
from pgdyno.errors import Interrupted, UsageError
from pgdyno.host.knobs import HostChangeError, Knob, read_value, validate, write_value
from pgdyno.undo.host import HostChanges, ensure_clean, pending, rollback

pytestmark = pytest.mark.skipif(not IS_ROOT, reason="changes real kernel settings: needs root")

VM = Path("/proc/sys/vm")
LIVE = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}  # the host these tests change
WATCHED = (
    "dirty_background_ratio",
    "dirty_background_bytes",
    "dirty_expire_centisecs",
    "dirty_writeback_centisecs",
)
COUPLED = {"dirty_background_ratio": "dirty_background_bytes"}
COUPLED |= {b: a for a, b in COUPLED.items()}

# Applies the changes given as JSON, says so, then waits to be killed, as a comparison would.
CHILD = """
import json, signal, sys, time
from pathlib import Path
from pgdyno.cli import _raise_interrupted
from pgdyno.undo.host import HostChanges
from pgdyno.host.knobs import Knob

signal.signal(signal.SIGTERM, _raise_interrupted)  # as the CLI does
roots = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
with HostChanges(Path(sys.argv[1]), **roots) as host:
    for kind, name, device, value in json.loads(sys.argv[2]):
        host.apply(Knob(kind, name, device=device, **roots), value)
    print("applied", flush=True)
    time.sleep(120)
"""


def read_vm() -> dict[str, str]:
    return {name: (VM / name).read_text().strip() for name in WATCHED}


def other(value: str) -> str:
    """A harmless different value."""
    return str(int(value) + 100)


@pytest.fixture
def vm_settings(tmp_path: Path) -> Iterator[dict[str, str]]:
    before = read_vm()
    try:
        yield before
    finally:
        # A test that failed with its child's changes still journalled would leave the host
        # lock naming that journal, and every later host test would be refused: roll it back.
        journal = tmp_path / "host-journal.jsonl"
        if journal.exists() and pending(journal, **LIVE):
            rollback(journal, **LIVE)
        if read_vm() != before:
            for name, value in before.items():
                partner = COUPLED.get(name)
                if partner is not None and value == "0" and before[partner] != "0":
                    continue  # writing the partner resets it; the kernel refuses 0 for *_bytes
                (VM / name).write_text(value + "\n")
        assert read_vm() == before


def sysfs_queue(device: str) -> dict[str, str]:
    queue = Path("/sys/block") / device / "queue"
    scheduler = re.search(r"\[(.+?)\]", (queue / "scheduler").read_text())
    assert scheduler is not None
    return {
        "scheduler": scheduler.group(1),
        "read_ahead_kb": (queue / "read_ahead_kb").read_text().strip(),
    }


def all_loop_queues() -> dict[str, dict[str, str]]:
    return {path.name: sysfs_queue(path.name) for path in Path("/sys/block").glob("loop*")}


def put_back(device: str, settings: dict[str, str]) -> None:
    queue = Path("/sys/block") / device / "queue"
    for name, value in settings.items():
        if sysfs_queue(device)[name] != value:
            (queue / name).write_text(value + "\n")


@pytest.fixture
def loop_device(tmp_path: Path) -> Iterator[str]:
    """A loop device over a sparse file. Loop devices outlive their backing file, and
    attaching one sets its read_ahead_kb (the kernel raises it to suit the backing file), so
    its queue settings are put back as they were before attaching, after detaching."""
    if shutil.which("losetup") is None:
        pytest.skip("losetup is not installed")
    backing = tmp_path / "loop.img"
    with backing.open("wb") as file:
        file.truncate(32 << 20)
    unattached = all_loop_queues()
    attach = subprocess.run(
        ["losetup", "--find", "--show", str(backing)], capture_output=True, text=True, check=False
    )
    if attach.returncode != 0:
        pytest.skip(f"cannot attach a loop device: {attach.stderr.strip()}")
    device = Path(attach.stdout.strip()).name
    attached = sysfs_queue(device)
    try:
        yield device
    finally:
        try:
            put_back(device, attached)
            assert sysfs_queue(device) == attached
        finally:
            subprocess.run(["losetup", "--detach", f"/dev/{device}"], check=True)
            if device in unattached:  # else losetup made it: it has no earlier settings
                put_back(device, unattached[device])
                assert sysfs_queue(device) == unattached[device]


def offered_other_scheduler(device: str) -> str:
    text = (Path("/sys/block") / device / "queue/scheduler").read_text()
    others = [word for word in text.split() if not word.startswith("[")]
    if not others:
        pytest.skip(f"{device} offers a single scheduler")
    return "mq-deadline" if "mq-deadline" in others else others[0]


def test_sysctl_change_is_read_back_and_restored(vm_settings: dict[str, str], tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    knob = Knob.sysctl("vm.dirty_expire_centisecs", **LIVE)
    wanted = other(vm_settings["dirty_expire_centisecs"])
    with HostChanges(journal, **LIVE) as host:
        applied = host.apply(knob, int(wanted))
        assert (applied.old, applied.effective) == (vm_settings["dirty_expire_centisecs"], wanted)
        assert read_vm()["dirty_expire_centisecs"] == wanted
        host.restore()
        assert read_vm() == vm_settings
        host.apply(knob, wanted)
    assert read_vm() == vm_settings
    assert pending(journal, **LIVE) == []


def test_coupled_bytes_sysctl_is_restored_through_the_ratio(
    vm_settings: dict[str, str], tmp_path: Path
):
    if vm_settings["dirty_background_bytes"] != "0":
        # The host sets the bytes: make it use the ratio (vm_settings puts the bytes back).
        (VM / "dirty_background_ratio").write_text("10\n")
    seeded = read_vm()
    assert seeded["dirty_background_bytes"] == "0" and seeded["dirty_background_ratio"] != "0"
    with HostChanges(tmp_path / "host-journal.jsonl", **LIVE) as host:
        host.apply(Knob.sysctl("vm.dirty_background_bytes", **LIVE), 64 << 20)
        assert read_vm()["dirty_background_bytes"] == str(64 << 20)
        assert read_vm()["dirty_background_ratio"] == "0"  # the kernel reset it
    assert read_vm() == seeded


def test_kernel_refusal_changes_nothing(vm_settings: dict[str, str], tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    with HostChanges(journal, **LIVE) as host:
        with pytest.raises(HostChangeError, match=r"refused '1000' .*\(EINVAL"):
            host.apply(Knob.sysctl("vm.dirty_background_ratio", **LIVE), 1000)  # a percentage
        assert read_vm() == vm_settings
        assert pending(journal, **LIVE) == []


def test_write_value_names_knob_and_value_when_the_kernel_refuses(vm_settings: dict[str, str]):
    knob = Knob.sysctl("vm.dirty_background_ratio", **LIVE)
    with pytest.raises(HostChangeError) as caught:
        write_value(knob, "999")  # a percentage
    assert str(caught.value).startswith(
        "the kernel refused '999' for sysctl vm.dirty_background_ratio (EINVAL: Invalid argument):"
    )
    assert read_vm() == vm_settings


def test_same_knob_twice_restores_the_oldest_value(vm_settings: dict[str, str], tmp_path: Path):
    knob = Knob.sysctl("vm.dirty_expire_centisecs", **LIVE)
    first = other(vm_settings["dirty_expire_centisecs"])
    journal = tmp_path / "host-journal.jsonl"
    with HostChanges(journal, **LIVE) as host:
        host.apply(knob, first)
        host.apply(knob, other(first))
        assert [c.old for c in pending(journal, **LIVE)] == [
            vm_settings["dirty_expire_centisecs"],
            first,
        ]
        assert read_value(knob) == other(first)
    assert read_vm() == vm_settings


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("vm.drop_caches", r"cannot be read \(Permission denied\)"),  # write-only
        ("kernel.osrelease", "is read-only"),
        ("kernel.no_such_sysctl_here", "the kernel has no sysctl"),
    ],
)
def test_validate_refuses_on_the_real_kernel(name: str, message: str):
    with pytest.raises(UsageError, match=message):
        validate(Knob.sysctl(name, **LIVE), 1, is_root=True)  # validate never writes


@pytest.mark.parametrize("stop", [KeyboardInterrupt, Interrupted])
def test_interruption_restores(
    vm_settings: dict[str, str], tmp_path: Path, stop: type[BaseException]
):
    with pytest.raises(stop), HostChanges(tmp_path / "host-journal.jsonl", **LIVE) as host:
        host.apply(
            Knob.sysctl("vm.dirty_writeback_centisecs", **LIVE),
            other(vm_settings["dirty_writeback_centisecs"]),
        )
        raise stop("stop")
    assert read_vm() == vm_settings


def run_child(journal: Path, changes: list[list[object]]) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(journal), json.dumps(changes)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    line = child.stdout.readline()
    if line != "applied\n":
        child.kill()
        _out, err = child.communicate()
        pytest.fail(f"the child did not apply its changes: {line!r} {err}")
    return child


def test_sigkill_then_rollback(vm_settings: dict[str, str], tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    expire = other(vm_settings["dirty_expire_centisecs"])
    changes: list[list[object]] = [
        ["sysctl", "vm.dirty_expire_centisecs", None, expire],
        ["sysctl", "vm.dirty_background_bytes", None, 32 << 20],
        ["sysctl", "vm.dirty_expire_centisecs", None, other(expire)],
    ]
    child = run_child(journal, changes)
    try:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.communicate()
    # Nothing restored the settings: the process died with them changed.
    assert read_vm()["dirty_expire_centisecs"] == other(expire)
    assert read_vm()["dirty_background_bytes"] == str(32 << 20)
    assert [change.new for change in pending(journal, **LIVE)] == [
        expire,
        str(32 << 20),
        other(expire),
    ]
    with pytest.raises(UsageError, match="holds 3 changes not restored"):
        ensure_clean(journal, **LIVE)
    done = rollback(journal, **LIVE).restored
    assert read_vm() == vm_settings
    restored = {r.knob.name: (r.now, r.set_to) for r in done}
    assert restored["vm.dirty_expire_centisecs"] == (
        vm_settings["dirty_expire_centisecs"],
        other(expire),
    )
    assert restored["vm.dirty_background_bytes"][1] == str(32 << 20)
    assert rollback(journal, **LIVE).restored == []
    ensure_clean(journal, **LIVE)


def test_sigterm_restores_without_rollback(vm_settings: dict[str, str], tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    wanted = other(vm_settings["dirty_writeback_centisecs"])
    child = run_child(journal, [["sysctl", "vm.dirty_writeback_centisecs", None, wanted]])
    try:
        assert read_vm()["dirty_writeback_centisecs"] == wanted
        child.send_signal(signal.SIGTERM)
        # A hang guard, not a speed check: the restore fsyncs its journal records, and on a
        # CI host busy writing that once took over 30 s.
        _out, err = child.communicate(timeout=180)
    finally:
        child.kill()
    assert "Interrupted: pgdyno received SIGTERM" in err
    assert read_vm() == vm_settings
    assert pending(journal, **LIVE) == []


def test_block_settings_on_a_loop_device(loop_device: str, tmp_path: Path):
    before = sysfs_queue(loop_device)
    scheduler = offered_other_scheduler(loop_device)
    with HostChanges(tmp_path / "host-journal.jsonl", **LIVE) as host:
        applied = host.apply(Knob.block(loop_device, "scheduler", **LIVE), scheduler)
        assert (applied.old, applied.effective) == (before["scheduler"], scheduler)
        applied = host.apply(Knob.block(loop_device, "read_ahead_kb", **LIVE), 256)
        assert applied.effective == "256"
        assert sysfs_queue(loop_device) == {"scheduler": scheduler, "read_ahead_kb": "256"}
        with pytest.raises(UsageError, match="offers no scheduler 'no-such-scheduler'"):
            host.apply(Knob.block(loop_device, "scheduler", **LIVE), "no-such-scheduler")
    assert sysfs_queue(loop_device) == before


def test_effective_read_ahead_is_what_the_kernel_keeps(loop_device: str, tmp_path: Path):
    before = sysfs_queue(loop_device)
    with HostChanges(tmp_path / "host-journal.jsonl", **LIVE) as host:
        # The kernel keeps read-ahead in whole pages: 130 KiB becomes 128 with 4 KiB pages.
        applied = host.apply(Knob.block(loop_device, "read_ahead_kb", **LIVE), 130)
        assert (applied.requested, applied.effective, applied.took_effect) == ("130", "128", False)
    assert sysfs_queue(loop_device) == before


def test_block_settings_sigkill_then_rollback(loop_device: str, tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    before = sysfs_queue(loop_device)
    scheduler = offered_other_scheduler(loop_device)
    child = run_child(
        journal,
        [
            ["block", "scheduler", loop_device, scheduler],
            ["block", "read_ahead_kb", loop_device, 512],
        ],
    )
    try:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.communicate()
    assert sysfs_queue(loop_device) == {"scheduler": scheduler, "read_ahead_kb": "512"}
    done = rollback(journal, **LIVE).restored
    assert [(r.knob.name, r.now) for r in done] == [
        ("read_ahead_kb", before["read_ahead_kb"]),
        ("scheduler", before["scheduler"]),
    ]
    assert sysfs_queue(loop_device) == before
    assert rollback(journal, **LIVE).restored == []
