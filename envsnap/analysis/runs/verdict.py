"""The verdict: what the runs say about the main metric, as ONE object every output reads.

Per metric both sides measured: medians, spread, an exact Mann-Whitney test and (for the metrics
the verdict line is made of) a bootstrap interval of the median change (stats.py). Each metric's
`outcome` follows from those numbers once, here:

  worse / better                    p < 0.05 (stats.SIGNIFICANCE_LEVEL) and the change is beyond noise (noise.py)
  possibly_worse / possibly_better  beyond noise, but the test cannot confirm it (too few runs, or p >= 0.05)
  no_change                         within noise
  changed / possibly_changed        the same, for a metric with no better direction (concurrency, counts):
                                    a change is a change, never a regression or an improvement
  unknown                           no change to speak of (a side without runs)

The main metric is --metric, else the throughput metric, else the first common one. Text, JSON and
HTML all print the verdict's `headline`, `noise`, `summary` and `mechanism` line; none of them decides anything.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, cast

from envsnap import format as fmt
from envsnap.analysis.runs import eagle3, mechanism as mechanism_mod, stats
from envsnap.analysis.runs.session import interrupted_series
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics
from envsnap.model.result_types import MetricEntry, Verdict

# The verdict line's first words, per outcome of the main metric.
HEADLINES = {
    "worse": "REGRESSION", "better": "IMPROVEMENT", "possibly_worse": "POSSIBLE REGRESSION",
    "possibly_better": "POSSIBLE IMPROVEMENT", "no_change": "NO SIGNIFICANT CHANGE", "changed": "CHANGE",
    "possibly_changed": "POSSIBLE CHANGE",
    "unknown": "NO VERDICT",
}
# The same outcomes in the words a table or page shows beside a metric's numbers.
OUTCOME_WORDS = {
    "worse": "worse", "better": "better", "possibly_worse": "possibly worse", "possibly_better": "possibly better",
    "no_change": "no change", "changed": "changed", "possibly_changed": "possibly changed",
    "unknown": "no comparable measurements",
}


def run_metrics(snap: Dict[str, Any]) -> List[Dict[str, float]]:
    """{metric: value} of each successful run (failed runs are never measurements)."""
    out = []
    for run in snap.get("runs") or []:
        if not isinstance(run, dict) or run.get("ok") is False:
            continue
        values = {str(name): float(value) for name, value in (run.get("metrics") or {}).items()
                  if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)}
        out.append(values)
    return out


def run_values(snap: Dict[str, Any]) -> Dict[str, List[float]]:
    """Metric name -> values of the successful runs."""
    out: Dict[str, List[float]] = {}
    for run in run_metrics(snap):
        for name, value in run.items():
            out.setdefault(name, []).append(value)
    return out


def choose_metric(available: Sequence[Dict[str, List[float]]], requested: Optional[str],
                  labels: Sequence[str]) -> Optional[str]:
    """--metric, else the throughput-role metric present everywhere, else the first common one."""
    common = sorted(set.intersection(*(set(a) for a in available))) if available else []
    if requested:
        missing = [label for label, a in zip(labels, available) if requested not in a]
        if missing:
            have = ", ".join(sorted(set().union(*(set(a) for a in available)))) or "none"
            raise EnvsnapError(f"metric {requested!r} is not in the runs of {', '.join(missing)} "
                               f"(metrics found: {have})")
        return requested
    for name in common:
        if metrics.role(name) == "throughput":
            return name
    for name in common:  # names like "gen_throughput_tok_s" that role() does not list
        if "throughput" in name.lower():
            return name
    return common[0] if common else None


def outcome(direction: str, change: Optional[float], beyond_noise: bool, significant: bool) -> str:
    """The one reading of a metric's numbers (see the module docstring)."""
    if change is None:
        return "unknown"
    if not beyond_noise or change == 0:
        return "no_change"
    if direction not in (metrics.HIGHER, metrics.LOWER):
        return "changed" if significant else "possibly_changed"
    bad_way = metrics.is_worse(direction, change)
    if significant:
        return "worse" if bad_way else "better"
    return "possibly_worse" if bad_way else "possibly_better"


def metric_entry(name: str, good: List[float], bad: List[float], overrides: Optional[Dict[str, str]] = None,
                 bootstrap: bool = True) -> MetricEntry:
    """One metric compared: the numbers, whether a test can decide it, and its outcome."""
    cmp = stats.compare(good, bad, bootstrap=bootstrap)
    direction = metrics.direction(name, overrides)
    n_good, n_bad = cmp["good"]["n"], cmp["bad"]["n"]
    entry: MetricEntry = {"direction": direction, "good": cmp["good"], "bad": cmp["bad"], "change_pct": cmp["change_pct"],
                          "p_value": cmp["p_value"], "method": cmp["method"], "ci_pct": cmp["ci_pct"],
                          "beyond_noise": cmp["beyond_noise"], "significant": cmp["significant"],
                          "testable": stats.min_achievable_p(n_good, n_bad) < stats.SIGNIFICANCE_LEVEL,
                          "outcome": outcome(direction, signed_change(cmp), cmp["beyond_noise"], cmp["significant"]),
                          "change_text": change_text(cmp, name)}
    if "change_abs" in cmp:  # a change from a median of 0, in the metric's unit
        entry["change_abs"] = cmp["change_abs"]
    if "ci_abs" in cmp:
        entry["ci_abs"] = cmp["ci_abs"]
    return entry


def signed_change(entry: Dict[str, Any]) -> Optional[float]:
    """The change whose sign says which way a metric moved: in percent, or in its unit from a median of 0."""
    change = entry.get("change_pct")
    return change if change is not None else entry.get("change_abs")


def change_text(entry: Dict[str, Any], name: str) -> str:
    """"−36%", or "+4 tok/s from 0" where a percentage has no meaning: what every output prints."""
    if entry.get("change_pct") is not None or entry.get("change_abs") is None:
        return fmt.pct(entry.get("change_pct"))
    difference = float(entry["change_abs"])
    sign = fmt.MINUS if difference < 0 else "+"
    return f"{sign}{fmt.num(abs(difference))}{fmt.unit(name)} from 0"


def _too_few(entry: MetricEntry) -> Optional[str]:
    if entry["testable"] or entry["significant"]:
        return None
    n_good, n_bad = entry["good"]["n"], entry["bad"]["n"]
    floor = stats.min_achievable_p(n_good, n_bad)
    return (f"n={n_good} vs {n_bad}: too few runs for a test (the smallest p possible is {floor:.2g}; "
            "5 runs a side can reach 0.008)")


def _summary(name: str, entry: MetricEntry, headline: str, noise: str, too_few: Optional[str],
             short: str) -> str:
    g, b = entry["good"], entry["bad"]
    text = (f"{headline} {name} {fmt.num(g['median'])} {fmt.ARROW} {fmt.num(b['median'])}{fmt.unit(name)} "
            f"({entry.get('change_text') or fmt.pct(entry['change_pct'])}, {stats.format_p(entry['p_value'])}, {noise}")
    if too_few:
        text += f"; {too_few.split(':')[0]}: too few runs for a test"
    text += ")"
    if short:
        text += "; " + short
    return text


def _no_verdict(summary: str, entries: Dict[str, MetricEntry]) -> Dict[str, Any]:
    empty = stats.describe([])
    return {"metric": None, "direction": metrics.HIGHER, "good": empty, "bad": empty, "change_pct": None,
            "p_value": None, "method": "no data", "ci_pct": None, "beyond_noise": False, "significant": False,
            "testable": False, "outcome": "unknown", "headline": HEADLINES["unknown"], "noise": "no measurement",
            "too_few_runs": None, "summary": summary, "metrics": entries, "decomposition": None}


def _directions(good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, str]:
    """`envsnap run/attach --direction NAME=higher|lower|none` overrides stored in the snapshots."""
    overrides: Dict[str, str] = {}
    for snap in (good, bad):
        stored = snap.get("metric_directions")
        if isinstance(stored, dict):
            overrides.update({str(k): v for k, v in stored.items() if v in metrics.DIRECTIONS})
    return overrides


def build_verdict(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str] = None
                  ) -> Tuple[Verdict, List[str]]:
    """(verdict, warnings) of two snapshots' runs: the metrics' outcome, and the mechanism (how the runs'
    telemetry changed: mechanism.py), which every output states and the ranking weighs."""
    verdict, warnings = _metric_verdict(good, bad, metric)
    verdict["mechanism"] = mechanism_mod.mechanism(good, bad)
    return cast(Verdict, verdict), warnings  # the metric's entry and the verdict's words, now whole


def _metric_verdict(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str]
                    ) -> Tuple[Dict[str, Any], List[str]]:
    good_runs, bad_runs = run_metrics(good), run_metrics(bad)
    gv, bv = run_values(good), run_values(bad)
    warnings: List[str] = []
    for side, snap in (("good", good), ("bad", bad)):
        interrupted = interrupted_series(snap)
        if interrupted:
            warnings.append(f"{side}: {interrupted}")
    for side, snap in (("good", good), ("bad", bad)):
        runs = [r for r in snap.get("runs") or [] if isinstance(r, dict)]
        failed = [r for r in runs if r.get("ok") is False]
        if failed:
            warnings.append(f"{len(failed)} of {len(runs)} runs failed in {side}; failed runs are not counted")
    if metric is None and (not gv or not bv):
        missing = " and ".join(s for s, v in (("good", gv), ("bad", bv)) if not v)
        warnings.append(f"no successful runs in {missing}: causes are ranked by prior knowledge only "
                        "(measure with `envsnap run`)")
        return _no_verdict(f"NO RUNS in {missing}: differences ranked by prior knowledge only", {}), warnings
    main = choose_metric([gv, bv], metric, ["good", "bad"])
    common = sorted(set(gv) & set(bv))
    overrides = _directions(good, bad)
    accept = next((n for n in common if metrics.role(n) == "accept_length"), None)
    cycle = eagle3.cycle_source(common, good_runs, bad_runs, accept)
    # The bootstrap interval (the costly part) for the metrics the verdict line is made of.
    key_metrics = {main, accept, cycle[0] if cycle else None}
    entries = {name: metric_entry(name, gv[name], bv[name], overrides, bootstrap=name in key_metrics)
               for name in common}
    if main is None:
        warnings.append("good and bad have no metric in common: the regression cannot be quantified")
        return _no_verdict("NO COMMON METRIC: differences ranked by prior knowledge only", entries), warnings
    decomposition = eagle3.decompose(entries, good_runs, bad_runs, main)
    entry = entries[main]
    headline = HEADLINES[entry["outcome"]]
    noise = "beyond noise" if entry["beyond_noise"] else "within noise"
    too_few = _too_few(entry)
    short = decomposition.pop("short") if decomposition else ""
    accept_metric = (decomposition.get("accept_length") or {}).get("metric") if decomposition else None
    if accept_metric in metrics.LIFETIME_ACCEPT_LENGTH_NAMES:
        # The SGLang benchmarks print /server_info's lifetime figure under these names; a run's own accept
        # length (spec_accept_length, from /metrics: measure/server_metrics.py) needs no warning.
        parsers = {p for snap in (good, bad) for r in snap.get("runs") or [] if isinstance(r, dict)
                   for p in (r.get("parsers") or [])}
        if any("bench_serving" in str(p) or "one_batch_server" in str(p) for p in parsers):
            warnings.append(f"{accept_metric} from bench_serving is the server's running "
                            "average since start, not this run's alone: restart the server between measurements "
                            "for a clean number")
    verdict = dict(entry)
    verdict.update({"metric": main, "headline": headline, "noise": noise, "too_few_runs": too_few,
                    "summary": _summary(main, entry, headline, noise, too_few, short), "metrics": entries,
                    "decomposition": decomposition})
    return verdict, warnings


def worse(entry: Dict[str, Any]) -> bool:
    """Did this metric (or the verdict) move the bad way, whatever the test says?"""
    return metrics.is_worse(str(entry.get("direction")), signed_change(entry))


def mechanism_line(verdict: Verdict) -> str:
    """The mechanism's one line, when the verdict measured something: what text and HTML print (JSON carries
    the whole mechanism under verdict.mechanism)."""
    if not verdict["metric"]:
        return ""
    return verdict["mechanism"]["line"]
