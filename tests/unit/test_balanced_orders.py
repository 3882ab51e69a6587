"""compare's balanced orders (issue 33): carry-over balanced across round boundaries after
every complete block, every set at every position equally often, replayed from the seed,
recorded with the rounds and continued on --resume."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgdyno.errors import UsageError
from pgdyno.experiment.rounds import RoundLog, RoundLoop
from pgdyno.experiment.schedule import (
    Balanced,
    Rotation,
    Schedule,
    carryover_counts,
    chained_rows,
    orders_note,
)
from pgdyno.experiment.sets_runner import design_for
from pgdyno.records.rounds import RoundHistory
from pgdyno.records.stored import NewComparison
from pgdyno.results.decode import rounds as decode_rounds
from pgdyno.results.encode import rounds_json
from pgdyno.results.store import ResultsStore


def run_sequence(units: str, design: Balanced | Rotation, rounds: int) -> list[str]:
    """The stored order of an A/A comparison run by the real loop, flattened into its runs."""
    log = RoundLog(None)
    RoundLoop(Schedule(tuple(units), design), log, lambda u, r: None, lambda r: r == rounds,
              str).run()  # fmt: skip
    assert log.history().design == design.name and log.history().seed == design.seed
    return [name for order in log.history().order for name in order]


def assert_balanced(runs: list[str], units: str, times: int) -> None:
    """Every unit ran right after every unit (itself included) `times` times, but the first
    run, which has no run before it."""
    counts = carryover_counts(runs)
    expected = Counter({(a, b): times for a in units for b in units})
    expected[(runs[0], runs[0])] -= 1
    assert counts == expected


@settings(max_examples=40, deadline=None)
@given(n=st.integers(min_value=2, max_value=7), seed=st.integers(min_value=0, max_value=2**40),
       blocks=st.integers(min_value=1, max_value=3))  # fmt: skip
def test_every_complete_block_is_carry_over_and_position_balanced(
    n: int, seed: int, blocks: int
) -> None:
    units = "abcdefg"[:n]
    per_block = len(chained_rows(n))
    runs = run_sequence(units, Balanced(seed), blocks * per_block)
    assert_balanced(runs, units, blocks * per_block // n)
    rounds = [runs[i : i + n] for i in range(0, len(runs), n)]
    assert all(sorted(r) == sorted(units) for r in rounds)  # each round runs every set once
    for position in range(n):  # every set at every position equally often
        assert set(Counter(r[position] for r in rounds).values()) == {blocks * per_block // n}
    assert run_sequence(units, Balanced(seed), blocks * per_block) == runs  # the seed replays


def test_an_aa_three_set_comparison_is_balanced_where_the_rotation_is_not() -> None:
    balanced = run_sequence("abc", Balanced(seed=2026), 12)
    assert_balanced(balanced, "abc", 4)  # two blocks of 6 rounds
    rotated = carryover_counts(run_sequence("abc", Rotation(), 12))
    assert rotated[("c", "a")] == 8 and rotated[("c", "c")] == 0  # a follows c, c never does
    assert run_sequence("abc", Balanced(seed=2027), 12) != balanced  # drawn from the seed


def test_resume_goes_on_with_the_stored_seed_and_its_next_rounds() -> None:
    first = Schedule(tuple("abc"), Balanced(seed=99))
    stored = RoundHistory("fixed", 4, tuple(tuple(o) for o in first.rounds(4)), 60.0,
                          "repeats", design="balanced", seed=99)  # fmt: skip
    again = Schedule(tuple("abc"), design_for(None, decode_rounds(rounds_json(stored)), True))
    assert again.rounds(10) == first.rounds(10)
    assert design_for(None, decode_rounds({"mode": "fixed", "order": []}), True) == Rotation()
    with pytest.raises(UsageError, match="--seed 5 is not the seed 9"):
        design_for(5, stored, True)


def test_the_design_and_seed_are_stored_with_the_rounds(tmp_path: Path) -> None:
    rounds = RoundHistory("fixed", 1, (("b", "a"),), 30.0, "repeats", design="balanced",
                          seed=12345678901)  # fmt: skip
    with ResultsStore(tmp_path / "r.sqlite") as store:
        cid = store.comparisons.create(NewComparison(
            name="p", plan_path="p.toml", plan_digest="d", plan_text="", mode="sets",
            baseline="a", scales=(1,), sets=(("a", {}), ("b", {})),
        ))  # fmt: skip
        store.comparisons.record_rounds(cid, rounds)
        comparison = store.comparisons.get(cid)
    assert comparison is not None and comparison.rounds == rounds
    stored = rounds_json(rounds)
    assert stored["design"] == "balanced" and stored["seed"] == rounds.seed


def test_plan_check_says_which_design_runs_and_why() -> None:
    assert "ABBA blocks" in orders_note(2) and "Williams's pair" in orders_note(5)
    assert "blocks of 8 rounds" in orders_note(4) and "right after every set" in orders_note(4)
