"""Transparent huge pages changed on the real kernel through the journal, and put back.

Every test runs under a guard fixture that reads /sys/kernel/mm/transparent_hugepage/{enabled,
defrag} first and, whatever happens, writes the words back with plain code independent of
pgdyno, then asserts they are as they were.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import IS_ROOT
from pgdyno.errors import UsageError
from pgdyno.host.knobs import THP_SETTINGS, Knob
from pgdyno.undo.host import HostChanges, ensure_clean, pending, rollback

THP = Path("/sys/kernel/mm/transparent_hugepage")
LIVE = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}

pytestmark = [
    pytest.mark.skipif(not IS_ROOT, reason="changes real kernel settings: needs root"),
    pytest.mark.skipif(
        not all((THP / name).is_file() for name in THP_SETTINGS), reason="this kernel has no THP"
    ),
    pytest.mark.skipif(
        not os.access(THP / "enabled", os.W_OK), reason="/sys is read-only here (a container?)"
    ),
]

# Applies the changes given as JSON, says so, then waits to be killed, as a comparison would.
CHILD = """
import json, sys, time
from pathlib import Path
from pgdyno.undo.host import HostChanges
from pgdyno.host.knobs import Knob

roots = {"proc_root": Path("/proc"), "sys_root": Path("/sys")}
with HostChanges(Path(sys.argv[1]), **roots) as host:
    for name, value in json.loads(sys.argv[2]):
        host.apply(Knob.thp(name, **roots), value)
    print("applied", flush=True)
    time.sleep(120)
"""


def read_thp() -> dict[str, str]:
    """The active word of each file, read without pgdyno."""
    words = {}
    for name in THP_SETTINGS:
        active = re.search(r"\[(.+?)\]", (THP / name).read_text())
        assert active is not None
        words[name] = active.group(1)
    return words


def offered(name: str) -> list[str]:
    return [word.strip("[]") for word in (THP / name).read_text().split()]


def another(name: str, current: str) -> str:
    """A word the file offers other than the current one ("never" if it can)."""
    others = [word for word in offered(name) if word != current]
    return "never" if "never" in others else others[0]


@pytest.fixture
def thp_settings() -> Iterator[dict[str, str]]:
    before = read_thp()
    try:
        yield before
    finally:
        for name, word in before.items():
            if read_thp()[name] != word:
                (THP / name).write_text(word + "\n")
        assert read_thp() == before


def test_thp_change_is_read_back_and_restored(thp_settings: dict[str, str], tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    wanted = {name: another(name, word) for name, word in thp_settings.items()}
    with HostChanges(journal, **LIVE) as host:
        for name in THP_SETTINGS:
            applied = host.apply(Knob.thp(name, **LIVE), wanted[name])
            assert (applied.old, applied.effective) == (thp_settings[name], wanted[name])
        assert read_thp() == wanted
        assert [json.loads(line)["kind"] for line in journal.read_text().splitlines()] == [
            "thp",
            "thp",
        ]
        restored = host.restore()
        assert [(r.knob.name, r.found, r.now) for r in restored] == [
            ("defrag", wanted["defrag"], thp_settings["defrag"]),
            ("enabled", wanted["enabled"], thp_settings["enabled"]),
        ]
        assert read_thp() == thp_settings
        host.apply(Knob.thp("enabled", **LIVE), wanted["enabled"])
        assert read_thp()["enabled"] == wanted["enabled"]
    assert read_thp() == thp_settings
    assert pending(journal, **LIVE) == []


def test_a_word_the_kernel_does_not_offer_changes_nothing(
    thp_settings: dict[str, str], tmp_path: Path
):
    journal = tmp_path / "host-journal.jsonl"
    with HostChanges(journal, **LIVE) as host:
        with pytest.raises(UsageError, match=r"transparent_hugepage/enabled offers no 'defer' "):
            host.apply(Knob.thp("enabled", **LIVE), "defer")  # a defrag word only
        assert read_thp() == thp_settings
        assert journal.read_text() == ""


def test_sigkill_then_rollback(thp_settings: dict[str, str], tmp_path: Path):
    journal = tmp_path / "host-journal.jsonl"
    enabled = another("enabled", thp_settings["enabled"])
    defrag = another("defrag", thp_settings["defrag"])
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(journal), json.dumps([["enabled", enabled],
                                                                ["defrag", defrag]])],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == "applied\n", child.stderr.read() if child.stderr else line
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        child.kill()
        child.communicate()
    assert read_thp() == {"enabled": enabled, "defrag": defrag}  # the kill left them changed
    with pytest.raises(UsageError, match="holds 2 changes not restored"):
        ensure_clean(journal, **LIVE)
    done = rollback(journal, **LIVE).restored
    assert [(str(r.knob), r.set_to, r.now) for r in done] == [
        ("transparent_hugepage/defrag", defrag, thp_settings["defrag"]),
        ("transparent_hugepage/enabled", enabled, thp_settings["enabled"]),
    ]
    assert read_thp() == thp_settings
    assert rollback(journal, **LIVE).restored == []
    ensure_clean(journal, **LIVE)
