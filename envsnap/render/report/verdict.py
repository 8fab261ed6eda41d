"""The verdict: the main metric on both sides, the other metrics, the EAGLE-3 decomposition and the runs'
mechanism, in the words and colour classes of the page."""
from __future__ import annotations

from typing import Any, Dict, Optional, Union

from envsnap import format as fmt
from envsnap.analysis.runs.verdict import OUTCOME_WORDS, mechanism_line
from envsnap.model.result_types import DecompositionPart, DiffResult, MetricEntry, Stats, Verdict
from envsnap.render import trace_view


def _stats(raw: Stats) -> Dict[str, Any]:
    return {"median": fmt.num(raw["median"]), "spread": fmt.num(raw["spread"]), "n": raw["n"],
            "min": fmt.num(raw["min"]), "max": fmt.num(raw["max"])}


def _metric_view(name: str, raw: Union[MetricEntry, Verdict]) -> Dict[str, Any]:
    p_value = raw["p_value"]
    outcome = raw["outcome"]
    return {
        "name": name, "direction": raw["direction"],
        "direction_text": fmt.direction(raw["direction"]), "good": _stats(raw["good"]),
        "bad": _stats(raw["bad"]),
        "change": fmt.value(raw["change_text"], 40),
        "beyond_noise": raw["beyond_noise"], "significant": raw["significant"],
        "noise": "beyond noise" if raw["beyond_noise"] else "within noise",
        "p_value": "—" if p_value is None else f"{p_value:.3g}",
        "method": raw["method"], "outcome": outcome, "word": OUTCOME_WORDS[outcome],
        "css": outcome.replace("_", "-"),
    }


def _decomposition_part(raw: Optional[DecompositionPart]) -> Optional[Dict[str, Any]]:
    if raw is None:
        return None
    return {"metric": raw["metric"], "good": fmt.num(raw["good"]), "bad": fmt.num(raw["bad"]),
            "change": fmt.pct(raw["change_pct"]), "holds": raw["holds"], "formula": raw["formula"]}


def verdict_view(result: DiffResult) -> Dict[str, Any]:
    verdict = result["verdict"]
    name = verdict["metric"]
    main = _metric_view(name, verdict) if name else None
    others = [_metric_view(other, raw) for other, raw in sorted(verdict["metrics"].items(), key=lambda kv: fmt.natural_key(kv[0]))
              if other != name]
    decomposition = None
    raw_dec = verdict["decomposition"]
    if raw_dec is not None:
        decomposition = {
            "accept_length": _decomposition_part(raw_dec["accept_length"]),
            "cycle_time": _decomposition_part(raw_dec["cycle_time"]),
            "side": raw_dec["side"],
            "explanation": raw_dec["explanation"],
        }
    return {"metric": main, "others": others, "decomposition": decomposition,
            "mechanism": mechanism_line(verdict), "trace": trace_view.html_view(result),
            "summary": verdict["summary"], "headline": verdict["headline"],
            "noise": verdict["noise"], "too_few_runs": verdict["too_few_runs"] or "",
            "outcome": main["css"] if main else "unknown"}
