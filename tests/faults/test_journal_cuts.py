"""The host journal cut at every byte of its last record, and damaged in the middle, on sysctls.

A last line without its newline is a record whose write never completed (issue 32): every
record is fsynced before its change, so pgdyno takes that change as never made. After each cut,
`pgdyno rollback` drops the torn record with one log line, exits 0 and puts back every change
the whole records name; the setting of the torn record is left as it is (here the cut was made
after the fact, so the test sets it back by hand, as the user would). Damage inside a complete
line still exits non-zero naming what the user must do, until `--confirm-damaged`.

The host journal is cut after real sysctl changes (root); the PostgreSQL journal's sweep,
which changes no host setting, is tests/faults/test_pg_journal_cuts.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT, Cli, one_clear_sentence
from pgdyno.host.knobs import Knob
from pgdyno.undo.host import HostChanges

HOST_JOURNAL = "host-journal.jsonl"
LIVE = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
SYSCTLS = ("vm.swappiness", "vm.dirty_expire_centisecs")


@pytest.fixture
def sysctls() -> Iterator[dict[str, str]]:
    if not IS_ROOT:
        pytest.skip("changes sysctls: needs root")
    paths = {name: Path("/proc/sys", *name.split(".")) for name in SYSCTLS}
    before = {name: path.read_text().strip() for name, path in paths.items()}
    yield before
    for name, path in paths.items():
        path.write_text(before[name] + "\n")


def host_state() -> dict[str, str]:
    return {name: Path("/proc/sys", *name.split(".")).read_text().strip() for name in SYSCTLS}


def change_host(workdir: Path) -> list[str]:
    journal = workdir / HOST_JOURNAL
    with HostChanges(journal, keep=True, **LIVE) as host:
        host.apply(Knob.sysctl("vm.swappiness", **LIVE), 7)
        host.apply(Knob.sysctl("vm.dirty_expire_centisecs", **LIVE), 1234)
    return journal.read_text().splitlines()


def test_host_journal_cut_at_every_point_and_damaged_in_the_middle(
    run_cli: Cli, workdir: Path, sysctls: dict[str, str]
) -> None:
    before = host_state()
    lines = change_host(workdir)
    assert run_cli(workdir, "rollback").code == 0 and host_state() == before
    last = lines[-1]
    for cut in range(1, len(last)):  # every byte: a cut costs only a rollback
        fresh = change_host(workdir)  # the same changes, new time stamps
        assert len(fresh) == len(lines)
        (workdir / HOST_JOURNAL).write_text("\n".join(fresh[:-1]) + "\n" + fresh[-1][:cut])
        back = run_cli(workdir, "rollback")
        assert back.code == 0, (cut, back.stderr)
        assert host_state()["vm.swappiness"] == before["vm.swappiness"]  # whole: restored
        Path("/proc/sys/vm/dirty_expire_centisecs").write_text(
            before["vm.dirty_expire_centisecs"] + "\n"
        )  # the torn record's change, set back by the user
        assert host_state() == before
    print(f"host journal: {len(last) - 1} cuts, each torn record dropped")

    change_host(workdir)
    journal = workdir / HOST_JOURNAL
    text = journal.read_text().splitlines()
    journal.write_text("\n".join([text[0], "\x00garbage", *text[1:]]) + "\n")
    back = run_cli(workdir, "rollback")
    assert back.code == 1 and "line 2 of" in one_clear_sentence(back.stderr)
    assert host_state() == before  # both intact records restored
    refused = run_cli(workdir, "rollback")
    assert refused.code == 1  # kept until confirmed
    assert run_cli(workdir, "rollback", "--confirm-damaged").code == 0
    assert run_cli(workdir, "rollback").code == 0
