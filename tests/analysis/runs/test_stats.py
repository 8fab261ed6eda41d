"""envsnap.stats: medians, the exact rank test, the bootstrap interval, the permutation association."""
from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings, strategies as st

from envsnap.analysis.runs import stats


def test_median_quantile_spread():
    assert stats.median([3, 1, 2]) == 2
    assert stats.median([4, 1, 3, 2]) == 2.5
    assert stats.quantile([1, 2, 3, 4, 5], 0.25) == 2
    assert stats.iqr([1, 2, 3, 4, 5]) == 2
    assert stats.mad([1, 2, 3, 4, 100]) == 1
    with pytest.raises(ValueError):
        stats.median([])


def test_describe_is_sorted_and_rounded():
    out = stats.describe([94.123456789, 93.0, 95.5])
    assert out == {"median": 94.1235, "n": 3, "min": 93.0, "max": 95.5, "spread": 1.25,
                   "values": [93.0, 94.1235, 95.5]}
    assert stats.describe([])["n"] == 0


def _brute_force_p(a, b):
    """Two-sided exact p by enumerating every split of the pooled mid-ranks."""
    pooled = list(a) + list(b)
    ranks = stats._midranks(pooled)
    n1 = len(a)
    expected = n1 * (len(pooled) + 1) / 2
    observed = abs(sum(ranks[:n1]) - expected)
    combos = list(itertools.combinations(range(len(pooled)), n1))
    extreme = sum(1 for c in combos if abs(sum(ranks[i] for i in c) - expected) >= observed - 1e-9)
    return extreme / len(combos)


def test_mann_whitney_exact_known_values():
    p, method = stats.mann_whitney([1, 2, 3], [4, 5, 6])
    assert p == pytest.approx(0.1) and "exact" in method  # 2 of C(6,3)=20 splits are this extreme
    p, _ = stats.mann_whitney([1, 2, 3, 4, 5], [6, 7, 8, 9, 10])
    assert p == pytest.approx(2 / 252)
    assert stats.mann_whitney([5, 5, 5], [5, 5, 5])[0] == 1.0
    assert stats.mann_whitney([], [1.0])[0] is None
    assert stats.min_achievable_p(3, 3) == pytest.approx(0.1)
    assert stats.min_achievable_p(5, 5) < 0.01


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=1, max_size=6), st.lists(st.integers(0, 6), min_size=1, max_size=6))
def test_mann_whitney_exact_matches_brute_force_with_ties(a, b):
    p, _ = stats.mann_whitney(a, b)
    if len(set(a + b)) == 1:
        assert p == 1.0
    else:
        assert p == pytest.approx(_brute_force_p(a, b))


def test_mann_whitney_normal_approximation_for_large_samples():
    rng = random.Random(1)
    a = [rng.gauss(100, 5) for _ in range(40)]
    b = [rng.gauss(80, 5) for _ in range(40)]
    p, method = stats.mann_whitney(a, b)
    assert "normal" in method and p < 1e-6
    same, _ = stats.mann_whitney(a[:20], a[20:])
    assert same > 0.05


def test_bootstrap_is_deterministic_and_order_independent():
    a = [94.1, 93.0, 95.2, 94.8, 93.9, 94.4]
    b = [60.2, 59.1, 61.0, 60.5, 58.7, 60.0]
    ci1 = stats.bootstrap_median_change(a, b)
    ci2 = stats.bootstrap_median_change(list(reversed(a)), sorted(b))
    assert ci1 == ci2
    lo, hi = ci1
    observed = (stats.median(b) - stats.median(a)) / stats.median(a) * 100
    assert lo <= observed <= hi < 0


def test_compare_significance_and_noise():
    clear = stats.compare([94.1, 93.0, 95.2, 94.8, 93.9], [60.2, 59.1, 61.0, 60.5, 58.7])
    assert clear["significant"] and clear["beyond_noise"] and clear["p_value"] < 0.01
    assert clear["change_pct"] == pytest.approx(-36.0, abs=1.0)
    noisy = stats.compare([90, 100, 95, 105, 85], [92, 98, 88, 101, 95])
    assert not noisy["significant"] and not noisy["beyond_noise"]
    # 2 vs 2 runs can never reach p < 0.05 however far apart: honest "not significant".
    tiny = stats.compare([94, 95], [60, 61])
    assert not tiny["significant"] and tiny["p_value"] >= 0.05
    # Without the bootstrap (secondary metrics) separated ranges beyond the spread count as beyond noise.
    assert stats.compare([10, 11, 10.5], [20, 21, 20.5], bootstrap=False)["beyond_noise"]


def test_a_change_from_a_median_of_zero_is_judged_in_the_metrics_unit():
    """GOOD's median 0: no percentage exists, and "p<0.01, within noise" said two things. The change is judged
    in the metric's own unit: separated runs are beyond noise."""
    apart = stats.compare([0, 0, 0, 0, 0], [3, 4, 5, 4, 3])
    assert apart["change_pct"] is None and apart["change_abs"] == 4 and apart["ci_abs"][0] > 0
    assert apart["p_value"] < 0.01 and apart["beyond_noise"] and apart["significant"]
    assert stats.compare([0, 0, 0], [3, 4, 5], bootstrap=False)["beyond_noise"]
    overlapping = stats.compare([0, 2, 0, 1, 0], [0, 1, 2, 0, 1])
    assert not overlapping["beyond_noise"] and not overlapping["significant"]
    # 0 -> 0 is no change, not "no comparable measurements".
    zero = stats.compare([0, 0, 0], [0, 0, 0])
    assert zero["change_pct"] == 0.0 and "change_abs" not in zero and not zero["beyond_noise"]
    from envsnap.analysis.runs import verdict

    entry = verdict.metric_entry("queue_ms", [0, 0, 0, 0, 0], [3, 4, 5, 4, 3])
    assert (entry["outcome"], entry["change_text"]) == ("worse", "+4 ms from 0")
    assert verdict.worse(entry) and verdict.metric_entry("x", [0, 0], [0, 0])["outcome"] == "no_change"


def test_permutation_association_exact_and_monte_carlo():
    eta2, p, method = stats.permutation_association(["a", "a", "a", "b", "b", "b"], [94, 95, 93, 60, 61, 59])
    assert eta2 > 0.99 and method == "permutation, exact"
    assert p == pytest.approx(2 / 20)  # the split and its mirror image, of 20 distinct relabelings
    assert stats.permutation_association(["x"] * 4, [1, 2, 3, 4])[1] == 1.0
    labels = ["on"] * 5 + ["off"] * 5
    values = [94, 95, 93, 96, 94, 60, 61, 59, 62, 60]
    eta2, p, method = stats.permutation_association(labels, values)
    assert "random" in method and p < 0.02 and eta2 > 0.99
    # Same answer whatever the input order (pairs are sorted first, the seed is fixed).
    shuffled = list(zip(labels, values))
    random.Random(3).shuffle(shuffled)
    assert stats.permutation_association([s[0] for s in shuffled], [s[1] for s in shuffled]) == (eta2, p, method)
    unrelated = stats.permutation_association(["a", "b", "a", "b", "a", "b"], [94, 95, 93, 94, 95, 93])
    assert unrelated[1] > 0.3


def test_format_p():
    assert stats.format_p(0.0004) == "p<0.001"
    assert stats.format_p(0.008) == "p<0.01"
    assert stats.format_p(0.034) == "p=0.034"
    assert stats.format_p(None) == "p n/a"


def test_clustered_association_counts_the_runs_spread_and_permutes_whole_snapshots():
    labels = ["a", "a", "b", "b"]
    # Snapshot medians 100, 100.5, 101, 101.5 (they sort by the key), runs scattered by +-10.
    clusters = [[90, 100, 110], [91, 100.5, 109], [92, 101, 111], [90, 101.5, 112]]
    medians = [stats.median(c) for c in clusters]
    by_medians = stats.permutation_association(labels, medians)[0]
    eta2, p, method = stats.clustered_association(labels, clusters)
    assert by_medians > 0.7  # the medians alone look like an association...
    assert eta2 < 0.05  # ...the runs show it is within their own scatter
    # Four snapshots split 2/2: six distinct relabelings, however many runs each has.
    tight = [[100, 100.1], [100.2, 100.1], [60, 60.1], [60.2, 59.9]]
    eta2, p, method = stats.clustered_association(labels, [c * 10 for c in tight])
    assert eta2 > 0.99 and p == pytest.approx(2 / 6)
    assert "exact" in method and "runs kept with their snapshot" in method
    # Same answer in any order; a constant key or identical values say nothing.
    order = [2, 0, 3, 1]
    assert stats.clustered_association([labels[i] for i in order], [tight[i] for i in order]) == \
        stats.clustered_association(labels, tight)
    assert stats.clustered_association(["x"] * 4, tight)[1] == 1.0
    assert stats.clustered_association(labels, [[1.0, 1.0]] * 4) == (0.0, 1.0, "all values equal")


def test_how_many_runs_a_test_needs():
    assert stats.runs_for_a_test() == 4
    assert stats.min_achievable_p(3, 3) == pytest.approx(0.1)
    assert stats.min_achievable_p(5, 5) == pytest.approx(2 / 252)
    note = stats.too_few_runs(3, 3)
    assert note.startswith("n=3 vs 3 runs is too small to test") and "p=0.1 at best" in note
    assert stats.too_few_runs(5, 5) is None and stats.too_few_runs(4, 4) is None
    assert not stats.compare([10, 10.1, 10.2], [20, 20.1, 20.2])["significant"]  # separated, yet untestable
    assert stats.compare([10, 10.1, 10.2, 10.1, 10], [20, 20.1, 20.2, 20, 20.3])["significant"]


def _reference_rank_sum_ways(doubled, n1):
    """The plain dynamic programme: one dictionary of sums per number of ranks chosen."""
    dist = [dict() for _ in range(n1 + 1)]
    dist[0][0] = 1
    for r in doubled:
        for k in range(n1 - 1, -1, -1):
            for s, count in list(dist[k].items()):
                dist[k + 1][s + r] = dist[k + 1].get(s + r, 0) + count
    return dist[n1]


def test_rank_sum_distribution_equals_the_plain_dynamic_programme_up_to_the_exact_limit():
    rng = random.Random(30)
    for _ in range(150):
        n = rng.randint(2, stats.EXACT_MW_MAX_N)
        n1 = rng.randint(1, n - 1)
        values = [rng.choice([1.0, 2.0, 2.5, 7.0]) if rng.random() < 0.4 else rng.random() for _ in range(n)]
        doubled = tuple(sorted(int(round(r * 2)) for r in stats._midranks(values)))
        assert stats._rank_sum_ways.__wrapped__(doubled, n1) == _reference_rank_sum_ways(doubled, n1)


def _reference_bootstrap(a, b, seed=stats.DEFAULT_SEED, resamples=stats.BOOTSTRAP_RESAMPLES, confidence=0.95):
    """The interval as first written: each resample's values listed, then their medians."""
    a_sorted, b_sorted = sorted(a), sorted(b)
    rng = random.Random(seed)
    changes = []
    for _ in range(resamples):
        ma = stats.median([a_sorted[int(rng.random() * len(a_sorted))] for _ in a_sorted])
        mb = stats.median([b_sorted[int(rng.random() * len(b_sorted))] for _ in b_sorted])
        if ma:
            changes.append((mb - ma) / abs(ma) * 100.0)
    tail = (1.0 - confidence) / 2.0
    return (stats.quantile(changes, tail), stats.quantile(changes, 1.0 - tail)) if changes else None


def test_bootstrap_interval_is_exactly_the_resampled_medians_one():
    rng = random.Random(31)
    for seed in range(120):
        pool = [0.0, 1.0, 2.5, 94.1]
        a = [rng.choice(pool) if rng.random() < 0.3 else rng.uniform(-5, 100) for _ in range(rng.randint(1, 12))]
        b = [rng.choice(pool) if rng.random() < 0.3 else rng.uniform(-5, 100) for _ in range(rng.randint(1, 12))]
        assert stats.bootstrap_median_change(a, b, seed=seed) == _reference_bootstrap(a, b, seed=seed)
