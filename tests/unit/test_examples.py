"""Every plan in examples/ is valid: its form, its matrix, and each PostgreSQL setting against
the recorded pg_settings of the version the set runs (the checks `pgdyno plan check` makes
before anything runs; sysctls and block settings need the live kernel and are checked by
the compare end-to-end tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.cli.compare_cmd import bench_spec
from pgdyno.plan.check import DEFAULT_PG_VERSION
from pgdyno.plan.load import load_plan
from pgdyno.plan.model import applied_sets
from pgdyno.postgres.settings_meta import check_settings, settings_meta_from_json

EXAMPLES = sorted((Path(__file__).parent.parent.parent / "examples").glob("*.toml"))
PG_SETTINGS = Path(__file__).parent.parent / "data" / "pg_settings"


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plan_is_valid(path: Path) -> None:
    plan = load_plan(path)
    spec = bench_spec(plan, cpus=2)
    assert spec.repeats >= 2  # a verdict needs repeats
    for s in applied_sets(plan.spec):
        version = s.pg_version or plan.spec.pg_version or DEFAULT_PG_VERSION
        meta = settings_meta_from_json(PG_SETTINGS / f"pg{version}.json")
        assert set(check_settings(meta, s.pg, str(version))) == set(s.pg)
