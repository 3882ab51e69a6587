"""Transparent huge pages in plans: `[set.thp]` is read, made cumulative in ladders, checked
against the THP files (a fake /sys tree here; `plan check` on the live one, which it only
reads), and becomes journalled host knobs like sysctls and block settings."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from pgdyno.cli import main
from pgdyno.environment import Environment, ResultsLocation
from pgdyno.errors import UsageError
from pgdyno.host.knobs import THP_SETTINGS, Knob
from pgdyno.plan.check import CheckedSet, HostTarget, check_plan, find_installed
from pgdyno.plan.load import load_plan
from pgdyno.plan.model import SetSpec, ThpSpec, applied_sets

LIVE_THP = Path("/sys/kernel/mm/transparent_hugepage")

HEAD = """name = "thp"
{mode}
[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]

[[set]]
name = "base"

[[set]]
name = "off"
[set.thp]
enabled = "never"

[[set]]
name = "defrag"
[set.thp]
defrag = {defrag}
"""


def write_plan(tmp_path: Path, *, mode: str = "", defrag: str = '"madvise"') -> Path:
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD.format(mode=mode, defrag=defrag))
    return plan


@pytest.fixture
def sys_root(tmp_path: Path) -> Path:
    thp = tmp_path / "sys/kernel/mm/transparent_hugepage"
    thp.mkdir(parents=True)
    (thp / "enabled").write_text("[always] madvise never\n")
    (thp / "defrag").write_text("always defer defer+madvise [madvise] never\n")
    return tmp_path / "sys"


def checked(
    plan: Path, sys_root: Path, tmp_path: Path, *, is_root: bool = True
) -> list[CheckedSet]:
    return check_plan(
        load_plan(plan), cache_dir=tmp_path / "cache", meta_for=lambda _b: {},
        host=HostTarget(None, is_root, tmp_path / "proc", sys_root), find=find_installed,
    )  # fmt: skip


def test_the_model_holds_exactly_the_thp_knobs() -> None:
    assert tuple(ThpSpec.model_fields) == THP_SETTINGS
    assert SetSpec(name="a", thp={"defrag": "never"}).thp_settings == {"defrag": "never"}


def test_sets_become_thp_knobs(tmp_path: Path, sys_root: Path) -> None:
    sets = checked(write_plan(tmp_path), sys_root, tmp_path)
    roots = {"proc_root": tmp_path / "proc", "sys_root": sys_root}
    assert [c.host for c in sets] == [
        [],
        [(Knob.thp("enabled", **roots), "never")],
        [(Knob.thp("defrag", **roots), "madvise")],
    ]
    assert sets[1].requested()["host"] == {"transparent_hugepage/enabled": "never"}


def test_a_ladder_keeps_the_thp_of_the_steps_before(tmp_path: Path, sys_root: Path) -> None:
    plan = write_plan(tmp_path, mode='mode = "ladder"', defrag='"defer"')
    assert [s.thp_settings for s in applied_sets(load_plan(plan).spec)] == [
        {},
        {"enabled": "never"},
        {"enabled": "never", "defrag": "defer"},
    ]
    last = checked(plan, sys_root, tmp_path)[-1]
    assert last.requested()["host"] == {
        "transparent_hugepage/enabled": "never",
        "transparent_hugepage/defrag": "defer",
    }


def test_a_word_the_file_does_not_offer_is_refused_with_line_and_key(
    tmp_path: Path, sys_root: Path
) -> None:
    plan = write_plan(tmp_path, defrag='"sometimes"')
    with pytest.raises(UsageError) as caught:
        checked(plan, sys_root, tmp_path)
    assert str(caught.value) == (
        f"{plan} line 19 (set 'defrag', thp.defrag): transparent_hugepage/defrag offers no "
        "'sometimes' (it offers always, defer, defer+madvise, madvise, never): "
        "pick one of those."
    )


@pytest.mark.parametrize(
    ("line", "words"),
    [
        (
            'khugepaged = "1"',
            r"line 19 \(set 'defrag', thp.khugepaged\): unknown key 'khugepaged'; "
            r"the keys allowed here are enabled, defrag\.",
        ),
        ("defrag = 0", r"line 19 \(set 'defrag', thp.defrag\)"),
        ('defrag = "never\\u0007"', "control character"),
    ],
)
def test_only_text_for_the_two_files_is_accepted(tmp_path: Path, line: str, words: str) -> None:
    plan = write_plan(tmp_path)
    plan.write_text(plan.read_text().replace('defrag = "madvise"', line))
    with pytest.raises(UsageError, match=words):
        load_plan(plan)


def test_changing_thp_needs_root(tmp_path: Path, sys_root: Path) -> None:
    with pytest.raises(UsageError, match=r"thp.enabled\): changing transparent_hugepage/enabled"):
        checked(write_plan(tmp_path), sys_root, tmp_path, is_root=False)


@pytest.mark.skipif(not (LIVE_THP / "enabled").is_file(), reason="this kernel has no THP")
@pytest.mark.skipif(os.geteuid() != 0, reason="checking a host setting needs root")
def test_plan_check_reads_the_live_files_and_changes_nothing(tmp_path: Path) -> None:
    before = {name: (LIVE_THP / name).read_text() for name in THP_SETTINGS}
    workdir, cache = tmp_path / "work", tmp_path / "cache"
    env = Environment(
        data_dir=workdir, cache_dir=cache, results=ResultsLocation(workdir / "results.sqlite"),
        env={"PGDYNO_CACHE_DIR": str(cache)}, stdout=io.StringIO(), stderr=io.StringIO(),
        is_root=True,
    )  # fmt: skip
    code = main(["plan", "check", str(write_plan(tmp_path)), "--workdir", str(workdir)], env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    assert code == 0, env.stderr.getvalue()
    shown = " ".join(env.stdout.getvalue().split())
    assert "transparent_hugepage/enabled=never" in shown
    assert {name: (LIVE_THP / name).read_text() for name in THP_SETTINGS} == before
