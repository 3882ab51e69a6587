"""The suite's own scheduling (tests/parallel.py): the simulations run at a lower priority and
give it back; every simulation module is named, so none keeps a CPU from the waiting tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import parallel

ROOT = Path(__file__).parent.parent.parent


@pytest.mark.skipif(os.geteuid() != 0, reason="giving the priority back needs root")
def test_a_simulation_runs_at_nice_10_then_gives_the_priority_back() -> None:
    before = os.getpriority(os.PRIO_PROCESS, 0)
    with parallel.lowered_priority(True):
        assert os.getpriority(os.PRIO_PROCESS, 0) == max(before, parallel.SIMULATION_NICE)
    assert os.getpriority(os.PRIO_PROCESS, 0) == before
    with parallel.lowered_priority(False):
        assert os.getpriority(os.PRIO_PROCESS, 0) == before


@pytest.mark.parametrize("path", sorted(ROOT.glob("tests/unit/test_*_sim.py")), ids=str)
def test_every_simulation_module_is_named(path: Path) -> None:
    assert path.relative_to(ROOT).as_posix() in parallel.SIMULATION_MODULES
    assert all((ROOT / module).is_file() for module in parallel.SIMULATION_MODULES)
