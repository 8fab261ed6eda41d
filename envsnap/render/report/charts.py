"""The runs: every run of each metric on both sides as an inline SVG strip chart (dots, medians, a nice
axis), the verdict's metric and the EAGLE-3 ones first."""
from __future__ import annotations

import math
import sys
from typing import Any, Dict, List, Tuple

from envsnap import format as fmt
from envsnap.analysis.runs import stats
from envsnap.model.result_types import DiffResult

MAX_CHARTS = 24


# Below this a span has no nice decimal step (10 ** floor(log10(span)) underflows to 0 near 1e-308) and a
# value's distance from its neighbours is not something a chart can show.
_TINY_SPAN = 1e-300
# An axis never draws more ticks than this, whatever rounding did to the step.
_MAX_TICKS = 12


def _nice_step(span: float, target: int = 5) -> float:
    """A step of 1, 2, 2.5 or 5 times a power of ten that cuts `span` (finite, >= _TINY_SPAN) in about
    `target` parts."""
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


def _padded(lo: float, hi: float) -> Tuple[float, float]:
    """lo and hi, spread apart when they are equal or closer than any axis can show (0 and 5e-324)."""
    if hi - lo >= max(_TINY_SPAN, max(abs(lo), abs(hi)) * 1e-12):
        return lo, hi
    pad = abs(lo) * 0.05
    if not _TINY_SPAN <= pad:
        pad = 1.0
    return max(lo - pad, -sys.float_info.max), min(hi + pad, sys.float_info.max)


def _axis(lo: float, hi: float) -> Tuple[float, float, List[Tuple[float, str]]]:
    """(first tick, last tick, [(value, label)]): nice round ticks when the span allows them; else (a span
    beyond the largest float, 1e308 against -1e308) the two ends, labelled as any number is."""
    span = hi - lo
    if math.isfinite(span):
        step = _nice_step(span)
        lo_tick, hi_tick = math.floor(lo / step) * step, math.ceil(hi / step) * step
        count = int(round((hi_tick - lo_tick) / step)) if math.isfinite(hi_tick - lo_tick) else 0
        if 0 < count <= _MAX_TICKS:
            decimals = _step_decimals(step)
            return lo_tick, hi_tick, [(lo_tick + i * step, f"{lo_tick + i * step:,.{decimals}f}")
                                      for i in range(count + 1)]
    return lo, hi, [(lo, fmt.num(lo)), (hi, fmt.num(hi))]


def _chart(name: str, good: List[Tuple[int, float]], bad: List[Tuple[int, float]], direction: str) -> Dict[str, Any]:
    width, left, right, row_h, top = 1080, 56, 24, 44, 8
    everything = [v for _, v in good + bad]
    lo_tick, hi_tick, tick_values = _axis(*_padded(min(everything), max(everything)))
    # Halves: the span of -1e308 .. 1e308 is beyond the largest float, its half is not.
    half_span = hi_tick / 2 - lo_tick / 2

    def x(value: float) -> float:
        return round(left + (value / 2 - lo_tick / 2) / half_span * (width - left - right), 1)

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
    ticks = [{"x": x(value), "label": label} for value, label in tick_values]
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
