"""Where the time went, as text lines and as an inline SVG bar chart: the profiler traces' per-step comparison
(verdict.mechanism.trace, analysis/runs/trace_diff.py) formatted, never recomputed. Text and HTML show the same rows."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from envsnap import format as fmt
from envsnap.model.result_types import DiffResult

MAX_ROWS = 8  # kernel / operator families listed
BAR_WIDTH = 420  # SVG units of the longest bar
ROW_HEIGHT = 30
LABEL_WIDTH = 170
VALUE_WIDTH = 150


def trace_of(result: DiffResult) -> Optional[Dict[str, Any]]:
    return result["verdict"]["mechanism"].get("trace")


def heading(trace: Dict[str, Any]) -> str:
    steps = trace.get("steps") or {}
    good, bad = steps.get("good") or {}, steps.get("bad") or {}

    def runs(n: Any) -> str:
        return f"{n} run" + ("" if n == 1 else "s")

    return (f"per step of one rank (steps from {good.get('source', '?')}; GOOD "
            f"{good.get('count', '?')} steps in {runs(good.get('runs', '?'))}, BAD {bad.get('count', '?')} in "
            f"{runs(bad.get('runs', '?'))})")


def component_rows(trace: Dict[str, Any]) -> List[Dict[str, Any]]:
    rows = []
    for row in trace.get("components") or []:
        if not (row.get("good_ms") or row.get("bad_ms")):
            continue
        rows.append({"label": str(row.get("label", row.get("name", ""))), "good": fmt.ms(row.get("good_ms")),
                     "bad": fmt.ms(row.get("bad_ms")), "change": fmt.signed_ms(row.get("change_ms")),
                     "moved": bool(row.get("moved")), "good_ms": float(row.get("good_ms") or 0.0),
                     "bad_ms": float(row.get("bad_ms") or 0.0)})
    return rows


def family_rows(trace: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The kernel families that moved most (operator families for a CPU-only trace)."""
    table = trace.get("kernels") or trace.get("cpu_ops") or []
    out = []
    for row in table[:MAX_ROWS]:
        out.append({"family": str(row.get("family", "")), "component": str(row.get("component", "")),
                    "good": fmt.ms(row.get("good_ms")), "bad": fmt.ms(row.get("bad_ms")),
                    "change": fmt.signed_ms(row.get("change_ms")),
                    "counts": f"{fmt.count(row.get('good_count'))} \u2192 {fmt.count(row.get('bad_count'))}",
                    "moved": bool(row.get("moved") and row.get("material"))})
    return out


def extra_lines(trace: Dict[str, Any]) -> List[str]:
    lines = []
    for rep in trace.get("replaced") or []:
        lines.append(f"replaced: {rep.get('from')} \u2192 {rep.get('to')} ({fmt.ms(rep.get('good_ms'))} \u2192 "
                     f"{fmt.ms(rep.get('bad_ms'))} per step)")
    for key, word in (("appeared", "appeared"), ("vanished", "vanished")):
        replaced = {r.get("to") for r in trace.get("replaced") or []} | {r.get("from") for r in trace.get("replaced") or []}
        names = [r.get("family") for r in trace.get(key) or [] if r.get("family") not in replaced]
        if names:
            lines.append(f"{word}: {', '.join(str(n) for n in names)}")
    launches = {kind: v for kind, v in (trace.get("launches") or {}).items() if v.get("good") or v.get("bad")}
    if launches:
        lines.append("launches per step: " + ", ".join(
            f"{kind} {fmt.count(v.get('good'))} \u2192 {fmt.count(v.get('bad'))}" for kind, v in sorted(launches.items())))
    idle = trace.get("gpu_idle_ms")
    if isinstance(idle, dict):
        lines.append(f"GPU idle per step: {fmt.ms(idle.get('good'))} \u2192 {fmt.ms(idle.get('bad'))}")
    lines.extend(f"note: {note}" for note in trace.get("notes") or [])
    return lines


def text_lines(result: DiffResult) -> List[str]:
    """The section of `envsnap diff`'s text output (nothing without traces)."""
    trace = trace_of(result)
    if trace is None:
        return []
    lines = ["", "where the time went, " + heading(trace) + ":"]
    rows = component_rows(trace)
    if rows:
        width = max(len(r["label"]) for r in rows)
        lines.append(f"  {'component':<{width}}  {'GOOD':>9}  {'BAD':>9}  {'change':>10}")
        for r in rows:
            lines.append(f"  {r['label']:<{width}}  {r['good']:>9}  {r['bad']:>9}  {r['change']:>10}"
                         + ("  moved" if r["moved"] else ""))
    families = family_rows(trace)
    if families:
        lines.append("  families that moved most (per step: time GOOD \u2192 BAD, change, count):")
        for f in families:
            lines.append(f"    {f['family']} ({f['component']}): {f['good']} \u2192 {f['bad']} ({f['change']}), "
                         f"count {f['counts']}" + ("  moved" if f["moved"] else ""))
    lines.extend(f"  {line}" for line in extra_lines(trace))
    return lines


def svg_view(trace: Dict[str, Any]) -> Dict[str, Any]:
    """Coordinates of the per-step bar chart: one GOOD and one BAD bar per component, to one scale."""
    rows = component_rows(trace)
    top = max([max(r["good_ms"], r["bad_ms"]) for r in rows] or [0.0]) or 1.0
    bars = []
    for i, r in enumerate(rows):
        y = 10 + i * (2 * ROW_HEIGHT // 2 + ROW_HEIGHT)
        bars.append(dict(r, y=y, good_w=max(1, round(r["good_ms"] / top * BAR_WIDTH)),
                         bad_w=max(1, round(r["bad_ms"] / top * BAR_WIDTH)),
                         label_y=y + ROW_HEIGHT // 2 + 4, good_y=y, bad_y=y + ROW_HEIGHT // 2))
    height = 20 + len(rows) * (2 * ROW_HEIGHT // 2 + ROW_HEIGHT)
    return {"bars": bars, "height": height, "width": LABEL_WIDTH + BAR_WIDTH + VALUE_WIDTH, "x0": LABEL_WIDTH,
            "bar_h": ROW_HEIGHT // 2 - 2, "value_x": LABEL_WIDTH + BAR_WIDTH + 8}


def html_view(result: DiffResult) -> Optional[Dict[str, Any]]:
    trace = trace_of(result)
    if trace is None:
        return None
    return {"heading": heading(trace), "line": str(trace.get("line", "")), "svg": svg_view(trace),
            "rows": component_rows(trace), "families": family_rows(trace), "extra": extra_lines(trace),
            "family_word": "Kernel families" if trace.get("kernels") else "Operator families"}
