from __future__ import annotations

from envsnap.analysis.runs import noise


def test_baselines_of_positive_runs_are_judged_as_ratios():
    # Seen on a VM (steps per CPU second): a 12x regression whose runs lie far apart, GOOD's wandering by 3x. GOOD's
    # absolute range (220) is wider than the medians' gap (197), so the absolute rule said "no longer separate";
    # as ratios GOOD spans 3.2x, BAD 2.4x and the medians 12.4x.
    good, bad = [320.0, 100.0, 160.0, 277.9, 213.9], [21.4, 15.0, 9.1, 17.3, 20.9]
    assert noise.baselines(good, bad, 213.9, 17.3)
    assert noise.baselines(bad, good, 17.3, 213.9)  # either direction
    # Where a run is not positive, the absolute rule: apart, but the gap (405) is inside GOOD's range (410).
    assert not noise.baselines([-250.0, 110.0, 160.0], [-300.0, -290.0, -295.0], 110.0, -295.0)
    assert noise.baselines([-150.0, 110.0, 160.0], [-300.0, -290.0, -295.0], 110.0, -295.0)


def test_baselines_that_overlap_or_do_not_clear_their_spread_are_not_separate():
    assert not noise.baselines([10.0, 11.0, 12.5], [12.0, 13.0, 14.0], 11.0, 13.0)  # they overlap
    # Apart, but BAD spans 2.5x and the medians differ by 2x: not beyond noise.
    assert not noise.baselines([10.0, 10.5, 11.0], [12.0, 21.0, 30.0], 10.5, 21.0)
    assert noise.baselines([100.0, 101.0], [102.0, 103.0], 100.5, 102.5)  # close, tight, apart
    assert not noise.baselines([5.0, 5.0], [5.0, 5.0], 5.0, 5.0)
