"""Every plan in examples/ is valid: its form, its matrix, and each PostgreSQL setting against
the recorded pg_settings of the version the set runs (the checks `pgdyno plan check` makes
before anything runs; sysctls and block settings need the live kernel and are checked by
the compare end-to-end tests)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgdyno.experiment.matrix import bench_spec
from pgdyno.plan.check import DEFAULT_PG_VERSION
from pgdyno.plan.load import load_plan
from pgdyno.plan.model import applied_sets
from pgdyno.plan.policy import Allowed, check_pg_name, check_sysctl_name, check_sysctl_value
from pgdyno.postgres.settings import check_settings, settings_meta_from_json

EXAMPLES = sorted((Path(__file__).parent.parent.parent / "examples").glob("*.toml"))
PG_SETTINGS = Path(__file__).parent.parent / "data" / "pg_settings"


def test_there_are_examples() -> None:
    assert len(EXAMPLES) >= 6


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_example_plan_is_valid(path: Path) -> None:
    plan = load_plan(path)
    spec = bench_spec(plan, cpus=2)
    assert spec.repeats >= 2 or spec.adaptive is not None  # a verdict needs rounds
    for s in applied_sets(plan.spec):
        version = s.pg_version or plan.spec.pg_version or DEFAULT_PG_VERSION
        meta = settings_meta_from_json(PG_SETTINGS / f"pg{version}.json")
        assert set(check_settings(meta, s.pg, str(version))) == set(s.pg)
        for name in s.pg:  # an example needs no --allow-pg-setting
            check_pg_name(name, Allowed())
        for name, value in s.sysctl.items():  # nor --allow-sysctl, and fits the kernel's range
            check_sysctl_value(name, check_sysctl_name(name, Allowed()), str(value))
