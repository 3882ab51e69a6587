"""Generated option values thrown at the CLI parser: one sentence or success, never a crash.

Every invocation is made to stop before doing work: `bench` always gets a `--pg-bin` that does
not exist (checked after every option is validated, before any server or pgbench is touched),
and the other commands run on an empty work directory. Whatever the values, pgdyno must answer
with an exit status from ExitStatus, and a failure with exactly one `pgdyno: error: ` line that
holds no raw control character -- never an internal error or a traceback.
"""

from __future__ import annotations

import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_env
from pgdyno.cli import main
from pgdyno.errors import ExitStatus

MISSING_BIN = "/nonexistent/pgdyno-property/bin"

# Values a hostile or careless user types: numbers of every kind, words, empties, escapes.
TRICKY = st.sampled_from([
    "", " ", ",", ",,", "0", "-0", "-1", "1", "1.5", "0.5", "1e999", "-1e999", "inf", "-inf",
    "nan", "NaN", "Infinity", "99999999999999999999999", "1_000", "0x10", "٣", "auto", "full",
    "clients", "1,2,4", "1,,2", "a@b", "x@0", "x@-1", "select-only@2", "\x1b]0;TITLE\x07",
    "\x00", "line\nbreak", "[red]markup[/]", ":smile:", "password=S3cret", "--help",
    "postgresql://u:S3cret@[::1", "host=x password='S3cret",
])  # fmt: skip
VALUE = st.one_of(
    TRICKY,
    st.text(max_size=12),
    st.integers().map(str),
    st.floats().map(repr),
    st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6).map(str),
)

BENCH_OPTIONS = [
    "-w", "--workload", "-f", "-s", "--scale", "-c", "--clients", "-j", "--jobs", "-T", "--time",
    "-M", "-R", "--rate", "-L", "--latency-limit", "--repeats", "--warmup", "--dsn", "--set",
    "--latency-log", "--trim", "--pg-version",
]  # fmt: skip
EXIT_CODES = {int(status) for status in ExitStatus}


# Plausible values too, so that generated command lines also get past the first check and
# reach the later ones (combinations, the dataset scale, --pg-bin).
PLAUSIBLE = {
    "-w": ["select-only", "tpcb-like,select-only", "simple-update@2"],
    "-s": ["small", "1", "medium", "2,4"], "-c": ["1", "1,2,4", "8"],
    "-j": ["auto", "clients", "2", "1"], "-T": ["1", "3", "60"], "-M": ["simple", "prepared"],
    "-R": ["100", "0.5"], "-L": ["10", "0.1"], "--repeats": ["1", "3"], "--warmup": ["0", "5"],
    "--dsn": ["host=/tmp dbname=x", "", "postgresql://u:S3cret@h/db"],
    "--set": ["work_mem=8MB"], "--latency-log": ["auto", "full", "0.1", "1"],
    "--trim": ["0", "2", "5"], "--pg-version": ["14", "18", "13", "99"],
    "--limit": ["0", "10"], "--session": ["1"], "--comparison": ["1"],
    "--fail-on": ["warning", "never"],
}  # fmt: skip
ALIASES = {"--workload": "-w", "--scale": "-s", "--clients": "-c", "--jobs": "-j",
           "--time": "-T", "--rate": "-R", "--latency-limit": "-L"}  # fmt: skip


def _pair(option: str) -> st.SearchStrategy[list[str]]:
    plausible = PLAUSIBLE.get(ALIASES.get(option, option), ["1"])
    value = st.one_of(st.sampled_from(plausible), VALUE)
    return st.tuples(value, st.booleans()).map(
        lambda t: [f"{option}={t[0]}"] if t[1] and option.startswith("--") else [option, t[0]]
    )


def _option_args(options: list[str]) -> st.SearchStrategy[list[str]]:
    """Up to six options with generated values, as `-x V` or `--long=V`."""
    pair = st.sampled_from(options).flatmap(_pair)
    return st.lists(pair, max_size=6).map(lambda pairs: [a for p in pairs for a in p])


@pytest.fixture(scope="module")
def empty_workdir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pgdyno-property-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _check(workdir: Path, cache_dir: Path, args: list[str]) -> None:
    env = make_env(workdir, cache_dir)
    code = main(args, env)
    assert isinstance(env.stderr, io.StringIO)
    stderr = env.stderr.getvalue()
    assert code in EXIT_CODES, (args, code, stderr)
    assert "internal error" not in stderr and "Traceback" not in stderr, (args, stderr)
    assert "S3cret" not in stderr, (args, stderr)
    if code != ExitStatus.OK:
        lines = stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), (args, stderr)
        assert not any(ord(c) < 0x20 for c in lines[0]), (args, stderr)
        assert len(lines[0]) > len("pgdyno: error: ") + 10, (args, stderr)


COMMON = settings(
    max_examples=int(os.environ.get("PGDYNO_PROPERTY_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@COMMON
@given(args=_option_args(BENCH_OPTIONS))
def test_bench_options_never_crash(empty_workdir: Path, cache_dir: Path, args: list[str]):
    full = ["bench", *args, "--pg-bin", MISSING_BIN, "--workdir", str(empty_workdir)]
    _check(empty_workdir, cache_dir, full)
    # Nothing was started or created: every path stops at validation or at --pg-bin.
    assert not (empty_workdir / "clusters").exists()


@COMMON
@given(
    command=st.sampled_from([
        ["runs", "list"], ["runs", "show"], ["report"], ["sandbox", "stop"],
        ["sandbox", "status"], ["doctor", "--from", "/nonexistent/snapshot.json"],
    ]),
    args=_option_args(["--limit", "--session", "--comparison", "--last", "--pg-version",
                       "--fail-on", "--json", "--csv", "-o", "--timeline"]),
    positional=st.lists(VALUE, max_size=2),
)  # fmt: skip
def test_other_commands_never_crash(
    empty_workdir: Path, cache_dir: Path, command: list[str], args: list[str],
    positional: list[str],
):  # fmt: skip
    full = [*command, *args, *positional, "--workdir", str(empty_workdir)]
    _check(empty_workdir, cache_dir, full)
