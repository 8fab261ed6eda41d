"""Judging and fitting a ranking on the planted-regression corpus: pure functions over cause lists.

A cause (envsnap's diff result, `causes[]`) is reduced to its *features*: the log of every factor's value
(`factors`, whose first entry is the prior), summed per factor name, plus its reach tier when the ranking
gives one (`reach.tier`). Today's score is 1 - exp(-2.3 * prior * prod(values)), so log(raw) is the sum of
the features: a log-linear model whose weights are all 1. A fitted model weighs them:
s = sum_f w_f * feature_f, score = 1 - exp(-2.3 * exp(s)); the tier orders before the score.

No factor names are listed here: whatever the ranking emits is a feature.
"""
from __future__ import annotations

import fnmatch
import math
import statistics
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

SCORE_SCALE = 2.3  # envsnap/analysis/rank/factors.py: score = 1 - exp(-SCORE_SCALE * raw)
SMALLEST_VALUE = 1e-6  # a factor of 0 would make log(raw) -inf: clamp, so it only ranks last
# The reach tier is a key above the score (DESIGN.md "What acted, over names"); a cause without one sits in
# the middle, beside "could act" and "undecided", so a ranking that gives no tiers is judged by score alone.
# A reach carries its order (envsnap/analysis/rank/reach_model.order_of: 3 acted, 2 could act observed, 1 could
# act by name, 0 cannot); a result without one is ordered by its tier alone.
TIER_ORDER = {"acted": 3, "could_act": 1, "undecided": 1, "cannot": 0}
DEFAULT_TIER = 1
# The band each order's score is shown in (envsnap/analysis/rank/reach_model.ORDER_BANDS).
TIER_BANDS = {3: (0.5, 1.0), 2: (0.3, 0.5), 1: (0.1, 0.3), 0: (0.0, 0.1)}


def is_truth(key: str, truth_keys: Sequence[str]) -> bool:
    """Whether a cause key is the planted change: an exact key or an fnmatch glob of truth.json."""
    return any(key == pattern or fnmatch.fnmatchcase(key, pattern) for pattern in truth_keys)


def features(cause: Mapping[str, Any]) -> Dict[str, float]:
    """log(value) per factor name (the prior included, as "prior"); a name given twice adds up."""
    out: Dict[str, float] = {}
    for factor in cause.get("factors") or []:
        value = float(factor.get("value", 1.0))
        name = str(factor.get("factor"))
        out[name] = out.get(name, 0.0) + math.log(max(value, SMALLEST_VALUE))
    return out


def tier_of(cause: Mapping[str, Any]) -> int:
    reach = cause.get("reach")
    if isinstance(reach, Mapping):
        order = reach.get("order")
        if isinstance(order, int) and order in TIER_BANDS:
            return order
        return TIER_ORDER.get(str(reach.get("tier")), DEFAULT_TIER)
    return DEFAULT_TIER


def _faces(cause: Mapping[str, Any]) -> List[str]:
    """A cause's key and the keys folded into it (one change, one cause: envsnap/analysis/rank/fold.py)."""
    return [str(cause["key"])] + [str(f.get("key")) for f in cause.get("folded") or [] if isinstance(f, Mapping)]


def reduce_causes(causes: Iterable[Mapping[str, Any]], truth_keys: Sequence[str]) -> List[Dict[str, Any]]:
    """What judging and fitting need of each cause: key, truth (its key or a key folded into it is the planted
    change's), tier, features, and the shipped rank/score."""
    return [{"key": c["key"], "truth": any(is_truth(k, truth_keys) for k in _faces(c)), "tier": tier_of(c),
             "tiered": isinstance(c.get("reach"), Mapping),
             "features": features(c), "rank": c.get("rank"), "score": float(c.get("score", 0.0))}
            for c in causes]


def log_score(cause: Mapping[str, Any], weights: Optional[Mapping[str, float]]) -> float:
    """s = sum_f w_f * log(value_f); a factor without a weight keeps today's weight, 1."""
    w = weights or {}
    return sum(w.get(name, 1.0) * value for name, value in cause["features"].items())


def to_score(s: float, tier: Optional[int] = None) -> float:
    """The 0..1 score of a log-raw score s (envsnap's formula with raw = exp(s)), placed in its tier's band as
    envsnap shows it (analysis/rank/reach_model.banded), so a margin agrees with the order."""
    evidence = 1.0 - math.exp(-SCORE_SCALE * math.exp(min(s, 50.0)))
    low, high = TIER_BANDS.get(tier, (0.0, 1.0)) if tier is not None else (0.0, 1.0)
    return low + (high - low) * evidence


def ranked(causes: Sequence[Mapping[str, Any]], weights: Optional[Mapping[str, float]]
           ) -> List[Tuple[int, float, Mapping[str, Any]]]:
    """(dense rank, score, cause), best first. weights None: the ranking as shipped (its own ranks and
    scores); else re-scored with the weights, ordered by tier then score, equal (tier, score) sharing a rank."""
    if weights is None:
        rows = [(int(c["rank"]), float(c["score"]), c) for c in causes]
        rows.sort(key=lambda r: (r[0], r[2]["key"]))
        return rows
    scored = []
    for c in causes:
        s = log_score(c, weights)
        scored.append(((c["tier"], float(f"{s:.9g}")), to_score(s, c["tier"] if c.get("tiered") else None), c))
    scored.sort(key=lambda r: (-r[0][0], -r[0][1], r[2]["key"]))
    rows, rank, previous = [], 0, None
    for signature, score, c in scored:
        if signature != previous:
            rank, previous = rank + 1, signature
        rows.append((rank, score, c))
    return rows


def top_factors(cause: Mapping[str, Any], n: int = 3) -> List[str]:
    """The factors that moved a cause most (largest |log value|), as 'name=value'."""
    items = sorted(cause["features"].items(), key=lambda kv: (-abs(kv[1]), kv[0]))[:n]
    return [f"{name}={math.exp(value):.3g}" for name, value in items]


def judge(causes: Sequence[Mapping[str, Any]], weights: Optional[Mapping[str, float]] = None) -> Dict[str, Any]:
    """One scenario judged: top-1-alone (rank 1 holds truth keys only, at least one), the truth's rank (its best
    key's), margin (truth's best score minus the first innocent's; a missing truth scores 0) and what ranked
    first among the innocents."""
    rows = ranked(causes, weights)
    truth_rows = [r for r in rows if r[2]["truth"]]
    innocent_rows = [r for r in rows if not r[2]["truth"]]
    first_group = [r for r in rows if r[0] == 1]
    top1_alone = bool(first_group) and all(r[2]["truth"] for r in first_group)
    truth_score = truth_rows[0][1] if truth_rows else 0.0
    innocent_score = innocent_rows[0][1] if innocent_rows else 0.0
    first_innocent = innocent_rows[0][2] if innocent_rows else None
    return {
        "top1_alone": top1_alone,
        "truth_rank": truth_rows[0][0] if truth_rows else None,
        "truth_key": truth_rows[0][2]["key"] if truth_rows else None,
        "margin": truth_score - innocent_score,
        "innocents": len(innocent_rows),
        "first_innocent": None if first_innocent is None else {
            "key": first_innocent["key"], "rank": innocent_rows[0][0], "score": innocent_score,
            "top_factors": top_factors(first_innocent)},
    }


def summarize(judged: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Top-1-alone share and median margin of judged scenarios."""
    if not judged:
        return {"scenarios": 0, "top1_alone": None, "median_margin": None}
    return {"scenarios": len(judged),
            "top1_alone": sum(1 for j in judged if j["top1_alone"]) / len(judged),
            "median_margin": statistics.median(j["margin"] for j in judged)}


# ---- fitting: a pairwise ranking loss, L2-regularised toward today's weights (1.0) ----

def pairs(causes: Sequence[Mapping[str, Any]]) -> List[Tuple[Mapping[str, float], Mapping[str, float]]]:
    """(truth, innocent) feature pairs of one scenario, within one tier (across tiers the tier decides)."""
    truths = [c for c in causes if c["truth"]]
    return [(t["features"], i["features"]) for t in truths for i in causes
            if not i["truth"] and i["tier"] == t["tier"]]


def factor_support(scenarios: Sequence[Mapping[str, Any]]) -> Dict[str, List[str]]:
    """Per factor, the families whose truth-vs-innocent pairs it separates (its feature differs in a pair)."""
    seen: Dict[str, set] = {}
    for scenario in scenarios:
        for truth, innocent in pairs(scenario["causes"]):
            for name in set(truth) | set(innocent):
                if abs(truth.get(name, 0.0) - innocent.get(name, 0.0)) > 1e-12:
                    seen.setdefault(name, set()).add(scenario["family"])
    return {name: sorted(families) for name, families in sorted(seen.items())}


def fit(scenarios: Sequence[Mapping[str, Any]], l2: float = 0.1, min_families: int = 3,
        fixed: Optional[Mapping[str, float]] = None) -> Dict[str, Any]:
    """Weights minimising mean-per-scenario logistic loss of (truth - innocent) log-score differences
    + l2 * sum (w - 1)^2. Factors that separate pairs in fewer than `min_families` families keep 1.0 (not
    fitted); `fixed` pins weights (e.g. a factor dropped: 0). Deterministic (L-BFGS-B from all ones)."""
    import numpy as np
    from scipy.optimize import minimize

    support = factor_support(scenarios)
    pinned = dict(fixed or {})
    free = [name for name, fams in support.items() if len(fams) >= min_families and name not in pinned]
    unsupported = [name for name, fams in support.items() if len(fams) < min_families and name not in pinned]
    index = {name: i for i, name in enumerate(free)}
    rows, offsets, row_weights = [], [], []  # every pair; a scenario's pairs share one unit of weight
    for scenario in scenarios:
        scenario_pairs = pairs(scenario["causes"])
        for truth, innocent in scenario_pairs:
            x = np.zeros(len(free))
            offset = 0.0
            for name in set(truth) | set(innocent):
                delta = truth.get(name, 0.0) - innocent.get(name, 0.0)
                if name in index:
                    x[index[name]] = delta
                else:
                    offset += pinned.get(name, 1.0) * delta
            rows.append(x)
            offsets.append(offset)
            row_weights.append(1.0 / len(scenario_pairs))
    n_scenarios = sum(1 for s in scenarios if pairs(s["causes"])) or 1
    x_all = np.array(rows).reshape(len(rows), len(free))
    offset_all = np.array(offsets)
    weight_all = np.array(row_weights) / n_scenarios

    def loss(w: Any) -> Tuple[float, Any]:
        margin = x_all @ w + offset_all
        total = float(weight_all @ np.logaddexp(0.0, -margin)) + l2 * float(np.sum((w - 1.0) ** 2))
        slope = -weight_all / (1.0 + np.exp(np.clip(margin, -500, 500)))
        return total, x_all.T @ slope + 2 * l2 * (w - 1.0)

    weights: Dict[str, float] = {name: 1.0 for name in unsupported}
    weights.update(pinned)
    if free:
        result = minimize(loss, np.ones(len(free)), jac=True, method="L-BFGS-B",
                          options={"maxiter": 500, "gtol": 1e-9})
        weights.update({name: round(float(v), 6) for name, v in zip(free, result.x)})
    return {"weights": dict(sorted(weights.items())), "fitted": free, "unsupported": unsupported,
            "support": support, "pairs": len(rows)}


def leave_one_family_out(scenarios: Sequence[Mapping[str, Any]], **fit_options: Any) -> Dict[str, Any]:
    """Each family judged with weights fitted on the other families only: per family, its judged scenarios and
    the weights used."""
    families = sorted({s["family"] for s in scenarios})
    out: Dict[str, Any] = {}
    for family in families:
        train = [s for s in scenarios if s["family"] != family]
        weights = fit(train, **fit_options)["weights"]
        out[family] = {"weights": weights,
                       "judged": [dict(judge(s["causes"], weights), variant=s["variant"])
                                  for s in scenarios if s["family"] == family]}
    return out
