"""scripts/record_pg_settings.py, run on the real binaries, reproduces the committed catalog.

Cheap for one version: the bundled PostgreSQL 18 in a throwaway sandbox, its rows against the
catalog's rows of 18 (every version was reproduced byte for byte when the table was written).
The clock's cost, too, comes from the real binaries: pg_test_timing of this host.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from conftest import make_env
from pgdyno.postgres.binaries import Binaries
from pgdyno.postgres.settings_catalog import CATALOG_FILE, catalog_text, parse_catalog
from pgdyno.postgres.timing import ClockTiming
from pgdyno.tune.session import CLOCK_FILE, clock_key, keep_clock, measure_here

SCRIPT = Path(__file__).parents[2] / "scripts" / "record_pg_settings.py"


def script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("record_pg_settings", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_script_reproduces_the_committed_rows(binaries: Binaries) -> None:
    version, rows = script().record_major(binaries)
    assert version.startswith(f"{binaries.major}.")
    committed = parse_catalog(CATALOG_FILE.read_text(encoding="utf-8"))
    assert tuple(sorted(rows)) == committed[binaries.major]
    # and the table it writes from them is the committed one
    assert catalog_text({**committed, binaries.major: rows}) == CATALOG_FILE.read_text()


def test_the_clock_is_measured_with_the_resolved_binaries(workdir: Path, cache_dir: Path) -> None:
    clock = measure_here(make_env(workdir, cache_dir))
    assert clock.timing is not None, clock.why
    assert clock.timing.per_loop_ns > 0 and clock.timing.histogram
    assert clock.source.startswith("pg_test_timing of PostgreSQL ")


def test_the_clock_is_measured_once_per_boot_and_clock_source(
    workdir: Path, cache_dir: Path, binaries: Binaries
) -> None:
    """A later `tune` in the same work directory takes the figure kept there (a figure no real
    clock gives shows it was not measured again); another boot's figure is measured anew."""
    env = make_env(workdir, cache_dir)
    first = measure_here(env)
    assert first.timing is not None, first.why
    kept = ClockTiming(123456.5, ((1, 1.0, 7),))
    key = clock_key(env, binaries)
    keep_clock(workdir / CLOCK_FILE, key, kept)
    assert measure_here(env).timing == kept
    keep_clock(workdir / CLOCK_FILE, {**key, "boot_id": "another boot"}, kept)
    again = measure_here(env).timing
    assert again is not None and again != kept and again.per_loop_ns > 0
