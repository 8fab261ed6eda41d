"""What "beyond noise" means, for each thing that is measured: one idea, four strengths, side by side.

A change is beyond noise when it is larger than the runs' own scatter. How strictly that is judged
depends on what stands beside the judgment and on what a false "moved" costs:

  metric        the verdict's metrics (stats.compare): a test and an interval stand beside it, so the
                noise is the interquartile range, which one disturbed run among many does not widen.
  series        run telemetry (mechanism.compare): a dozen series are read at once with no test, and a
                false "moved" names a wrong mechanism: every run counts (the range) and the change must
                also clear the drift between two measuring sessions.
  trace_series  profiler figures per step (trace_diff.moved): one run of a traced benchmark is often
                disturbed (compilation, a first-call cost), so each side's median must lie outside the
                other side's runs, and the change clear the session drift.
  baselines     bisect's GOOD and BAD (bisect/search.py): measured in one session, alternated, so no
                drift term; the medians must differ by more than either side's whole range, as ratios
                where every run is positive (a rate or a time: its noise scales with it).

With a single run on a side there is no scatter to judge by (SINGLE_RUN_MIN_PCT). The functions take
numbers the caller already has (medians, the change in percent), so this module imports nothing.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence, Tuple

# With one run on a side there is no spread: a change this large or larger still counts, and the
# factor says it rests on single runs. (Repeated runs of one benchmark on one machine spread by a
# few percent; 20% is well clear of that and of the sampling grain of the peaks.)
SINGLE_RUN_MIN_PCT = 20.0
# GOOD's and BAD's runs are measured at different times, and a machine drifts between the two sessions
# (frequency, caches, other load) by more than within one: the same benchmark measured twice in a row
# on the loaded 2-core test VM moved its CPU time per run by +7% with each side's runs tight and apart.
# A series must move by more than this, as well as beyond its runs' own spread, to count.
SESSION_DRIFT_PCT = 10.0


def metric(good: Mapping[str, Any], bad: Mapping[str, Any], change: Optional[float],
           interval: Optional[Tuple[float, float]], with_interval: bool, relative: bool = True) -> bool:
    """The verdict's metrics; `good` and `bad` as stats.describe gives them, `interval` the bootstrap
    interval of the median change (when `with_interval`), `change` and `interval` in percent, or in the
    metric's own unit when not `relative` (a change from a median of 0 has no percentage).

    Beyond noise: the interval excludes 0 and the change is larger than either side's relative spread
    (IQR / median; the IQR itself when not relative); or every run of one side lies beyond every run of
    the other, which no spread of the runs explains (a noisy side's IQR can exceed a real -57% whose
    runs do not overlap at all: "within noise" beside p < 0.01 said two things). Without an interval
    (the many secondary metrics of a bench_serving run): the runs do not overlap and the change exceeds
    the spread."""
    if change is None:
        return False
    noise = 0.0
    for side in (good, bad):
        if not relative:
            noise = max(noise, abs(side["spread"]))
        elif side["median"]:
            noise = max(noise, abs(side["spread"] / side["median"]) * 100.0)
    separated = good["max"] < bad["min"] or bad["max"] < good["min"]
    if interval is not None:
        apart = separated and good["n"] >= 2 and bad["n"] >= 2 and change != 0  # a single run has no spread
        return bool(((interval[0] > 0 or interval[1] < 0) and abs(change) > noise) or apart)
    return bool(not with_interval and separated and abs(change) > noise)


def single_run(change: Optional[float], good_median: float, bad_median: float) -> bool:
    """With one run on a side (series and trace figures): a change of SINGLE_RUN_MIN_PCT or more, or any
    change from zero."""
    if change is None:
        return bad_median != good_median
    return abs(change) >= SINGLE_RUN_MIN_PCT


def series(good: Sequence[float], bad: Sequence[float], good_median: float, bad_median: float,
           change: Optional[float]) -> Tuple[float, bool]:
    """(noise in percent, beyond it) of a run-telemetry series with two or more runs a side, both
    sorted: the runs do not overlap, and the change exceeds each side's range over its median and
    SESSION_DRIFT_PCT."""
    noise = 0.0
    for side, median in ((good, good_median), (bad, bad_median)):
        if median:
            noise = max(noise, (side[-1] - side[0]) / abs(median) * 100.0)
    separated = good[-1] < bad[0] or bad[-1] < good[0]
    return noise, bool(separated and (change is None or abs(change) > max(noise, SESSION_DRIFT_PCT)))


def trace_series(good: Sequence[float], bad: Sequence[float], good_median: float, bad_median: float,
                 change: Optional[float]) -> bool:
    """A per-step trace figure with two or more runs a side: each side's median outside the other side's
    runs (one disturbed run moves neither median nor range much), and a change over SESSION_DRIFT_PCT."""
    apart = ((bad_median > max(good) and good_median < min(bad))
             or (bad_median < min(good) and good_median > max(bad)))
    return bool(apart and (change is None or abs(change) > SESSION_DRIFT_PCT))


def baselines(good: Sequence[float], bad: Sequence[float], good_median: float, bad_median: float) -> bool:
    """bisect's GOOD and BAD measured in one session: the runs do not overlap, and the medians differ by
    more than either side's range. Where every run is positive, both are judged as ratios (the medians'
    ratio against each side's max/min): a machine whose speed wanders by 40% moves a GOOD of 250 steps/s by
    100 and a BAD of 15 by 6, and a 13x regression whose runs lie far apart (GOOD 160-300, BAD 9-21, seen
    on a VM) is no less separate for GOOD's wide absolute range."""
    if good_median == bad_median:
        return False
    separated = max(good) < min(bad) if bad_median > good_median else min(good) > max(bad)
    if not separated:
        return False
    if min(min(good), min(bad)) > 0:
        spread_ratio = max(max(good) / min(good), max(bad) / min(bad))
        high, low = max(good_median, bad_median), min(good_median, bad_median)
        return high / low > spread_ratio
    spread = max(max(good) - min(good), max(bad) - min(bad))
    return abs(bad_median - good_median) > spread
