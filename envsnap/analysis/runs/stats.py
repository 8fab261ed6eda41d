"""Small, deterministic statistics for benchmark runs (stdlib only).

Benchmark runs are few (3-10 per side) and not normally distributed, so the tools here are
rank- and resampling-based: medians and IQR for the summary, the Mann-Whitney U test (exact
for small samples) for "is the change real", a bootstrap interval of the median change for
"how large", and a permutation test for the association of a configuration value with a
metric across N snapshots. Every random draw uses random.Random(seed) on sorted inputs, so
the same numbers give the same answer whatever their order.
"""
from __future__ import annotations

import itertools
import math
import random
from collections import Counter
from functools import lru_cache
from itertools import repeat, starmap
from operator import mul
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.analysis.median import median as median  # the one median, re-exported as stats.median
from envsnap.analysis.runs import noise
from envsnap.format import plural

# A change is significant when the test's p-value is below this (and the change is beyond noise).
SIGNIFICANCE_LEVEL = 0.05
DEFAULT_SEED = 20240611
BOOTSTRAP_RESAMPLES = 1000
# Exact Mann-Whitney distribution up to this many observations in total; normal approximation beyond.
EXACT_MW_MAX_N = 30
# Exact permutation test up to this many distinct relabelings; Monte-Carlo beyond.
EXACT_PERMUTATIONS_MAX = 5040
MONTE_CARLO_PERMUTATIONS = 4000


def quantile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (the common 'type 7' definition)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("quantile of no values")
    pos = (len(ordered) - 1) * q
    low = int(math.floor(pos))
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def iqr(values: Sequence[float]) -> float:
    return quantile(values, 0.75) - quantile(values, 0.25)


def mad(values: Sequence[float]) -> float:
    """Median absolute deviation from the median."""
    center = median(values)
    return median([abs(v - center) for v in values])


def describe(values: Sequence[float]) -> Dict[str, Any]:
    """The per-side summary of the result format: median, n, min, max, spread (IQR), values."""
    ordered = sorted(float(v) for v in values)
    if not ordered:
        return {"median": None, "n": 0, "min": None, "max": None, "spread": None, "values": []}
    return {"median": _r(median(ordered)), "n": len(ordered), "min": _r(ordered[0]), "max": _r(ordered[-1]),
            "spread": _r(iqr(ordered)), "values": [_r(v) for v in ordered]}


def _r(value: float) -> float:
    """Round for stable output (6 significant digits is far beyond benchmark precision)."""
    if value == 0 or not math.isfinite(value):
        return float(value)
    return float(f"{value:.6g}")


def pct_change(old: float, new: float) -> Optional[float]:
    if old == 0:
        return None
    change = (new - old) / abs(old) * 100.0
    return change if math.isfinite(change) else None  # a denormal `old` overflows to inf


def _midranks(values: Sequence[float]) -> List[float]:
    """Ranks (1-based) with ties given their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        avg = (i + j) / 2.0 + 1.0
        for k in range(i, j + 1):
            ranks[order[k]] = avg
        i = j + 1
    return ranks


@lru_cache(maxsize=64)
def _rank_sum_ways(doubled: Tuple[int, ...], n1: int) -> Dict[int, int]:
    """{doubled rank sum: ways to choose n1 of these doubled ranks with that sum}: the exact null
    distribution, the same for every metric of the same runs without ties (computed once)."""
    # row[k]: the ways to choose k of the ranks seen so far, as one integer whose digit s (base
    # 2**bits) counts those with doubled rank sum s; every count is below 2**n, so digits never carry.
    # Adding rank r adds row[k] shifted by r digits to row[k + 1]: a few big-integer operations in C
    # per rank instead of one dictionary update per sum.
    bits = len(doubled) + 1
    rows = [0] * (n1 + 1)
    rows[0] = 1
    for seen, r in enumerate(doubled, 1):
        shift = r * bits
        for k in range(min(n1, seen) - 1, -1, -1):
            if rows[k]:
                rows[k + 1] += rows[k] << shift
    mask = (1 << bits) - 1
    ways: Dict[int, int] = {}
    value, total = rows[n1], 0
    while value:
        count = value & mask
        if count:
            ways[total] = count
        value >>= bits
        total += 1
    return ways


def mann_whitney(a: Sequence[float], b: Sequence[float]) -> Tuple[Optional[float], str]:
    """Two-sided Mann-Whitney U test: (p-value, method). None when a side has no values.

    Exact for small samples: the null distribution of the rank sum of `a` is counted over
    all C(n, len(a)) ways to pick its ranks (ties keep their mid-ranks), so the answer is
    right even for 3 vs 3 runs, where the smallest possible p is 0.1.
    """
    n1, n2 = len(a), len(b)
    if n1 == 0 or n2 == 0:
        return None, "no data"
    pooled = [float(v) for v in a] + [float(v) for v in b]
    ranks = _midranks(pooled)
    if len(set(pooled)) == 1:
        return 1.0, "Mann-Whitney U (all values equal)"
    doubled = [int(round(r * 2)) for r in ranks]  # mid-ranks are multiples of 0.5
    observed = sum(doubled[:n1])
    total = n1 + n2
    expected2 = n1 * (total + 1)  # the mean of the doubled rank sum
    if total <= EXACT_MW_MAX_N:
        ways = _rank_sum_ways(tuple(sorted(doubled)), n1)
        all_ways = sum(ways.values())
        distance = abs(observed - expected2)
        extreme = sum(count for s, count in ways.items() if abs(s - expected2) >= distance)
        return min(1.0, extreme / all_ways), "Mann-Whitney U, exact"
    # Normal approximation with tie correction.
    u1 = observed / 2.0 - n1 * (n1 + 1) / 2.0
    mean_u = n1 * n2 / 2.0
    ties = Counter(pooled).values()
    tie_term = sum(t ** 3 - t for t in ties) / (total * (total - 1))
    var_u = n1 * n2 / 12.0 * ((total + 1) - tie_term)
    if var_u <= 0:
        return 1.0, "Mann-Whitney U, normal approximation"
    z = (abs(u1 - mean_u) - 0.5) / math.sqrt(var_u)
    p = math.erfc(max(z, 0.0) / math.sqrt(2.0))
    return min(1.0, p), "Mann-Whitney U, normal approximation"


def min_achievable_p(n1: int, n2: int) -> float:
    """Smallest two-sided p the exact rank test can give with these sample sizes."""
    if n1 == 0 or n2 == 0:
        return 1.0
    return min(1.0, 2.0 / math.comb(n1 + n2, n1))


def _median_of_picked(ordered: List[float], picked: List[int]) -> float:
    """median([ordered[i] for i in picked]) for sorted `ordered` and sorted `picked`."""
    mid = len(picked) // 2
    if len(picked) % 2:
        return float(ordered[picked[mid]])
    return (ordered[picked[mid - 1]] + ordered[picked[mid]]) / 2.0


def bootstrap_median_change(a: Sequence[float], b: Sequence[float], seed: int = DEFAULT_SEED,
                            resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = 0.95, relative: bool = True
                            ) -> Optional[Tuple[float, float]]:
    """Percentile bootstrap interval of the change of the median from a to b, in percent (`relative`), or in
    the metric's own unit (a change from a median of 0 has no percentage)."""
    a_sorted = sorted(float(v) for v in a)
    b_sorted = sorted(float(v) for v in b)
    if not a_sorted or not b_sorted:
        return None
    rng = random.Random(seed)
    changes: List[float] = []
    na, nb = len(a_sorted), len(b_sorted)
    # Each resample draws na then nb uniforms, picking population[floor(u * n)]: random.choices'
    # own draws, in its order (the intervals do not depend on the Python version), drawn in bulk.
    uniforms = list(starmap(rng.random, repeat((), resamples * (na + nb))))  # the draws in a C loop
    # The sides are sorted, so a resample's median is picked by its sorted indices (the same values,
    # hence the same floats, as median() of the values); the indices come out of C (map).
    scales = ([float(na)] * na + [float(nb)] * nb) * resamples
    indices = list(map(int, map(mul, uniforms, scales)))
    step = na + nb
    for start in range(0, len(indices), step):
        ma = _median_of_picked(a_sorted, sorted(indices[start:start + na]))
        mb = _median_of_picked(b_sorted, sorted(indices[start + na:start + step]))
        if not relative:
            changes.append(mb - ma)
            continue
        if ma == 0:
            continue
        changes.append((mb - ma) / abs(ma) * 100.0)
    if not changes:
        return None
    tail = (1.0 - confidence) / 2.0
    return quantile(changes, tail), quantile(changes, 1.0 - tail)


def compare(a: Sequence[float], b: Sequence[float], seed: int = DEFAULT_SEED, bootstrap: bool = True
            ) -> Dict[str, Any]:
    """Everything the verdict needs about one metric: medians, change, test, interval, noise.

    Without `bootstrap` (the many secondary metrics of a bench_serving run) there is no interval;
    "beyond noise" is noise.metric's either way.
    """
    good, bad = describe(a), describe(b)
    out: Dict[str, Any] = {"good": good, "bad": bad, "change_pct": None, "p_value": None,
                           "method": "no data", "significant": False, "ci_pct": None, "beyond_noise": False}
    if not good["n"] or not bad["n"]:
        return out
    difference = bad["median"] - good["median"]
    change = pct_change(good["median"], bad["median"])
    if change is None and difference == 0:
        change = 0.0  # 0 -> 0: no change, not "no comparable measurements"
    out["change_pct"] = None if change is None else round(change, 2)
    # From a median of 0 a change has no percentage: it is judged in the metric's own unit instead, so the
    # verdict never pairs a test's "p<0.01" with a "within noise" that only a missing percentage decided.
    relative = change is not None
    if not relative:
        out["change_abs"] = _r(difference)  # the change in the metric's unit, where a percentage has no meaning
    p, method = mann_whitney(a, b)
    out["p_value"] = None if p is None else float(f"{p:.4g}")
    out["method"] = method
    ci = bootstrap_median_change(a, b, seed=seed, relative=relative) if bootstrap else None
    if ci is not None:
        out["ci_pct" if relative else "ci_abs"] = [round(ci[0], 2), round(ci[1], 2)] if relative else \
            [_r(ci[0]), _r(ci[1])]
    out["beyond_noise"] = noise.metric(good, bad, change if relative else difference, ci, with_interval=bootstrap,
                                       relative=relative)
    out["significant"] = bool(p is not None and p < SIGNIFICANCE_LEVEL and out["beyond_noise"])
    return out


def eta_squared(groups: Sequence[Sequence[float]]) -> float:
    """Share of the metric's variance explained by the grouping (0..1)."""
    values = [v for g in groups for v in g]
    if len(values) < 2:
        return 0.0
    grand = sum(values) / len(values)
    total = sum((v - grand) ** 2 for v in values)
    if total <= 0:
        return 0.0
    between = sum(len(g) * ((sum(g) / len(g)) - grand) ** 2 for g in groups if g)
    return max(0.0, min(1.0, between / total))


def permutation_association(labels: Sequence[str], values: Sequence[float], seed: int = DEFAULT_SEED
                            ) -> Tuple[float, float, str]:
    """(eta squared, p-value, method) of the association of labels with values, one value per unit:
    clustered_association with one observation per cluster."""
    if len(labels) != len(values) or len(values) < 2:
        return 0.0, 1.0, "too few snapshots"
    eta2, p, method = clustered_association(labels, [[v] for v in values], seed=seed)
    return eta2, p, method.split(" (")[0]


def clustered_association(labels: Sequence[str], clusters: Sequence[Sequence[float]], seed: int = DEFAULT_SEED
                          ) -> Tuple[float, float, str]:
    """(eta squared, p-value, method) of the association of cluster labels with every observation.

    `clusters[i]` are the runs of snapshot i and `labels[i]` its value of one key. The statistic
    is eta squared over all runs grouped by their snapshot's label, so the runs' spread inside a
    snapshot counts against the key: medians that differ by less than the runs scatter explain
    little. The null relabels whole snapshots, never single runs: runs of one snapshot share its
    environment, machine state and time, so they are not independent observations of the key
    (counting them as such -- 4 snapshots x 10 runs as 40 -- would make a coincidence look like
    proof). The p-value therefore has the resolution of the snapshots: with N snapshots split
    k / N-k it can never go below 1 / C(N, k). Exact over all distinct relabelings when there
    are few, Monte-Carlo with a fixed seed otherwise; relabelings at least as strongly associated
    as the observed one are counted, the observed included.
    """
    if len(labels) != len(clusters) or len(clusters) < 2 or not all(clusters):
        return 0.0, 1.0, "too few snapshots"
    # Order-independent input: the same snapshots in any order give the same answer.
    pairs = sorted(zip(labels, (sorted(float(v) for v in c) for c in clusters)))
    labels = [p[0] for p in pairs]
    counts = [len(p[1]) for p in pairs]
    sums = [sum(p[1]) for p in pairs]
    total_n = sum(counts)
    grand = sum(sums) / total_n
    ss_total = sum((v - grand) ** 2 for _, c in pairs for v in c)
    if len(set(labels)) < 2:
        return 0.0, 1.0, "constant"
    if ss_total <= 0:
        return 0.0, 1.0, "all values equal"
    offset = sum(sums) ** 2 / total_n

    def stat(lab: Sequence[str]) -> float:
        group_n: Dict[str, int] = {}
        group_s: Dict[str, float] = {}
        for label, n, total in zip(lab, counts, sums):
            group_n[label] = group_n.get(label, 0) + n
            group_s[label] = group_s.get(label, 0.0) + total
        between = sum(group_s[g] ** 2 / group_n[g] for g in group_n) - offset
        return max(0.0, min(1.0, between / ss_total))

    observed = stat(labels)
    eps = 1e-12
    unit = "snapshots relabelled, runs kept with their snapshot"
    if math.factorial(len(labels)) <= EXACT_PERMUTATIONS_MAX:
        distinct = set(itertools.permutations(labels))
        hits = sum(1 for perm in distinct if stat(perm) >= observed - eps)
        return observed, hits / len(distinct), f"permutation, exact ({unit})"
    rng = random.Random(seed)
    shuffled = list(labels)
    hits = 0
    for _ in range(MONTE_CARLO_PERMUTATIONS):
        rng.shuffle(shuffled)
        if stat(shuffled) >= observed - eps:
            hits += 1
    return (observed, (hits + 1) / (MONTE_CARLO_PERMUTATIONS + 1),
            f"permutation, {MONTE_CARLO_PERMUTATIONS} random ({unit})")


def runs_for_a_test(alpha: float = SIGNIFICANCE_LEVEL) -> int:
    """The fewest runs per side with which fully separated runs reach p < alpha (exact Mann-Whitney):
    4 for 0.05 (3 vs 3 can never go below 0.1; 4 vs 4 gives 0.029; 5 vs 5 gives 0.008)."""
    n = 1
    while min_achievable_p(n, n) >= alpha:
        n += 1
    return n


def too_few_runs(n_good: int, n_bad: int, alpha: float = SIGNIFICANCE_LEVEL) -> Optional[str]:
    """A plain sentence when these run counts can never give p < alpha, else None."""
    if n_good == 0 or n_bad == 0:
        return None
    best = min_achievable_p(n_good, n_bad)
    if best < alpha:
        return None
    return (f"n={n_good} vs {plural(n_bad, 'run')} is too small to test: even fully separated runs give p={best:.2g} at best "
            f"(exact Mann-Whitney); measure {runs_for_a_test(alpha)} or more runs per side "
            f"(5 vs 5 gives {min_achievable_p(5, 5):.3f})")


def format_p(p: Optional[float]) -> str:
    if p is None:
        return "p n/a"
    for bound in (0.001, 0.01):
        if p < bound:
            return f"p<{bound:g}"
    return f"p={p:.2g}"
