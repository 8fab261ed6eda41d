"""The EAGLE-3 decomposition: throughput ~ accepted tokens per cycle / cycle (verify step) time.

A drop with accept length holding points at the verify step (communication, kernels, CUDA graphs,
clocks); a drop in accept length with the cycle holding points at the drafter. The cycle time must
be a *cycle* time, and benchmark clients rarely report one:

* SGLang's bench_serving records ITL per token: a streamed speculative chunk's gap is divided by
  the tokens in it (sglang 0.5.23 sglang/benchmark/serving.py, the `adjust_itl = chunk_gap /
  num_new_tokens` loop of the sglang backend), and its TPOT is (latency - TTFT) / (tokens - 1).
  Both are per-token latencies: cycle ~ per-token latency x accept length.
* The server's decode log gives tokens per second of the whole batch and the accept length
  ("Decode batch, #running-req: R, ... accept len: A, ... gen throughput (token/s): T",
  sglang 0.5.23 srt/managers/scheduler_components/metrics_reporter.py): cycle ~ R x A / T
  (the parser computes it per line as decode_cycle_ms).
* A profiler's or `envsnap attach`'s verify_ms / cycle_ms is a cycle time as measured.

The decomposition says which of these it used (`formula`), so a reader can check it.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap import format as fmt
from envsnap.analysis.runs import stats
from envsnap.measure import metrics

# Relative change below which accept length / cycle time "holds" (benchmark noise).
HOLD_PCT = 5.0
SIDE_COMPONENTS = {
    "verify": "communication, attention/kernels, CUDA graphs, driver/clocks",
    "drafter": "draft model, speculative_* args, model files, hidden-state capture patches",
}
PER_TOKEN_NOTE = ("bench_serving's ITL/TPOT are per token (a speculative chunk's gap is divided by its tokens), "
                  "so the cycle is per-token latency x accept length; a mean is used where there is one, since "
                  "total time / tokens = cycle / accept length holds for means only")

Runs = Sequence[Dict[str, float]]  # one {metric: value} per successful run


def _first(names: Sequence[str], order: Sequence[str], accept: Callable[[str], bool]) -> Optional[str]:
    candidates = [n for n in names if accept(n)]
    rank = {n: i for i, n in enumerate(order)}
    candidates.sort(key=lambda n: (rank.get(n.lower(), len(rank)), n))
    return candidates[0] if candidates else None


def _part(name: str, good: List[float], bad: List[float], formula: str) -> Dict[str, Any]:
    cmp = stats.compare(good, bad, bootstrap=False)
    change = cmp["change_pct"]
    return {"metric": name, "formula": formula, "good": cmp["good"]["median"], "bad": cmp["bad"]["median"],
            "change_pct": change, "holds": change is not None and abs(change) < HOLD_PCT}


def _products(runs: Runs, latency: str, accept: str) -> List[float]:
    """latency x accept of each run that measured both (the pairing matters: same run)."""
    out = []
    for run in runs:
        if latency in run and accept in run and math.isfinite(run[latency] * run[accept]):
            out.append(run[latency] * run[accept])
    return out


def cycle_source(names: Sequence[str], good_runs: Runs, bad_runs: Runs, accept: Optional[str]
                 ) -> Optional[Tuple[str, List[float], List[float], str]]:
    """(name, good values, bad values, formula) of the best cycle-time evidence the runs hold."""
    measured = _first(names, metrics.CYCLE_TIME_NAMES, lambda n: metrics.role(n) == "cycle_time")
    if measured is not None:
        good = [r[measured] for r in good_runs if measured in r]
        bad = [r[measured] for r in bad_runs if measured in r]
        how = ("decode log: #running-req x accept len / gen throughput" if measured == "decode_cycle_ms"
               else f"{measured}, as measured")
        return measured, good, bad, how
    latency = _first(names, metrics.PER_TOKEN_LATENCY_NAMES, lambda n: metrics.role(n) == "per_token_latency")
    if latency is None or accept is None:
        return None
    good, bad = _products(good_runs, latency, accept), _products(bad_runs, latency, accept)
    if not good or not bad:
        return None
    return f"{latency} x {accept}", good, bad, f"{latency} x {accept} ({PER_TOKEN_NOTE})"


def decompose(entries: Mapping[str, Mapping[str, Any]], good_runs: Runs, bad_runs: Runs, main: Optional[str]
              ) -> Optional[Dict[str, Any]]:
    """The decomposition (accept length, cycle time, side, explanation, short line), or None."""
    names = sorted(entries)
    acc = _first(names, metrics.ACCEPT_LENGTH_NAMES, lambda n: metrics.role(n) == "accept_length")
    source = cycle_source(names, good_runs, bad_runs, acc)
    if acc is None and source is None:
        return None
    a = None
    if acc is not None:
        e = entries[acc]
        a = {"metric": acc, "formula": f"{acc}, as measured", "good": e["good"]["median"], "bad": e["bad"]["median"],
             "change_pct": e["change_pct"], "holds": e["change_pct"] is not None and abs(e["change_pct"]) < HOLD_PCT}
    c = _part(source[0], source[1], source[2], source[3]) if source is not None else None
    acc_falls = a is not None and a["change_pct"] is not None and a["change_pct"] <= -HOLD_PCT
    acc_holds = a is not None and a["holds"]
    cyc_grows = c is not None and c["change_pct"] is not None and c["change_pct"] >= HOLD_PCT
    cyc_holds = c is not None and c["holds"]
    main_worse = main is not None and main in entries and entries[main]["outcome"] in ("worse", "possibly_worse")
    if a is not None and c is not None:
        side = ("verify" if acc_holds and cyc_grows else "drafter" if acc_falls and cyc_holds
                else "both" if acc_falls and cyc_grows else "unclear")
    elif a is not None:
        side = "drafter" if acc_falls else ("verify" if acc_holds and main_worse else "unclear")
    else:
        side = "verify" if cyc_grows else "unclear"
    return {"accept_length": a, "cycle_time": c, "side": side, "explanation": _explain(side, c),
            "short": _short(a, c, side)}


def _explain(side: str, cycle: Optional[Dict[str, Any]]) -> str:
    how = f" (cycle = {cycle['formula']})" if cycle is not None else ""
    if side == "verify":
        return ("accepted tokens per cycle held while each cycle got slower: the verify step (target model "
                f"forward) is where time went; weighting {SIDE_COMPONENTS['verify']}{how}")
    if side == "drafter":
        return ("fewer draft tokens are accepted per cycle while the cycle itself held: the drafter side changed; "
                f"weighting {SIDE_COMPONENTS['drafter']}{how}")
    if side == "both":
        return f"accept length fell and cycles got slower: both the drafter and the verify step changed{how}"
    return f"accept length and cycle time do not single out the drafter or the verify step{how}"


def _short(a: Optional[Dict[str, Any]], c: Optional[Dict[str, Any]], side: str) -> str:
    bits = []
    if a is not None:
        verb = "holds" if a["holds"] else ("falls" if (a["change_pct"] or 0) < 0 else "rises")
        bits.append(f"accept length {verb} ({fmt.num(a['good'])} {fmt.ARROW} {fmt.num(a['bad'])})")
    if c is not None:
        label = "verify" if "verify" in c["metric"] else "cycle"
        derived = " x " in c["metric"] or c["metric"] == "decode_cycle_ms"
        unit = " ms" if c["metric"].endswith("_ms") or derived else fmt.unit(c["metric"])
        bits.append(f"{label} {fmt.num(c['good'])} {fmt.ARROW} {fmt.num(c['bad'])}{unit}"
                    + (f" ({c['metric']})" if derived else ""))
    tail = {"verify": ": verify side", "drafter": ": drafter side", "both": ": both sides"}.get(side, "")
    return ", ".join(bits) + tail
