"""The verdict: what the runs say about the main metric, and the EAGLE-3 decomposition.

Medians, spread, an exact Mann-Whitney test and a bootstrap interval of the median change
(stats.py) per metric both sides measured; the main metric is --metric, else the throughput
metric, else the first common one. EAGLE-3: throughput ~ accept length / cycle time, which
says whether the verify step or the drafter changed.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.analysis import stats
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics

# Relative change below which accept length "holds" / cycle time "holds" (benchmark noise).
HOLD_PCT = 5.0
SIDE_COMPONENTS = {
    "verify": "communication, attention/kernels, CUDA graphs, driver/clocks",
    "drafter": "draft model, speculative_* args, model files, hidden-state capture patches",
}


# ---------------------------------------------------------------- runs and verdict

def run_values(snap: Dict[str, Any]) -> Dict[str, List[float]]:
    """Metric name -> values of the successful runs (failed runs are never measurements)."""
    out: Dict[str, List[float]] = {}
    for run in snap.get("runs") or []:
        if not isinstance(run, dict) or run.get("ok") is False:
            continue
        for name, value in (run.get("metrics") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.setdefault(str(name), []).append(float(value))
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


def _metric_entry(name: str, a: List[float], b: List[float], overrides: Optional[Dict[str, str]] = None,
                  bootstrap: bool = True) -> Dict[str, Any]:
    cmp = stats.compare(a, b, bootstrap=bootstrap)
    return {"direction": metrics.direction(name, overrides), "good": cmp["good"], "bad": cmp["bad"],
            "change_pct": cmp["change_pct"], "significant": cmp["significant"], "p_value": cmp["p_value"],
            "method": cmp["method"], "_beyond_noise": cmp["beyond_noise"]}


def unit(name: str) -> str:
    lowered = name.lower()
    if "throughput" in lowered or lowered.endswith(("tok_s", "tokens_per_s")):
        return " tok/s"
    if lowered.endswith(("per_s", "per_sec", "_per_second")):
        return "/s"
    if lowered.endswith("_ms") or lowered in ("itl", "tpot", "ttft"):
        return " ms"
    if lowered.endswith(("_s", "_sec", "_seconds")):
        return " s"
    return ""


def fmt_num(value: Optional[float]) -> str:
    if value is None:
        return "?"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.3g}"


def fmt_pct(change: Optional[float]) -> str:
    if change is None:
        return "n/a"
    sign = "\u2212" if change < 0 else "+"
    magnitude = abs(change)
    return f"{sign}{magnitude:.1f}%" if magnitude < 1 else f"{sign}{magnitude:.0f}%"


def _first_with_role(names: Sequence[str], role: str, order: Sequence[str]) -> Optional[str]:
    candidates = [n for n in names if metrics.role(n) == role]
    rank = {n: i for i, n in enumerate(order)}
    candidates.sort(key=lambda n: (rank.get(n.lower(), len(rank)), n))
    return candidates[0] if candidates else None


def decompose(entries: Dict[str, Dict[str, Any]], main: Optional[str]) -> Tuple[Optional[Dict[str, Any]], str]:
    """EAGLE-3: throughput ~ accept length / cycle time. Returns (decomposition, short text)."""
    names = sorted(entries)
    acc = _first_with_role(names, "accept_length", metrics.ACCEPT_LENGTH_NAMES)
    cyc = _first_with_role(names, "cycle_time", metrics.CYCLE_TIME_NAMES)
    if acc is None and cyc is None:
        return None, ""

    def part(name: Optional[str]) -> Optional[Dict[str, Any]]:
        if name is None:
            return None
        e = entries[name]
        change = e["change_pct"]
        return {"metric": name, "good": e["good"]["median"], "bad": e["bad"]["median"], "change_pct": change,
                "holds": change is not None and abs(change) < HOLD_PCT}

    a, c = part(acc), part(cyc)
    acc_falls = a is not None and a["change_pct"] is not None and a["change_pct"] <= -HOLD_PCT
    acc_holds = a is not None and a["holds"]
    cyc_grows = c is not None and c["change_pct"] is not None and c["change_pct"] >= HOLD_PCT
    main_worse = False
    if main and main in entries and entries[main]["change_pct"] is not None:
        change = entries[main]["change_pct"]
        main_worse = metrics.is_worse(entries[main]["direction"], change)
    bits = []
    if a is not None:
        verb = "holds" if acc_holds else ("falls" if acc_falls else "rises")
        bits.append(f"accept length {verb} ({fmt_num(a['good'])} \u2192 {fmt_num(a['bad'])})")
    if c is not None:
        cname = "verify" if "verify" in c["metric"] else "cycle"
        bits.append(f"{cname} {fmt_num(c['good'])} \u2192 {fmt_num(c['bad'])}{unit(c['metric'])}")
    if a is not None and c is not None:
        side = ("verify" if acc_holds and cyc_grows else "drafter" if acc_falls and not cyc_grows
                else "both" if acc_falls and cyc_grows else "unclear")
    elif a is not None:
        side = "drafter" if acc_falls else ("verify" if acc_holds and main_worse else "unclear")
    else:
        side = "verify" if cyc_grows and "verify" in c["metric"] else "unclear"
    if side == "verify":
        explanation = ("accepted tokens per cycle held while each cycle got slower: the verify step (target "
                       f"model forward) is where time went; weighting {SIDE_COMPONENTS['verify']}")
    elif side == "drafter":
        explanation = ("fewer draft tokens are accepted per cycle: the drafter side changed; weighting "
                       f"{SIDE_COMPONENTS['drafter']}")
    elif side == "both":
        explanation = "accept length fell and cycles got slower: both the drafter and the verify step changed"
    else:
        explanation = "accept length and cycle time do not single out the drafter or the verify step"
    short = ", ".join(bits) + (f": {side} side" if side in ("verify", "drafter") else
                               (": both sides" if side == "both" else ""))
    return {"accept_length": a, "cycle_time": c, "side": side, "explanation": explanation}, short


def build_verdict(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str] = None
                  ) -> Tuple[Dict[str, Any], List[str]]:
    gv, bv = run_values(good), run_values(bad)
    warnings: List[str] = []
    for side, snap in (("good", good), ("bad", bad)):
        runs = [r for r in snap.get("runs") or [] if isinstance(r, dict)]
        failed = [r for r in runs if r.get("ok") is False]
        if failed:
            warnings.append(f"{len(failed)} of {len(runs)} runs failed in {side}; failed runs are not counted")
    if metric is None and (not gv or not bv):
        empty = stats.describe([])
        missing = " and ".join(s for s, v in (("good", gv), ("bad", bv)) if not v)
        warnings.append(f"no successful runs in {missing}: causes are ranked by prior knowledge only "
                        "(measure with `envsnap run`)")
        return ({"metric": None, "direction": metrics.HIGHER, "good": empty, "bad": empty, "change_pct": None,
                 "significant": False, "p_value": None, "method": "no data",
                 "summary": f"NO RUNS in {missing}: differences ranked by prior knowledge only",
                 "metrics": {}, "decomposition": None}, warnings)
    main = choose_metric([gv, bv], metric, ["good", "bad"])
    common = sorted(set(gv) & set(bv))
    # `envsnap run/attach --direction NAME=higher|lower` stores overrides in the snapshot.
    overrides: Dict[str, str] = {}
    for snap in (good, bad):
        stored = snap.get("metric_directions")
        if isinstance(stored, dict):
            overrides.update({str(k): v for k, v in stored.items() if v in metrics.DIRECTIONS})
    # The bootstrap interval (the costly part) for the metrics the verdict line is made of.
    key_metrics = {main, _first_with_role(common, "accept_length", metrics.ACCEPT_LENGTH_NAMES),
                   _first_with_role(common, "cycle_time", metrics.CYCLE_TIME_NAMES)}
    entries = {name: _metric_entry(name, gv[name], bv[name], overrides, bootstrap=name in key_metrics)
               for name in common}
    if main is None:
        empty = stats.describe([])
        warnings.append("good and bad have no metric in common: the regression cannot be quantified")
        return ({"metric": None, "direction": metrics.HIGHER, "good": empty, "bad": empty, "change_pct": None,
                 "significant": False, "p_value": None, "method": "no data",
                 "summary": "NO COMMON METRIC: differences ranked by prior knowledge only",
                 "metrics": {n: _public(e) for n, e in entries.items()}, "decomposition": None}, warnings)
    decomposition, short = decompose(entries, main)
    e = entries[main]
    summary = _summary(main, e, short)
    if decomposition is not None and decomposition["accept_length"] is not None:
        acc = decomposition["accept_length"]["metric"]
        parsers = {p for snap in (good, bad) for r in snap.get("runs") or [] if isinstance(r, dict)
                   for p in (r.get("parsers") or [])}
        if any("bench_serving" in str(p) for p in parsers):
            warnings.append(f"{acc} from bench_serving is the server's running average since start, not this "
                            "run's alone: restart the server between measurements for a clean number")
    verdict = {"metric": main, "direction": e["direction"], "good": e["good"], "bad": e["bad"],
               "change_pct": e["change_pct"], "significant": e["significant"], "p_value": e["p_value"],
               "method": e["method"], "summary": summary,
               "metrics": {n: _public(x) for n, x in entries.items()}, "decomposition": decomposition}
    return verdict, warnings


def _public(entry: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in entry.items() if not k.startswith("_")}


def _worse(entry: Dict[str, Any]) -> bool:
    return metrics.is_worse(str(entry.get("direction")), entry.get("change_pct"))


def _summary(name: str, e: Dict[str, Any], short: str) -> str:
    worse = _worse(e)
    # A metric with no better direction (concurrency, counts) changes; it neither regresses nor improves.
    moved = ("CHANGE", "POSSIBLE CHANGE") if e["direction"] == metrics.NONE else (
        ("REGRESSION", "POSSIBLE REGRESSION") if worse else ("IMPROVEMENT", "POSSIBLE IMPROVEMENT"))
    if e["significant"]:
        kind = moved[0]
    elif e["_beyond_noise"]:
        kind = moved[1]
    else:
        kind = "NO SIGNIFICANT CHANGE"
    g, b = e["good"], e["bad"]
    noise = "beyond noise" if e["_beyond_noise"] else "within noise"
    text = (f"{kind} {name} {fmt_num(g['median'])} \u2192 {fmt_num(b['median'])}{unit(name)} "
            f"({fmt_pct(e['change_pct'])}, {stats.format_p(e['p_value'])}, {noise}")
    if not e["significant"] and stats.min_achievable_p(g["n"], b["n"]) >= 0.05:
        text += f"; n={g['n']} vs {b['n']}: too few runs for a test"
    text += ")"
    if short:
        text += "; " + short
    return text
