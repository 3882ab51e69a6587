"""Generated plan files thrown at `pgdyno plan check`: one sentence or success, never a crash.

Plans are built from a valid skeleton with generated parts (keys, values, nesting, numbers of
every kind, strings with control characters, wrong types, unknown and hostile sysctls and
settings), and from raw generated text. `plan check` runs in-process on a fresh work directory
and an empty binaries cache, so it reads the recorded settings catalog and starts no server.
Whatever the plan, the exit status is 0, 2 or 3, a failure is exactly one `pgdyno: error: `
line with no raw control character, and nothing is created in either directory.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgdyno.cli import main
from pgdyno.environment import Environment, ResultsLocation

IS_ROOT = os.geteuid() == 0
EXIT_CODES = {0, 2, 3}
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# -- TOML text from Python values (the writer tomllib lacks) -------------------------------------


def toml_string(text: str) -> str:
    """A TOML basic string: JSON's escapes are TOML's, but astral characters stay whole (TOML
    has no surrogate escapes) and DEL and C1 controls are escaped (TOML refuses them raw)."""
    quoted = json.dumps(text, ensure_ascii=False)
    return re.sub(r"[\x7f-\x9f]", lambda m: f"\\u{ord(m.group()):04x}", quoted)


def toml_key(key: str) -> str:
    return toml_string(key)


def toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    assert isinstance(value, dict)
    return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"


# -- generated parts ----------------------------------------------------------------------------

HOSTILE_TEXT = st.sampled_from([
    "|/tmp/evil %p", "/tmp/evil", "\x1b]0;TITLE\x07", "a\nb = 1", "\x00", "\u009b", "'; DROP",
    "99999999999999999999999", "inf", "nan", "-1", "6XB", "1e400", "", " ", "on", "lz4",
])  # fmt: skip
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)  # TOML has no surrogates
PLAUSIBLE = st.sampled_from([
    "4MB", "1GB", "30s", 20, 10, 1, 0, 4.0, 1.1, True, False, "on", "lz4", "64MB", 67108864,
    "5min", 100,
])  # fmt: skip
SCALAR = st.one_of(
    PLAUSIBLE,
    st.booleans(),
    st.integers(),
    st.integers(min_value=-(1 << 70), max_value=1 << 70),
    st.floats(),  # inf and nan included
    TEXT,
    HOSTILE_TEXT,
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
PG_NAMES = st.one_of(
    st.sampled_from([
        "work_mem", "shared_buffers", "random_page_cost", "wal_compression", "jit",
        "archive_command", "shared_preload_libraries", "ssl_passphrase_command", "data_directory",
        "unix_socket_permissions", "DateStyle", "max_connections", "block_size",
        "pg_stat_statements.max", "a.b.c", "x; rm -rf /", "work_mem\x1b",
    ]),
    TEXT,
)  # fmt: skip
SYSCTL_NAMES = st.one_of(
    st.sampled_from([
        "vm.dirty_ratio", "vm.dirty_background_bytes", "vm.swappiness", "kernel.core_pattern",
        "kernel.modprobe", "kernel/core_pattern", "vm/../kernel/core_pattern", "vm.mmap_min_addr",
        "kernel.sched_autogroup_enabled", "kernel.shmmax", "fs.file-max", "net.ipv4.ip_forward",
        "vm.no_such_knob", "vm..x", "vm.drop_caches",
    ]),
    TEXT,
)  # fmt: skip
MATRIX_KEYS = st.sampled_from([
    "workloads", "scales", "clients", "jobs", "duration", "repeats", "warmup", "protocol", "rate",
    "latency_limit", "latency_log", "prewarm", "per_statement", "progress", "bogus",
])  # fmt: skip
DEEP = st.integers(min_value=1, max_value=700).map(lambda n: "[" * n + "1" + "]" * n) | st.integers(
    min_value=1, max_value=700
).map(lambda n: "{a=" * n + "1" + "}" * n)


@st.composite
def plans(draw: st.DrawFn) -> str:
    matrix: dict[str, object] = {
        "workloads": ["select-only"], "scales": [1], "clients": [1], "duration": 2,
    }  # fmt: skip
    for key, value in draw(st.dictionaries(MATRIX_KEYS, VALUE, max_size=1)).items():
        matrix[key] = value
    lines = [f"name = {toml_value(draw(st.sampled_from(['p', '', 'ß']) | TEXT))}"]
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        version = draw(st.sampled_from([13, 14, 15, 16, 17, 18, 19, "18"]))
        lines.append(f"pg_version = {toml_value(version)}")
    lines.append("[matrix]")
    lines += [f"{k} = {toml_value(v)}" for k, v in matrix.items()]
    for index in range(draw(st.integers(min_value=2, max_value=3))):
        lines += ["[[set]]", f'name = "s{index}"']
        pg = draw(st.dictionaries(PG_NAMES, SCALAR | VALUE, max_size=3))
        sysctl = draw(st.dictionaries(SYSCTL_NAMES, SCALAR | VALUE, max_size=2))
        lines += ["[set.pg]", *(f"{toml_key(k)} = {toml_value(v)}" for k, v in pg.items())]
        if draw(st.integers(min_value=0, max_value=4)) == 0:
            lines.append(f"deep = {draw(DEEP)}")
        if sysctl:
            lines += ["[set.sysctl]"]
            lines += [f"{toml_key(k)} = {toml_value(v)}" for k, v in sysctl.items()]
    return "\n".join(lines) + "\n"


RAW = st.text(
    alphabet=st.sampled_from(list("[]{}=\"'#\n .,-_0123456789abcinfset\\\x1b")), max_size=300
)


# -- running plan check -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def places() -> Iterator[tuple[Path, Path]]:
    root = Path(tempfile.mkdtemp(prefix="pgdyno-plan-property-"))
    (root / "work").mkdir()
    (root / "cache").mkdir()
    yield root / "work", root / "cache"
    shutil.rmtree(root)


def check_plan_text(places: tuple[Path, Path], text: str) -> None:
    workdir, cache = places
    plan = workdir.parent / "plan.toml"
    plan.write_text(text, encoding="utf-8", errors="surrogatepass")
    env = Environment(
        data_dir=workdir, cache_dir=cache, results=ResultsLocation(workdir / "results.sqlite"),
        env={"PGDYNO_CACHE_DIR": str(cache)}, stdout=io.StringIO(), stderr=io.StringIO(),
        is_root=IS_ROOT,
    )  # fmt: skip
    code = main(["plan", "check", str(plan), "--workdir", str(workdir)], env)
    assert isinstance(env.stdout, io.StringIO) and isinstance(env.stderr, io.StringIO)
    stderr = env.stderr.getvalue()
    assert code in EXIT_CODES, (code, stderr)
    assert "internal error" not in stderr and "Traceback" not in stderr, stderr
    if code != 0:
        lines = [line for line in stderr.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("pgdyno: error: "), stderr
        assert not CONTROL.search(lines[0]), stderr
    assert list(workdir.iterdir()) == [] and list(cache.iterdir()) == []


@settings(SETTINGS, max_examples=200)
@given(text=plans())
def test_generated_plans_get_one_sentence_or_pass(places, text: str):
    check_plan_text(places, text)


@SETTINGS
@given(text=RAW)
def test_raw_text_gets_one_sentence(places, text: str):
    check_plan_text(places, text)


@SETTINGS
@given(depth=st.integers(min_value=1, max_value=3000), opener=st.sampled_from(["[", "{a="]))
def test_any_nesting_depth_gets_one_sentence_or_passes(places, depth: int, opener: str):
    closer = "]" if opener == "[" else "}"
    body = opener * depth + "1" + closer * depth
    check_plan_text(
        places,
        'name = "n"\n[matrix]\nworkloads = ["select-only"]\nscales = [1]\nclients = [1]\n'
        f'[[set]]\nname = "a"\n[[set]]\nname = "b"\n[set.pg]\nx = {body}\n',
    )
