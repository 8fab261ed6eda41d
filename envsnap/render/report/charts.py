"""The runs: every run of each metric on both sides as an inline SVG strip chart (dots, medians, a nice
axis), the verdict's metric and the EAGLE-3 ones first."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Tuple

from envsnap import format as fmt
from envsnap.analysis.runs import stats
from envsnap.model.result_types import DiffResult

MAX_CHARTS = 24


def _nice_step(span: float, target: int = 5) -> float:
    raw = span / max(1, target)
    power = 10.0 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _step_decimals(step: float) -> int:
    """Decimals every tick of an axis needs: 0.25 -> 2, 2.5 -> 1, 5 -> 0, 0.05 -> 2."""
    exponent = math.floor(math.log10(step) + 1e-9)
    mantissa = round(step / 10 ** exponent, 6)
    return max(0, -exponent + (0 if mantissa in (1, 2, 5, 10) else 1))


def _chart(name: str, good: List[Tuple[int, float]], bad: List[Tuple[int, float]], direction: str) -> Dict[str, Any]:
    width, left, right, row_h, top = 1080, 56, 24, 44, 8
    everything = [v for _, v in good + bad]
    lo, hi = min(everything), max(everything)
    if hi == lo:
        pad = abs(lo) * 0.05 or 1.0
        lo, hi = lo - pad, hi + pad
    step = _nice_step(hi - lo)
    lo_tick, hi_tick = math.floor(lo / step) * step, math.ceil(hi / step) * step
    span = hi_tick - lo_tick or 1.0

    def x(value: float) -> float:
        return round(left + (value - lo_tick) / span * (width - left - right), 1)

    rows = []
    for row_index, (side, points) in enumerate((("good", good), ("bad", bad))):
        y_mid = top + row_index * row_h + row_h / 2
        dots = []
        for order, (run_no, value) in enumerate(points):
            jitter = ((order * 7) % 5 - 2) * 4  # deterministic spread so equal values stay visible
            dots.append({"x": x(value), "y": round(y_mid + jitter, 1), "label": f"{side} run {run_no}: {fmt.num(value)}"})
        median = stats.median([v for _, v in points]) if points else None
        rows.append({"side": side, "y_mid": y_mid, "y0": y_mid - row_h / 2 + 4, "y1": y_mid + row_h / 2 - 4,
                     "dots": dots, "n": len(points),
                     "median_x": x(median) if median is not None else None, "median": fmt.num(median)})
    ticks = []
    count = int(round(span / step))
    decimals = _step_decimals(step)
    for i in range(count + 1):
        value = lo_tick + i * step
        ticks.append({"x": x(value), "label": f"{value:,.{decimals}f}"})
    axis_y = top + 2 * row_h
    return {"name": name, "direction": direction, "direction_text": fmt.direction(direction), "width": width,
            "height": axis_y + 34, "left": left, "right_x": width - right, "axis_y": axis_y, "ticks": ticks, "rows": rows}


def charts_view(result: DiffResult) -> Dict[str, Any]:
    runs = result["tables"]["runs"]
    good, bad = runs["good"], runs["bad"]
    good_values = {k: [(int(i), float(v)) for i, v in p] for k, p in good["metrics"].items()}
    bad_values = {k: [(int(i), float(v)) for i, v in p] for k, p in bad["metrics"].items()}
    verdict = result["verdict"]
    decomposition = verdict["decomposition"]
    parts = (decomposition["accept_length"], decomposition["cycle_time"]) if decomposition else (None, None)
    first = [verdict["metric"]] + [part["metric"] if part else None for part in parts]
    names = sorted(set(good_values) | set(bad_values),
                   key=lambda n: (n not in first, first.index(n) if n in first else 0, fmt.natural_key(n)))
    metrics = verdict["metrics"]
    directions = {n: metrics[n]["direction"] if n in metrics else "" for n in names}
    charts = [_chart(n, good_values.get(n, []), bad_values.get(n, []), directions[n])
              for n in names[:MAX_CHARTS]]
    # The verdict's metric and the EAGLE-3 ones are shown; the other metrics wait in a closed <details>.
    lead = sum(1 for c in charts if c["name"] in first) or min(1, len(charts))
    return {"charts": charts[:lead], "more_charts": charts[lead:], "omitted": names[MAX_CHARTS:],
            "good_failed": good["failed"], "bad_failed": bad["failed"],
            "good_runs": good["total"], "bad_runs": bad["total"]}
