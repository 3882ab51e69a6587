"""What an end-to-end comparison can be asserted to have judged, deterministically.

A single real A/A comparison says "better" or "worse" with probability up to its alpha by
construction of the interval (2.5% for one set and one cell), so a test that asserts "no detectable
difference" on one real A/A fails that often, however correct pgdyno is. The false-verdict *rate*
is proven by simulations that drive the real round loop (tests/unit/test_plan_error_sim.py,
tests/unit/test_sequential_sim.py). End-to-end tests check instead that the verdict printed is the
one the paired statistics give on exactly the runs that should count (no discarded or failed run,
paired by round), at the alpha the plan's error control gave it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pgdyno.stats.paired import compare_rounds


def clean_rounds(runs: Sequence[Mapping[str, object]], set_name: str) -> dict[int, float]:
    """Round (repeat) -> TPS of the set's runs that finished and were not flagged."""
    return {
        int(r["repeat"]): float(r["tps"])  # type: ignore[call-overload, arg-type]
        for r in runs
        if r["set_name"] == set_name and r["status"] == "ok" and r["tps"]
        and r["interference"] is None
    }  # fmt: skip


def assert_judged_on_clean_rounds(
    data: Mapping[str, object], baseline: str, candidate: str, *, sequential: bool = False
) -> dict[str, object]:
    """The candidate's TPS verdict in `compare --json` output equals the paired verdict of its
    clean rounds against the baseline's; returns that verdict's JSON."""
    runs: list[dict[str, object]] = data["runs"]  # type: ignore[assignment]
    results: list[dict[str, object]] = data["analysis"]["results"]  # type: ignore[index]
    change: dict[str, object] = next(r for r in results if r["set_name"] == candidate)["tps_change"]  # type: ignore[assignment]
    base, cand = clean_rounds(runs, baseline), clean_rounds(runs, candidate)
    expected = compare_rounds(
        base,
        cand,
        sequential=sequential,
        alpha=float(change["alpha"]),  # type: ignore[arg-type]
    )
    assert change["pairs"] == len(base.keys() & cand.keys()) == expected.pairs, (change, runs)
    assert change["verdict"] == expected.verdict, (change, expected)
    # At an adaptive stop the change printed is adjusted for the design that ran (its budget's
    # rounds, which the JSON does not hold): the plain mean is compared, and the change printed
    # must lie in the interval and no farther from zero than the plain mean.
    estimate = "naive_change_pct" if expected.stopped_early else "change_pct"
    for key in (estimate, "ci_low_pct", "ci_high_pct"):
        got, want = change[key], getattr(expected, key)
        assert (got is None) == (want is None), (key, change, expected)
        assert want is None or abs(float(got) - want) < 1e-9, (key, change, expected)  # type: ignore[arg-type]
    if expected.stopped_early:
        printed, plain = float(change["change_pct"]), float(change["naive_change_pct"])  # type: ignore[arg-type]
        low, high = float(change["ci_low_pct"]), float(change["ci_high_pct"])  # type: ignore[arg-type]
        assert low <= printed <= high and abs(printed) <= abs(plain) + 1e-9, change
    return change
