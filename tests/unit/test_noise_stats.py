"""The figures of `pgdyno noise` (pgdyno.stats.noise) on constructed runs with known spread and
drift, and on a real calibration recorded on this kind of host (tests/data/noise/)."""

from __future__ import annotations

import itertools
import json
import math
import random
import statistics
from pathlib import Path

import pytest

from pgdyno.stats.levels import MAX_REPEATS, MIN_EFFECT_PCT
from pgdyno.stats.noise import (
    NoiseRun,
    mixture_alpha,
    noise_report,
    paired_differences,
    top_foreign,
)
from pgdyno.stats.sequential import rounds_for_precision, rounds_to_detect

DATA = Path(__file__).parent.parent / "data" / "noise"


def runs_of(tps: list[float], every_s: float = 10.0) -> list[NoiseRun]:
    return [NoiseRun(1_700_000_000 + every_s * i, value) for i, value in enumerate(tps)]


def test_cv_is_the_sd_of_log_tps():
    a = 0.03  # log TPS alternating +a, -a: mean 0, sample sd a * sqrt(n / (n - 1))
    tps = [1000 * math.exp(a if i % 2 == 0 else -a) for i in range(10)]
    report = noise_report(runs_of(tps), 7.0)
    assert report.cv_pct == pytest.approx(100 * a * math.sqrt(10 / 9))
    assert report.used == report.runs == 10 and report.flagged == 0
    assert report.tps_median == pytest.approx(1000 * math.cosh(a))  # mean of the middle two


def test_cv_of_seeded_lognormal_runs_recovers_the_spread():
    rng = random.Random(13)
    tps = [20_000 * math.exp(rng.gauss(0, 0.04)) for _ in range(400)]
    report = noise_report(runs_of(tps), 7.0)
    assert report.cv_pct == pytest.approx(4.0, abs=0.3)
    # Independent runs: a difference has twice the variance of a run.
    assert report.pair_sd_pct == pytest.approx(4.0 * math.sqrt(2), rel=0.12)
    assert abs(report.drift_pct_per_min) < 0.5


def test_drift_per_minute_is_the_slope_of_log_tps():
    # -1% per minute exactly, one run every 30 s, plus a slow outlier Theil-Sen shrugs off.
    tps = [5000 * 0.99 ** (i / 2) for i in range(12)]
    tps[7] *= 0.6
    report = noise_report(runs_of(tps, every_s=30.0), 32.0)
    assert report.drift_pct_per_min == pytest.approx(-1.0, abs=1e-6)
    assert report.drift_low_pct <= -1.0 <= report.drift_high_pct
    assert report.drift_method == "scipy.stats.theilslopes"


def test_no_drift_without_three_runs_at_different_times():
    assert noise_report(runs_of([100, 101]), 5.0).drift_pct_per_min is None
    same_time = [NoiseRun(0.0, v) for v in (100, 101, 99)]
    assert noise_report(same_time, 5.0).drift_pct_per_min is None


def test_paired_differences_alternate_as_a_rotated_compare():
    # A steady position effect (the second run of a pair 2% faster): in a rotated A/B compare
    # it lands on A in one round and on B in the next, so it is spread, not a shift.
    tps = [100.0, 102.0] * 4
    diffs = paired_differences(runs_of(tps))
    assert diffs == pytest.approx([math.log(1.02), -math.log(1.02)] * 2)
    report = noise_report(runs_of(tps), 5.0)
    assert report.pairs == 4
    assert report.pair_sd_pct == pytest.approx(100 * statistics.stdev(diffs))


def test_flagged_runs_are_counted_and_left_out():
    clean = [1000.0, 1010.0, 990.0, 1005.0, 995.0, 1000.0]
    base = noise_report(runs_of(clean), 5.0)
    runs = runs_of([*clean[:2], 400.0, 410.0, *clean[2:]])
    runs[2] = NoiseRun(runs[2].started_s, 400.0, flagged=True, top=(("hog", 96.0),))
    runs[3] = NoiseRun(runs[3].started_s, 410.0, flagged=True, top=(("hog", 90.0), ("cc1", 3.0)))
    report = noise_report(runs, 5.0)
    assert (report.runs, report.flagged, report.used, report.pairs) == (8, 2, 6, 3)
    assert report.cv_pct == pytest.approx(base.cv_pct)
    assert report.cv_all_pct > 5 * report.cv_pct  # what the hog did, shown beside
    assert report.top_foreign == (("hog", 96.0, 2), ("cc1", 3.0, 1))
    assert "2 of 8 runs disturbed" in report.conclusion


def test_a_pair_with_one_flagged_run_forms_no_round():
    runs = runs_of([100, 103, 98, 101, 99, 102])
    runs[3] = NoiseRun(runs[3].started_s, 101, flagged=True)
    assert noise_report(runs, 5.0).pairs == 2


def test_machine_time_rows_follow_the_sequential_method():
    rng = random.Random(4)
    tps = [30_000 * math.exp(rng.gauss(0, 0.03)) for _ in range(16)]
    report = noise_report(runs_of(tps), 6.5)
    sd = report.pair_sd_pct / 100
    assert report.round_seconds == 13.0
    assert [(r.kind, r.pct) for r in report.resolve] == [
        ("change", 10.0), ("change", 5.0), ("change", 2.0),
    ]  # fmt: skip
    for row in report.resolve:
        # at the t-mixture's share of a two-set plan's error (issue 33; was the full 2.5%)
        rounds = rounds_to_detect(
            sd, row.pct, alpha=mixture_alpha(2), min_effect_pct=MIN_EFFECT_PCT
        )
        assert row.rounds == rounds and row.seconds == rounds * 13.0
    assert [r.seconds for r in report.resolve] == sorted(r.seconds for r in report.resolve)
    assert report.resolve[0].seconds < report.resolve[2].seconds
    assert report.precision is not None and report.precision.target == "+-2%"
    assert report.precision.rounds == rounds_for_precision(sd, 2.0, alpha=mixture_alpha(2))
    assert report.conclusion.startswith("this host resolves 10% in about ")
    assert "; 2% needs about " in report.conclusion


def test_a_spread_too_wide_to_resolve_says_more_than():
    report = noise_report(runs_of([100, 150, 70, 140, 60, 160]), 5.0)
    two = report.resolve[-1]
    assert two.capped and two.rounds == MAX_REPEATS
    assert "2% needs more than" in report.conclusion


def test_too_few_clean_runs_give_no_machine_times():
    runs = [NoiseRun(float(i), 100.0 + i, flagged=i > 1) for i in range(6)]
    report = noise_report(runs, 5.0)
    assert report.resolve == () and report.precision is None and report.pairs == 1
    assert report.conclusion.startswith("too few clean runs to tell (2 of 6")


def test_json_is_plain_data():
    report = noise_report(runs_of([100, 103, 98, 101, 99, 102]), 8.0)
    data = json.loads(json.dumps(report.as_dict(), allow_nan=False))
    assert [r["target"] for r in data["resolve"]] == ["10%", "5%", "2%"]
    assert data["precision"]["kind"] == "precision" and data["conclusion"] == report.conclusion


@pytest.mark.parametrize(
    "runs, seconds",
    [
        ([NoiseRun(0.0, 0.0)], 5.0),
        ([NoiseRun(0.0, math.nan)], 5.0),
        ([NoiseRun(math.inf, 10.0)], 5.0),
        ([NoiseRun(0.0, 10.0)], 0.0),
    ],
)
def test_bad_input_is_refused(runs, seconds):
    with pytest.raises(ValueError):
        noise_report(runs, seconds)


def test_top_foreign_ranks_by_highest_share():
    runs = [
        NoiseRun(0, 1, True, (("postgres", 30.0), ("pytest", 15.0))),
        NoiseRun(1, 1, True, (("pytest", 22.0),)),
        NoiseRun(2, 1, True, (("bash", 1.0), ("make", 1.0))),
    ]
    assert top_foreign(runs, 3) == (("postgres", 30.0, 1), ("pytest", 22.0, 2), ("bash", 1.0, 1))


def recorded(name: str) -> tuple[list[NoiseRun], float, list[dict]]:
    data = json.loads((DATA / name).read_text())
    runs = []
    for run in data["runs"]:
        blob = run["interference"]
        top = tuple((c, float(p)) for c, p in blob["top"]) if blob else ()
        runs.append(NoiseRun(run["started_s"], run["tps"], blob is not None, top))
    walls = data["wall_seconds"]
    return runs, sum(walls) / len(walls), data["runs"]


def test_recorded_busy_host_every_run_flagged():
    """A real calibration beside other test suites: every run flagged, nothing to resolve with,
    and the spread with the flagged runs is the ~30% the issue measured beside a benchmark."""
    runs, run_s, raw = recorded("busy-host-select-only.json")
    report = noise_report(runs, run_s)
    assert report.runs == len(raw) == 20 and report.flagged == 20 and report.used == 0
    assert report.cv_pct is None and report.resolve == ()
    assert 15 < report.cv_all_pct < 45
    assert report.top_foreign[0][0] in {"postgres", "python", "pytest"}
    assert 5.0 < report.run_seconds < 6.0  # 5 s runs and about half a second of overhead


def test_recorded_busy_host_figures_if_the_flags_were_ignored():
    """The same real TPS values as if unflagged: the figures match independent computations
    (sample sd of log TPS; the Theil-Sen slope as the median of all pairwise slopes)."""
    runs, run_s, _ = recorded("busy-host-select-only.json")
    plain = [NoiseRun(r.started_s, r.tps) for r in runs]
    report = noise_report(plain, run_s)
    logs = [math.log(r.tps) for r in plain]
    assert report.cv_pct == pytest.approx(100 * statistics.stdev(logs))
    minutes = [(r.started_s - plain[0].started_s) / 60 for r in plain]
    slopes = [
        (logs[j] - logs[i]) / (minutes[j] - minutes[i])
        for i, j in itertools.combinations(range(len(plain)), 2)
    ]
    assert report.drift_pct_per_min == pytest.approx(100 * math.expm1(statistics.median(slopes)))
    assert [r.rounds for r in report.resolve] == sorted(r.rounds for r in report.resolve)


def test_recorded_mixed_host_flags_the_slow_runs_and_leaves_them_out():
    """A real calibration while other suites came and went: the flagged runs are the slow ones,
    and the figures come from the clean runs alone, pairs with a flagged run left out."""
    runs, run_s, _ = recorded("mixed-host-select-only.json")
    report = noise_report(runs, run_s)
    clean = [r for r in runs if not r.flagged]
    flagged = [r for r in runs if r.flagged]
    assert (report.runs, report.flagged, report.used) == (20, len(flagged), len(clean))
    assert 0 < len(flagged) < len(clean)
    assert statistics.median(r.tps for r in flagged) < 0.85 * report.tps_median
    assert report.cv_pct == pytest.approx(100 * statistics.stdev(math.log(r.tps) for r in clean))
    assert 0 < report.cv_pct < report.cv_all_pct
    clean_pairs = sum(
        1 for k in range(len(runs) // 2) if not (runs[2 * k].flagged or runs[2 * k + 1].flagged)
    )
    assert report.pairs == clean_pairs >= 2
    seconds = [r.seconds for r in report.resolve]
    assert seconds == sorted(seconds) and seconds[0] < seconds[-1]
    assert report.conclusion.startswith("this host resolves 10% in about ")
    assert f"{report.flagged} of 20 runs disturbed" in report.conclusion
