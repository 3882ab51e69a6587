"""The confidence levels and thresholds that repeat statistics and verdicts decide by.

One place for the numbers a reviewer may want to question; the reasons are next to each.
"""

from __future__ import annotations

__all__ = [
    "ALPHA",
    "COMPARE_ALPHA",
    "COMPARE_CONFIDENCE",
    "CONFIDENCE",
    "MAX_REPEATS",
    "MIN_EFFECT_PCT",
    "NOISY_CV_PCT",
    "POWER",
    "VERDICT_METHOD",
]

# Confidence level of a cell's interval (two-sided), and the matching significance level.
CONFIDENCE = 0.95
ALPHA = 1.0 - CONFIDENCE
# Confidence level of a comparison's interval, on which the verdict rests. Higher than 95%:
# a plan compares several sets with the baseline for TPS and latency in every cell, so at 95%
# one false "better" in twenty comparisons would be routine; at 97.5% an A/A comparison says
# "no detectable difference" about 97.5% of the time, with margin over the 95% promised.
COMPARE_CONFIDENCE = 0.975
COMPARE_ALPHA = 1.0 - COMPARE_CONFIDENCE
# Smallest change, in %, reported as better/worse (see pgdyno.stats.verdict).
MIN_EFFECT_PCT = 1.0
# Repeat-to-repeat coefficient of variation, in %, above which a set is flagged as noisy.
# Interleaved pgbench repeats of one cell on a quiet host typically differ by 1-3% (checkpoint
# timing, autovacuum, CPU frequency, page cache); a shared or busy host gives 3-5%. Above 5%
# something varies between runs that the comparison does not control, and differences of a
# few % are then out of reach of a handful of repeats.
NOISY_CV_PCT = 5.0
# Probability of detecting a true change that ``repeats_needed`` plans for.
POWER = 0.9
# ``repeats_needed`` stops counting here: this many repeats or more is "not worth it".
MAX_REPEATS = 1000
# The verdict method's version. 1: Welch's interval on fixed repeats (issues 4-12); 2: paired
# by round, always-valid intervals for adaptive rounds, interference discarded (issue 13); 3:
# the plan-wide error split over the plan's comparisons, the t-mixture intersected with a robust
# betting sequence, the 1% floor judged on the interval (issue 20); 4: one target (the mean's
# interval beside the change, the robust centre its own figure, the verdict on the two, none
# when they disagree), intervals intersected over the looks, clearly dependent rounds widened,
# the plan's error split 4% TPS / 1% p99 (issue 33); 5: rounds alike widen both intervals
# from 6 rounds on (the bias-corrected lag-1 autocorrelation), the change at an adaptive stop
# bias-adjusted (Whitehead 1986), the plain mean kept beside it (issue 33).
# pgdyno's own figures cited as evidence (data/evidence.toml) must be measured with this
# method: bump it when the method changes, and tests/unit/test_evidence.py lists what to re-run.
VERDICT_METHOD = 5
