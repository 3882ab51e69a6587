"""Host knobs and the host journal on a fake /proc and /sys tree under tmp_path.

Plain files cannot refuse a write or reset a coupled sysctl: what needs the kernel's side of a
write (refusals, coupled pairs, read_ahead_kb rounding) is tested on the real kernel in
tests/integration/test_host_changes.py. Here a write fails for real when the knob's file has
been replaced by a directory (EISDIR).
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgdyno.errors import UsageError
from pgdyno.host.knobs import (
    BLOCK_SETTINGS,
    THP_SETTINGS,
    HostChangeError,
    Knob,
    read_value,
    validate,
    write_value,
)
from pgdyno.undo.host import (
    AppliedKnob,
    Change,
    HostChanges,
    RestoreError,
    ensure_clean,
    pending,
    rollback,
)
from pgdyno.undo.signals import signals_held as _signals_held

# The live host: paths a knob names there (nothing here writes to it).
LIVE = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
SYSCTLS = {
    "vm/dirty_ratio": "20\n",
    "vm/dirty_bytes": "0\n",
    "vm/dirty_background_ratio": "10\n",
    "vm/dirty_background_bytes": "0\n",
    "vm/dirty_expire_centisecs": "3000\n",
    "kernel/printk": "4\t4\t1\t7\n",
    "kernel/core_pattern": "core\n",
    "kernel/sched_autogroup_enabled": "1\n",
    "kernel/random/boot_id": "boot-a\n",
    "net/ipv4/conf/eth0.1/rp_filter": "2\n",
}

# As this kernel (6.x) writes them; khugepaged/ is there to show it stays out of reach.
THP_FILES = {
    "enabled": "always [madvise] never\n",
    "defrag": "always defer defer+madvise [madvise] never\n",
    "khugepaged/defrag": "1\n",
    "hpage_pmd_size": "2097152\n",
}


@dataclass
class Tree:
    proc: Path
    sys: Path
    journal: Path

    def sysctl(self, name: str) -> Knob:
        return Knob("sysctl", name, proc_root=self.proc, sys_root=self.sys)

    def block(self, device: str, name: str) -> Knob:
        return Knob("block", name, device=device, proc_root=self.proc, sys_root=self.sys)

    def thp(self, name: str) -> Knob:
        return Knob.thp(name, proc_root=self.proc, sys_root=self.sys)

    def pending(self) -> list[Change]:
        return pending(self.journal, proc_root=self.proc, sys_root=self.sys)

    def changes(self) -> HostChanges:
        return HostChanges(self.journal, is_root=True, proc_root=self.proc, sys_root=self.sys)

    def file(self, knob: Knob) -> str:
        return knob.path.read_text()

    def lines(self) -> list[dict[str, object]]:
        return [json.loads(line) for line in self.journal.read_text().splitlines()]


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    proc, sys = tmp_path / "proc", tmp_path / "sys"
    for name, text in SYSCTLS.items():
        path = proc / "sys" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (proc / "sys/kernel/osrelease").write_text("6.18.44\n")
    (proc / "sys/kernel/osrelease").chmod(0o444)
    vda = sys / "block/vda/queue"
    vda.mkdir(parents=True)
    (vda / "scheduler").write_text("none [mq-deadline] kyber bfq \n")
    (vda / "read_ahead_kb").write_text("8192\n")
    (sys / "block/zram0/queue").mkdir(parents=True)
    (sys / "block/zram0/queue/read_ahead_kb").write_text("128\n")
    (sys / "block/noqueue").mkdir(parents=True)
    thp = sys / "kernel/mm/transparent_hugepage"
    (thp / "khugepaged").mkdir(parents=True)
    for name, text in THP_FILES.items():
        (thp / name).write_text(text)
    return Tree(proc, sys, tmp_path / "work" / "host-journal.jsonl")


@pytest.fixture
def tree_ready(tree: Tree) -> Tree:
    tree.journal.parent.mkdir()
    return tree


def break_knob(knob: Knob) -> str:
    """Make writes to a fake knob fail for real (its file becomes a directory); its text."""
    text = knob.path.read_text()
    knob.path.unlink()
    knob.path.mkdir()
    return text


def mend_knob(knob: Knob, text: str) -> None:
    knob.path.rmdir()
    knob.path.write_text(text)


# Knobs ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("knob", "relative"),
    [
        (Knob.sysctl("vm.dirty_ratio", **LIVE), "/proc/sys/vm/dirty_ratio"),
        (Knob.sysctl("vm/dirty_ratio", **LIVE), "/proc/sys/vm/dirty_ratio"),
        (
            Knob.sysctl("kernel.sched_autogroup_enabled", **LIVE),
            "/proc/sys/kernel/sched_autogroup_enabled",
        ),
        (
            Knob.sysctl("net/ipv4/conf/eth0.1/rp_filter", **LIVE),
            "/proc/sys/net/ipv4/conf/eth0.1/rp_filter",
        ),
        (Knob.block("vda", "scheduler", **LIVE), "/sys/block/vda/queue/scheduler"),
        (Knob.block("nvme0n1", "read_ahead_kb", **LIVE), "/sys/block/nvme0n1/queue/read_ahead_kb"),
        (Knob.thp("enabled", **LIVE), "/sys/kernel/mm/transparent_hugepage/enabled"),
        (Knob.thp("defrag", **LIVE), "/sys/kernel/mm/transparent_hugepage/defrag"),
    ],
)
def test_paths(knob: Knob, relative: str) -> None:
    assert str(knob.path) == relative


def test_roots_are_injectable(tree: Tree) -> None:
    assert tree.sysctl("vm.dirty_ratio").path == tree.proc / "sys/vm/dirty_ratio"
    assert tree.block("vda", "scheduler").path == tree.sys / "block/vda/queue/scheduler"
    assert BLOCK_SETTINGS == ("scheduler", "read_ahead_kb")


@pytest.mark.parametrize(
    "make",
    [
        lambda: Knob.sysctl("vm..dirty_ratio", **LIVE),
        lambda: Knob.sysctl("../../etc/passwd", **LIVE),
        lambda: Knob.sysctl("vm/../../etc/shadow", **LIVE),
        lambda: Knob.sysctl("/vm/dirty_ratio", **LIVE),
        lambda: Knob.sysctl("vm.dirty ratio", **LIVE),
        lambda: Knob.sysctl("", **LIVE),
        lambda: Knob.block("..", "scheduler", **LIVE),
        lambda: Knob.block("vda/queue", "scheduler", **LIVE),
        lambda: Knob.block("vda", "nr_requests", **LIVE),
        lambda: Knob("sysctl", "vm.dirty_ratio", device="vda", **LIVE),
        lambda: Knob.thp("khugepaged/defrag", **LIVE),
        lambda: Knob.thp("hpage_pmd_size", **LIVE),
        lambda: Knob.thp("../../../../etc/passwd", **LIVE),
        lambda: Knob.thp("Enabled", **LIVE),
        lambda: Knob("thp", "enabled", device="vda", **LIVE),
        lambda: Knob("hugepages", "enabled", **LIVE),  # type: ignore[arg-type]
    ],
)
def test_names_that_could_leave_the_knob_directories_are_refused(
    make: Callable[[], Knob],
) -> None:
    with pytest.raises(UsageError):
        make()


def test_read_value_normalizes(tree: Tree) -> None:
    assert read_value(tree.sysctl("kernel.printk")) == "4 4 1 7"
    assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"
    assert read_value(tree.block("vda", "scheduler")) == "mq-deadline"
    assert read_value(tree.block("vda", "read_ahead_kb")) == "8192"


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("kernel.sched_autogroup_enabled", True, "1"),
        ("kernel.sched_autogroup_enabled", False, "0"),
        ("vm.dirty_ratio", 40, "40"),
        ("vm.dirty_ratio", " 40\n", "40"),
        ("kernel.printk", "3  4\t1 7", "3 4 1 7"),
        ("kernel.printk", [3, 4, 1, 7], "3 4 1 7"),
        ("kernel.core_pattern", "core.%p", "core.%p"),
        ("net/ipv4/conf/eth0.1/rp_filter", 1, "1"),
    ],
)
def test_validate_normalizes_sysctl_values(
    tree: Tree, name: str, value: object, expected: str
) -> None:
    assert validate(tree.sysctl(name), value, is_root=True) == expected


def test_validate_block_values(tree: Tree) -> None:
    assert validate(tree.block("vda", "scheduler"), "bfq", is_root=True) == "bfq"
    assert validate(tree.block("vda", "scheduler"), "none", is_root=True) == "none"
    assert validate(tree.block("vda", "read_ahead_kb"), 256, is_root=True) == "256"
    assert validate(tree.block("vda", "read_ahead_kb"), "0", is_root=True) == "0"


def test_missing_sysctl_message(tree: Tree) -> None:
    knob = tree.sysctl("kernel.sched_migration_cost_ns")
    with pytest.raises(UsageError) as caught:
        validate(knob, 500000, is_root=True)
    assert str(caught.value) == (
        "the kernel has no sysctl kernel.sched_migration_cost_ns "
        f"(no file {tree.proc}/sys/kernel/sched_migration_cost_ns): "
        "remove it from the plan or check the name."
    )


def test_not_root_message(tree: Tree) -> None:
    with pytest.raises(UsageError) as caught:
        validate(tree.sysctl("vm.dirty_ratio"), 40, is_root=False)
    assert str(caught.value) == (
        "changing sysctl vm.dirty_ratio needs root: run pgdyno as root or remove it from the plan."
    )
    with pytest.raises(UsageError, match="needs root"):
        validate(tree.block("vda", "scheduler"), "bfq", is_root=False)


@pytest.mark.parametrize(
    ("make", "value", "message"),
    [
        (lambda t: t.sysctl("kernel.osrelease"), "7", r"sysctl kernel.osrelease is read-only"),
        (lambda t: t.sysctl("kernel"), "1", r"the kernel has no sysctl kernel \(no file"),
        (
            lambda t: t.sysctl("vm.dirty_ratio"),
            "forty",
            r"takes whole numbers separated by spaces \(it is '20' now\), not 'forty'",
        ),
        (lambda t: t.sysctl("vm.dirty_ratio"), 1.5, r"not 1\.5: fix the value"),
        (lambda t: t.sysctl("vm.dirty_ratio"), "", r"takes whole numbers"),
        (lambda t: t.sysctl("kernel.core_pattern"), "a\nb", r"takes one line of text"),
        (
            lambda t: t.block("vda", "scheduler"),
            "deadline",
            r"offers no scheduler 'deadline' \(it offers none, mq-deadline, kyber, bfq\)",
        ),
        (lambda t: t.block("vda", "scheduler"), 1, r"offers no scheduler 1 "),
        (lambda t: t.block("vda", "read_ahead_kb"), -1, r"whole number of KiB .*not -1"),
        (lambda t: t.block("vda", "read_ahead_kb"), "1.5", r"not '1\.5'"),
        (lambda t: t.block("vda", "read_ahead_kb"), True, r"not True"),
        (lambda t: t.block("sdz", "scheduler"), "none", r"there is no block device sdz"),
        (lambda t: t.block("noqueue", "read_ahead_kb"), 1, r"noqueue has no queue settings"),
        (lambda t: t.block("zram0", "scheduler"), "none", r"zram0 has no scheduler setting"),
    ],
)
def test_validate_messages(
    tree: Tree, make: Callable[[Tree], Knob], value: object, message: str
) -> None:
    with pytest.raises(UsageError, match=message) as caught:
        validate(make(tree), value, is_root=True)
    text = str(caught.value)
    assert text.endswith(".") and ": " in text  # what is wrong: what to do.


def test_write_value_reads_back(tree: Tree) -> None:
    assert write_value(tree.sysctl("vm.dirty_ratio"), "40") == "40"
    assert tree.file(tree.sysctl("vm.dirty_ratio")) == "40\n"
    assert write_value(tree.block("vda", "read_ahead_kb"), "256") == "256"


def test_write_value_names_knob_and_value_when_it_fails(tree: Tree) -> None:
    knob = tree.sysctl("vm.dirty_ratio")
    break_knob(knob)
    with pytest.raises(HostChangeError) as caught:
        write_value(knob, "40")
    assert str(caught.value).startswith(
        "the kernel refused '40' for sysctl vm.dirty_ratio (EISDIR: Is a directory):"
    )


def test_write_value_never_creates_a_knob(tree: Tree) -> None:
    knob = tree.sysctl("vm.no_such_knob")
    with pytest.raises(HostChangeError, match="ENOENT"):
        write_value(knob, "1")
    assert not knob.path.exists()


# The journal and HostChanges --------------------------------------------------------------


def test_change_is_journalled_then_marked_restored(tree_ready: Tree) -> None:
    tree = tree_ready
    knob = tree.sysctl("vm.dirty_ratio")
    with tree.changes() as host:
        applied = host.apply(knob, 40)
        assert applied == AppliedKnob(knob, old="20", requested="40", effective="40")
        assert applied.took_effect
        record = tree.lines()[0]
        assert record == {
            "op": "change",
            "id": 1,
            "kind": "sysctl",
            "name": "vm.dirty_ratio",
            "device": None,
            "path": str(knob.path),
            "old": "20",
            "new": "40",
            "at": record["at"],
            "pid": os.getpid(),
            "boot_id": "boot-a",
            "partner": {
                "name": "vm.dirty_bytes",
                "path": str(tree.proc / "sys/vm/dirty_bytes"),
                "old": "0",
            },
        }
        assert [change.old for change in tree.pending()] == ["20"]
    assert tree.pending() == []
    assert tree.file(knob) == "20\n"


def test_exception_restores_everything_in_reverse(tree_ready: Tree) -> None:
    tree = tree_ready
    ratio, printk = tree.sysctl("vm.dirty_ratio"), tree.sysctl("kernel.printk")
    scheduler = tree.block("vda", "scheduler")
    with pytest.raises(RuntimeError, match="benchmark failed"), tree.changes() as host:
        host.apply(ratio, 40)
        host.apply(printk, [3, 4, 1, 7])
        host.apply(scheduler, "bfq")
        assert read_value(scheduler) == "bfq"
        raise RuntimeError("benchmark failed")
    assert read_value(ratio) == "20"
    assert tree.file(printk) == "4 4 1 7\n"
    assert read_value(scheduler) == "mq-deadline"
    assert tree.pending() == []
    assert tree.journal.read_text() == ""  # compacted once everything is restored


def test_keyboard_interrupt_restores(tree_ready: Tree) -> None:
    tree = tree_ready
    knob = tree.block("vda", "read_ahead_kb")
    with pytest.raises(KeyboardInterrupt), tree.changes() as host:
        host.apply(knob, 256)
        raise KeyboardInterrupt
    assert read_value(knob) == "8192"
    ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)


def test_same_knob_twice_restores_the_oldest_value(tree_ready: Tree) -> None:
    tree = tree_ready
    knob = tree.sysctl("vm.dirty_ratio")
    with tree.changes() as host:
        host.apply(knob, 30)
        host.apply(knob, 40)
        assert [change.old for change in tree.pending()] == [
            "20",
            "30",
        ]
    assert read_value(knob) == "20"


def test_restore_between_sets(tree_ready: Tree) -> None:
    tree = tree_ready
    knob = tree.sysctl("vm.dirty_expire_centisecs")
    with tree.changes() as host:
        host.apply(knob, 1000)
        restored = host.restore()
        assert [(r.knob, r.old, r.set_to, r.found, r.now) for r in restored] == [
            (knob, "3000", "1000", "1000", "3000")
        ]
        assert read_value(knob) == "3000"
        host.apply(knob, 2000)
        assert read_value(knob) == "2000"
    assert read_value(knob) == "3000"


def test_unchanged_value_is_not_written_or_journalled(tree_ready: Tree) -> None:
    tree = tree_ready
    with tree.changes() as host:
        applied = host.apply(tree.sysctl("vm.dirty_ratio"), "20")
        assert applied.old == applied.effective == "20"
        assert tree.journal.read_text() == ""


def test_failed_restore_keeps_going_then_rollback_retries(tree_ready: Tree) -> None:
    tree = tree_ready
    ratio, expire = tree.sysctl("vm.dirty_ratio"), tree.sysctl("vm.dirty_expire_centisecs")
    with pytest.raises(RestoreError) as caught, tree.changes() as host:
        host.apply(ratio, 40)
        host.apply(expire, 1000)
        text = break_knob(ratio)
    message = str(caught.value)
    assert message == (
        "could not restore sysctl vm.dirty_ratio to '20' (EISDIR: Is a directory): "
        "the journal keeps it, run `pgdyno rollback` to retry."
    )
    assert caught.value.failed == [ratio]
    assert read_value(expire) == "3000"  # the others were still restored
    mend_knob(ratio, text)
    assert read_value(ratio) == "40"
    left = tree.pending()
    assert [(c.knob, c.old, c.new) for c in left] == [(ratio, "20", "40")]
    with pytest.raises(UsageError, match="holds 1 change not restored"):
        ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    done = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys).restored
    assert [(r.knob, r.now, r.set_to) for r in done] == [(ratio, "20", "40")]
    assert read_value(ratio) == "20"
    assert rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys).restored == []


def test_restore_error_replaces_a_keyboard_interrupt_but_keeps_it(tree_ready: Tree) -> None:
    tree = tree_ready
    knob = tree.sysctl("vm.dirty_ratio")
    with pytest.raises(RestoreError) as caught, tree.changes() as host:
        host.apply(knob, 40)
        break_knob(knob)
        raise KeyboardInterrupt
    assert isinstance(caught.value.__context__, KeyboardInterrupt)


# Crash recovery ---------------------------------------------------------------------------


def change_line(tree: Tree, id_: int, name: str, old: str, new: str, boot_id: str) -> str:
    knob = tree.sysctl(name)
    record = {
        "op": "change",
        "id": id_,
        "kind": "sysctl",
        "name": name,
        "device": None,
        "path": str(knob.path),
        "old": old,
        "new": new,
        "at": "2025-01-01T00:00:00.000+00:00",
        "pid": 1,
        "boot_id": boot_id,
    }
    return json.dumps(record) + "\n"


def crashed(tree: Tree, *tail: str, boot_id: str = "boot-a") -> None:
    """The state a SIGKILL leaves: two changes journalled and made, one of them restored."""
    tree.journal.write_text(
        change_line(tree, 1, "vm.dirty_expire_centisecs", "3000", "1000", boot_id)
        + change_line(tree, 2, "kernel.sched_autogroup_enabled", "1", "0", boot_id)
        + json.dumps({"op": "restored", "id": 2, "at": "2025-01-01T00:00:01.000+00:00"})
        + "\n"
        + "".join(tail)
    )
    tree.sysctl("vm.dirty_expire_centisecs").path.write_text("1000\n")


def test_a_cut_record_that_names_too_little_is_unresolved_until_confirmed(
    tree_ready: Tree,
) -> None:
    """A record cut before its old value and ended by a newline (what an older pgdyno's repair
    left: damage inside a complete line): intact ones are restored, the cut one is named, new
    changes are refused, and only a confirmation sets the journal aside."""
    tree = tree_ready
    torn = change_line(tree, 3, "vm.dirty_ratio", "20", "40", "boot-a")[:37]
    crashed(tree, torn + "\n")
    with pytest.raises(UsageError, match="has damaged lines \\(4\\)"):
        ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert [(r.knob.name, r.found, r.now, r.set_to) for r in result.restored] == [
        ("vm.dirty_expire_centisecs", "1000", "3000", "1000")
    ]
    assert [(u.line, u.why) for u in result.unreadable] == [(4, "it is cut short")]
    with pytest.raises(UsageError, match="damaged lines"), tree.changes():
        pass  # a new apply would record changed values as the originals
    again = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert again.restored == [] and len(again.unreadable) == 1
    kept = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys, confirm_damaged=True)
    assert kept.set_aside is not None and torn + "\n" in kept.set_aside.read_text()
    ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)


@pytest.mark.parametrize("cut", range(1, 260, 3))
def test_a_record_cut_at_any_byte_is_restored_or_named(tree_ready: Tree, cut: int) -> None:
    """The change was made (a line cut inside, then ended by a newline): it is put back exactly
    when the cut record still holds what a restore needs, and named otherwise; never skipped
    silently."""
    tree = tree_ready
    line = change_line(tree, 3, "vm.dirty_ratio", "20", "40", "boot-a").rstrip("\n")
    if cut >= len(line):
        cut = len(line) - 1
    crashed(tree, line[:cut] + "\n")
    tree.sysctl("vm.dirty_ratio").path.write_text("40\n")
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    names = {r.knob.name for r in result.restored}
    assert "vm.dirty_expire_centisecs" in names
    if "vm.dirty_ratio" in names:
        assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"
        assert result.unreadable == []
    else:
        assert [u.line for u in result.unreadable] == [4]


@pytest.mark.parametrize("cut", range(1, 260, 3))
def test_a_torn_tail_is_dropped_and_blocks_nothing(
    tree_ready: Tree, cut: int, caplog: pytest.LogCaptureFixture
) -> None:
    """Issue 32: a last record without its newline was never completed, so its change was
    never made (the record is fsynced before the change): it is dropped with one log line,
    new changes are not refused, and rollback restores the rest and exits clean."""
    tree = tree_ready
    line = change_line(tree, 3, "vm.dirty_ratio", "20", "40", "boot-a").rstrip("\n")
    crashed(tree, line[: min(cut, len(line) - 1)])
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert [r.knob.name for r in result.restored] == ["vm.dirty_expire_centisecs"]
    assert result.unreadable == [] and result.failed is None
    assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"  # never changed, never written
    assert tree.journal.read_text() == ""
    assert [m for m in caplog.messages if "never completed" in m] != []
    ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)


def test_a_torn_tail_does_not_refuse_new_changes(tree_ready: Tree) -> None:
    tree = tree_ready
    tree.journal.write_text(change_line(tree, 1, "vm.dirty_ratio", "20", "40", "boot-a")[:60])
    ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    with tree.changes() as host:
        host.apply(tree.sysctl("vm.dirty_ratio"), 30)
    assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"


@pytest.mark.parametrize("tail", ["\0" * 40, '{"op": "rest', '{"op": "restored", "id": 1'])
def test_a_torn_restored_record_only_restores_again(tree_ready: Tree, tail: str) -> None:
    tree = tree_ready
    crashed(tree, tail)
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert result.unreadable == [] and result.failed is None
    assert tree.journal.read_text() == ""
    assert read_value(tree.sysctl("vm.dirty_expire_centisecs")) == "3000"


@pytest.mark.parametrize(
    ("damage", "why"),
    [
        ("garbage\n", "it is not a JSON record"),
        ("[1, 2]\n", "it is not a JSON record"),
        ('{"op": "wipe"}\n', "unknown op 'wipe'"),
    ],
)
def test_damage_in_the_middle_restores_the_rest_and_names_the_line(
    tree_ready: Tree, damage: str, why: str
) -> None:
    tree = tree_ready
    crashed(tree)
    lines = tree.journal.read_text().splitlines(keepends=True)
    tree.journal.write_text(lines[0] + damage + "".join(lines[1:]))
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert read_value(tree.sysctl("vm.dirty_expire_centisecs")) == "3000"  # intact: restored
    assert [(u.line, u.why) for u in result.unreadable] == [(2, why)]
    assert tree.journal.read_text() != ""  # kept until confirmed


def test_a_restored_record_naming_no_change_is_of_no_use_either_way(tree_ready: Tree) -> None:
    tree = tree_ready
    crashed(tree, '{"op": "restored", "id": 9, "at": "x"}\n')
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert (
        result.unreadable == [] and read_value(tree.sysctl("vm.dirty_expire_centisecs")) == "3000"
    )


def test_a_record_cannot_point_a_restore_elsewhere(tree_ready: Tree) -> None:
    tree = tree_ready
    crashed(tree)
    text = tree.journal.read_text()
    elsewhere = str(tree.journal.parent / "victim")
    tree.journal.write_text(
        text.replace(str(tree.sysctl("vm.dirty_expire_centisecs").path), elsewhere)
    )
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert [u.line for u in result.unreadable] == [1]
    assert "it names " in result.unreadable[0].why and "victim" in result.unreadable[0].why
    assert not Path(elsewhere).exists()


def test_changes_from_before_a_reboot_are_not_written_back(tree_ready: Tree) -> None:
    tree = tree_ready
    crashed(tree, boot_id="boot-before")
    done = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys).restored
    assert [(r.knob.name, r.rebooted, r.now) for r in done] == [
        ("vm.dirty_expire_centisecs", True, "1000")
    ]
    assert read_value(tree.sysctl("vm.dirty_expire_centisecs")) == "1000"
    assert tree.pending() == []


def test_one_writer_at_a_time(tree_ready: Tree) -> None:
    tree = tree_ready
    ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)  # no journal yet
    with tree.changes() as host:
        host.apply(tree.sysctl("vm.dirty_ratio"), 40)
        with pytest.raises(UsageError, match="another pgdyno command is using the host journal"):
            ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
        with pytest.raises(UsageError, match="another pgdyno command"):
            rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
        with pytest.raises(UsageError, match="another pgdyno command"), tree.changes():
            pass
    assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"


def test_host_changes_refuses_to_start_over_pending_changes(tree_ready: Tree) -> None:
    tree = tree_ready
    crashed(tree)
    with pytest.raises(UsageError, match="run `pgdyno rollback` first"), tree.changes():
        pass
    assert read_value(tree.sysctl("vm.dirty_expire_centisecs")) == "1000"


def test_knob_roots_must_match_the_journal(tree_ready: Tree) -> None:
    with tree_ready.changes() as host, pytest.raises(ValueError, match="lives under /proc, not "):
        host.apply(Knob.sysctl("vm.dirty_ratio", **LIVE), 40)


@pytest.mark.usefixtures("python_sigint")
def test_signals_are_held_until_the_critical_part_is_done() -> None:
    steps: list[str] = []
    with pytest.raises(KeyboardInterrupt):
        with _signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            steps.append("after the signal")
        steps.append("not reached")
    assert steps == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_two_work_directories_cannot_change_one_host_at_once(tree_ready: Tree) -> None:
    """Each work directory has its own journal, but the host is one: the second command's
    first change is refused while the first holds its changes, and allowed once it is done."""
    tree = tree_ready
    other = HostChanges(
        tree.journal.parent.parent / "other" / "host-journal.jsonl",
        is_root=True, proc_root=tree.proc, sys_root=tree.sys,
    )  # fmt: skip
    other.journal_path.parent.mkdir()
    knob = tree.sysctl("vm.dirty_expire_centisecs")
    with tree.changes() as first:
        first.apply(knob, 1000)
        with other, pytest.raises(UsageError) as caught:
            other.apply(tree.sysctl("vm.dirty_ratio"), 30)
        assert str(caught.value) == (
            f"another pgdyno command (pid {os.getpid()}, journal {tree.journal}) is changing "
            "this host's kernel settings: wait for it to finish, since two commands changing "
            "them at once would restore each other's values wrongly."
        )
        assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"  # untouched
    assert read_value(knob) == "3000"
    with other:  # the first command is done: the lock is free again
        assert other.apply(tree.sysctl("vm.dirty_ratio"), 30).effective == "30"
    assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"


def test_changes_a_killed_command_left_in_another_journal_block_the_host(
    tree_ready: Tree,
) -> None:
    """A SIGKILL leaves the lock free but the lock file naming the dead command's journal:
    the next command's first change sends the user to roll that journal back first."""
    tree = tree_ready
    crashed(tree)  # the killed command's journal: vm.dirty_expire_centisecs still 1000
    (tree.proc.parent / "pgdyno-host-settings.lock").write_text(f"pid 1, journal {tree.journal}")
    other_journal = tree.journal.parent.parent / "other" / "host-journal.jsonl"
    other_journal.parent.mkdir()
    other = HostChanges(other_journal, is_root=True, proc_root=tree.proc, sys_root=tree.sys)
    with other, pytest.raises(UsageError) as caught:
        other.apply(tree.sysctl("vm.dirty_ratio"), 30)
    assert str(caught.value) == (
        f"the host journal {tree.journal} of another work directory holds 1 change not "
        "restored (left by an interrupted run or by `pgdyno tune --apply`): run `pgdyno rollback "
        f"--workdir {tree.journal.parent}` first."
    )
    assert read_value(tree.sysctl("vm.dirty_ratio")) == "20"
    rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    with other:
        assert other.apply(tree.sysctl("vm.dirty_ratio"), 30).effective == "30"


# Transparent huge pages -------------------------------------------------------------------


def test_thp_knobs_are_an_allow_list() -> None:
    assert THP_SETTINGS == ("enabled", "defrag")
    with pytest.raises(UsageError) as caught:
        Knob.thp("khugepaged/defrag", **LIVE)
    assert str(caught.value) == (
        "'khugepaged/defrag' is not a transparent huge pages setting pgdyno changes: "
        "use one of enabled, defrag."
    )


def test_thp_read_value_is_the_bracketed_word(tree: Tree) -> None:
    assert read_value(tree.thp("enabled")) == "madvise"
    assert read_value(tree.thp("defrag")) == "madvise"
    tree.thp("enabled").path.write_text("[always] madvise never\n")
    assert read_value(tree.thp("enabled")) == "always"
    tree.thp("enabled").path.write_text("always madvise never\n")
    with pytest.raises(HostChangeError, match=r"names no active value: check .*/enabled\.$"):
        read_value(tree.thp("enabled"))


def test_thp_validate_takes_an_offered_word(tree: Tree) -> None:
    assert validate(tree.thp("enabled"), "never", is_root=True) == "never"
    assert validate(tree.thp("enabled"), " always ", is_root=True) == "always"
    assert validate(tree.thp("defrag"), "defer+madvise", is_root=True) == "defer+madvise"


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        (
            "enabled",
            "defer",
            "transparent_hugepage/enabled offers no 'defer' (it offers always, madvise, never): "
            "pick one of those.",
        ),
        ("enabled", "[never]", "offers no '[never]' "),
        ("enabled", 0, "offers no 0 "),
        ("enabled", False, "offers no False "),
        ("defrag", "sometimes", "(it offers always, defer, defer+madvise, madvise, never)"),
    ],
)
def test_thp_validate_refuses_words_the_file_does_not_offer(
    tree: Tree, name: str, value: object, message: str
) -> None:
    with pytest.raises(UsageError) as caught:
        validate(tree.thp(name), value, is_root=True)
    assert message in str(caught.value)
    assert str(caught.value).endswith(".")


def test_thp_validate_needs_root_and_the_file(tree: Tree) -> None:
    with pytest.raises(UsageError) as caught:
        validate(tree.thp("enabled"), "never", is_root=False)
    assert str(caught.value) == (
        "changing transparent_hugepage/enabled needs root: "
        "run pgdyno as root or remove it from the plan."
    )
    tree.thp("defrag").path.unlink()
    with pytest.raises(UsageError) as caught:
        validate(tree.thp("defrag"), "never", is_root=True)
    assert str(caught.value) == (
        "this kernel has no transparent huge pages setting defrag (no file "
        f"{tree.thp('defrag').path}; built without CONFIG_TRANSPARENT_HUGEPAGE?): "
        "remove it from the plan."
    )


def test_thp_change_is_journalled_and_restored(tree_ready: Tree) -> None:
    tree = tree_ready
    enabled, defrag = tree.thp("enabled"), tree.thp("defrag")
    with tree.changes() as host:
        assert host.apply(enabled, "never") == AppliedKnob(enabled, "madvise", "never", "never")
        host.apply(defrag, "defer")
        record = tree.lines()[0]
        assert record == {
            "op": "change",
            "id": 1,
            "kind": "thp",
            "name": "enabled",
            "device": None,
            "path": str(tree.sys / "kernel/mm/transparent_hugepage/enabled"),
            "old": "madvise",
            "new": "never",
            "at": record["at"],
            "pid": os.getpid(),
            "boot_id": "boot-a",
        }
        assert [(c.knob, c.old, c.new) for c in tree.pending()] == [
            (enabled, "madvise", "never"),
            (defrag, "madvise", "defer"),
        ]
        restored = host.restore()
        assert [(r.knob, r.found, r.now) for r in restored] == [
            (defrag, "defer", "madvise"),
            (enabled, "never", "madvise"),
        ]
        # A plain file keeps only the word written; the kernel lists every word again.
        enabled.path.write_text(THP_FILES["enabled"])
        host.apply(enabled, "always")
        assert read_value(enabled) == "always"
    assert read_value(enabled) == read_value(defrag) == "madvise"
    assert tree.pending() == []


def thp_line(tree: Tree, id_: int, name: str, old: str, new: str, boot_id: str) -> str:
    record = json.loads(change_line(tree, id_, "vm.dirty_ratio", old, new, boot_id))
    record |= {"kind": "thp", "name": name, "path": str(tree.thp(name).path)}
    return json.dumps(record) + "\n"


def test_thp_rollback_after_a_kill(tree_ready: Tree) -> None:
    """The journal a SIGKILL leaves with THP changed, beside an old-style sysctl record."""
    tree = tree_ready
    crashed(tree, thp_line(tree, 3, "enabled", "madvise", "never", "boot-a"))
    tree.thp("enabled").path.write_text("always madvise [never]\n")
    with pytest.raises(UsageError, match="holds 2 changes not restored"):
        ensure_clean(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    done = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys).restored
    assert [(str(r.knob), r.found, r.now, r.set_to) for r in done] == [
        ("transparent_hugepage/enabled", "never", "madvise", "never"),
        ("sysctl vm.dirty_expire_centisecs", "1000", "3000", "1000"),
    ]
    assert read_value(tree.thp("enabled")) == "madvise"
    assert rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys).restored == []


def test_thp_changed_before_a_reboot_is_not_written_back(tree_ready: Tree) -> None:
    tree = tree_ready
    tree.journal.write_text(thp_line(tree, 1, "defrag", "madvise", "never", "boot-before"))
    tree.thp("defrag").path.write_text("always defer defer+madvise madvise [never]\n")
    done = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys).restored
    assert [(r.knob.name, r.rebooted, r.now) for r in done] == [("defrag", True, "never")]
    assert read_value(tree.thp("defrag")) == "never"  # what the boot set is left alone
    assert tree.pending() == []


@pytest.mark.parametrize(
    ("edit", "why"),
    [
        ({"name": "khugepaged/defrag"}, "not a transparent huge pages setting pgdyno changes"),
        ({"device": "vda"}, "not a transparent huge pages setting"),
        ({"path": "/sys/kernel/mm/transparent_hugepage/khugepaged/defrag"}, "it names "),
        ({"kind": "hugepages"}, "unknown kind 'hugepages'"),
    ],
)
def test_a_thp_record_cannot_reach_other_files(
    tree_ready: Tree, edit: dict[str, str], why: str
) -> None:
    tree = tree_ready
    record = json.loads(thp_line(tree, 1, "enabled", "madvise", "never", "boot-a")) | edit
    tree.journal.write_text(json.dumps(record) + "\n" + thp_line(tree, 2, "defrag", "a", "b", "x"))
    result = rollback(tree.journal, proc_root=tree.proc, sys_root=tree.sys)
    assert [u.line for u in result.unreadable] == [1] and why in result.unreadable[0].why
    assert tree.file(tree.thp("enabled")) == THP_FILES["enabled"]
    assert tree.file(tree.thp("defrag")) == THP_FILES["defrag"]
