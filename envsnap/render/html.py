"""The HTML forensic report: a diff/rank result and its two snapshots as one self-contained file.

render_report() turns the inputs into a plain "view" (dicts and lists of display strings, long
tables already capped) and renders templates/report.html.j2 with jinja2, autoescape on. Every
value that came from a snapshot reaches the page only as escaped text: no snapshot value is ever
used as a URL, an id, a class name or script. The page fetches nothing (inline CSS, inline SVG,
one inline script allowed by a Content-Security-Policy hash) and reads fine with JavaScript off.

Long tables are capped (ROWS_SHOWN visible, up to ROWS_MORE more inside a closed <details>, the
rest counted): two big snapshots stay a few MB at most and render in well under a second.

Over 400 lines on purpose: one small view builder per part of the page (verdict, causes, patches, runs,
workers, code, hardware), each only formatting the analysis result; together they are the page's one
vocabulary (CSS classes, caps on rows).
"""
from __future__ import annotations

import base64
import hashlib
import math
import os
import re
from collections import Counter
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from envsnap import __version__, format as fmt
from envsnap.analysis.compare.diff import value_text
from envsnap.analysis.compare.views import category_key
from envsnap.analysis.runs import stats
from envsnap.analysis.runs.verdict import mechanism_line
from envsnap.errors import EnvsnapError
from envsnap.model.snapshot import as_dict
from envsnap.render import trace_view

if TYPE_CHECKING:  # jinja2 is imported where a report is written, not when the module loads
    import jinja2

ROWS_SHOWN = 40          # rows of a long table shown before "N more"
ROWS_MORE = 400          # further rows inside the closed "N more" <details>; beyond: counted only
MAX_CAUSES_SHOWN = 8
MAX_CAUSES = 100
MAX_CHARTS = 24
CELL_CHARS = 24          # a workers-matrix cell; the full value is in the cell's tooltip
VALUE_CHARS = 300        # a value in a table
TOOLTIP_CHARS = 600



# ---------------------------------------------------------------- formatting (envsnap/format.py)

fmt_num = fmt.num
fmt_pct = fmt.pct
short_hash = fmt.short_hash
_natural_key = fmt.natural_key
_cut = fmt.cut


def fmt_value(value: Any, limit: int = VALUE_CHARS) -> str:
    return fmt.value(value, limit)



def _list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def _capped(rows: List[Any], row_format: Optional[Callable[[Any], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Split a long list for display: shown, more (closed details), hidden count.

    `row_format` turns a raw item into a display row; it runs only on the rows that are displayed,
    so a 20,000-entry table costs what its 440 displayed rows cost.
    """
    shape = row_format or (lambda row: row)
    return {
        "shown": [shape(r) for r in rows[:ROWS_SHOWN]],
        "more": [shape(r) for r in rows[ROWS_SHOWN:ROWS_SHOWN + ROWS_MORE]],
        "hidden": max(0, len(rows) - ROWS_SHOWN - ROWS_MORE),
        "total": len(rows),
    }


# ---------------------------------------------------------------- 1. verdict

def _stats(raw: Any) -> Dict[str, Any]:
    raw = as_dict(raw)
    values = [v for v in _list(raw.get("values")) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {
        "median": fmt_num(raw.get("median")), "spread": fmt_num(raw.get("spread")),
        "n": raw.get("n", len(values)) if raw else 0, "min": fmt_num(raw.get("min")),
        "max": fmt_num(raw.get("max")), "present": bool(raw),
    }


# Outcomes (analysis/runs/verdict.py) as the words and colour classes of the page.
_OUTCOME_WORDS = {"worse": "worse", "better": "better", "possibly_worse": "possibly worse",
                  "possibly_better": "possibly better", "no_change": "no change", "changed": "changed",
                  "unknown": "no comparable measurements"}


def _metric_view(name: str, raw: Dict[str, Any]) -> Dict[str, Any]:
    p_value = raw.get("p_value")
    outcome = str(raw.get("outcome")) if raw.get("outcome") in _OUTCOME_WORDS else "unknown"
    return {
        "name": name, "direction": raw.get("direction") or "",
        "direction_text": fmt.direction(str(raw.get("direction") or "")), "good": _stats(raw.get("good")),
        "bad": _stats(raw.get("bad")),
        "change": fmt_value(raw["change_text"], 40) if isinstance(raw.get("change_text"), str)
        else fmt_pct(raw.get("change_pct")),
        "beyond_noise": bool(raw.get("beyond_noise")), "significant": bool(raw.get("significant")),
        "noise": "beyond noise" if raw.get("beyond_noise") else "within noise",
        "p_value": "—" if not isinstance(p_value, (int, float)) or isinstance(p_value, bool) else f"{p_value:.3g}",
        "method": raw.get("method") or "", "outcome": outcome, "word": _OUTCOME_WORDS[outcome],
        "css": outcome.replace("_", "-"),
    }


def _decomposition_part(raw: Any) -> Optional[Dict[str, Any]]:
    raw = as_dict(raw)
    if not raw:
        return None

    def median_of(value: Any) -> str:
        return fmt_num(value.get("median")) if isinstance(value, dict) else fmt_num(value)

    return {"metric": raw.get("metric") or "", "good": median_of(raw.get("good")), "bad": median_of(raw.get("bad")),
            "change": fmt_pct(raw.get("change_pct")), "holds": bool(raw.get("holds")),
            "formula": raw.get("formula") or ""}


def _verdict_view(result: Dict[str, Any]) -> Dict[str, Any]:
    verdict = as_dict(result.get("verdict"))
    name = verdict.get("metric")
    main = _metric_view(name, verdict) if name else None
    others = []
    for other, raw in sorted(as_dict(verdict.get("metrics")).items(), key=lambda kv: _natural_key(kv[0])):
        if other != name and isinstance(raw, dict):
            others.append(_metric_view(other, raw))
    decomposition = None
    raw_dec = verdict.get("decomposition")
    if isinstance(raw_dec, dict):
        decomposition = {
            "accept_length": _decomposition_part(raw_dec.get("accept_length")),
            "cycle_time": _decomposition_part(raw_dec.get("cycle_time")),
            "side": raw_dec.get("side") or "unclear",
            "explanation": raw_dec.get("explanation") or "",
        }
    return {"metric": main, "others": others, "decomposition": decomposition,
            "mechanism": mechanism_line(verdict), "trace": trace_view.html_view(result),
            "summary": verdict.get("summary") or "", "headline": verdict.get("headline") or "",
            "noise": verdict.get("noise") or "", "too_few_runs": verdict.get("too_few_runs") or "",
            "outcome": main["css"] if main else "unknown"}


# ---------------------------------------------------------------- 2. causes

def _group_notes(result: Dict[str, Any], causes: List[Dict[str, Any]]) -> None:
    """The note of each group of causes that cannot be told apart, on its last cause shown in a list
    (the bisect command on the first group only: it is the same command for every group)."""
    groups = {g.get("rank"): g for g in _list(result.get("groups")) if isinstance(g, dict)}
    told = False
    for index, cause in enumerate(causes):
        group = groups.get(cause["rank"])
        last = index + 1 == len(causes) or causes[index + 1]["rank"] != cause["rank"]
        if not group or not last:
            continue
        shown = sum(1 for c in causes if c["rank"] == cause["rank"])
        hidden = f", {group.get('size', shown) - shown} of them not shown" if shown < group.get("size", shown) else ""
        cause["group_note"] = fmt_value(f"{group.get('line', '')}{hidden}", 500)
        if group.get("bisect_line") and not told:
            cause["bisect_line"] = fmt_value(group["bisect_line"], 800)
            told = True


def _anchor_ids(causes: List[Dict[str, Any]]) -> None:
    """Each cause's `anchor`, unique in the report: `cause-N` for the first cause of rank N (so a link
    to a rank lands on it), `cause-N-2`, `cause-N-3`... for the causes tied with it."""
    taken: Dict[str, int] = {}
    for cause in causes:
        rank = cause["rank"]
        if not isinstance(rank, int) or isinstance(rank, bool):
            cause["anchor"] = ""
            continue
        base = f"cause-{rank}"
        taken[base] = taken.get(base, 0) + 1
        cause["anchor"] = base if taken[base] == 1 else f"{base}-{taken[base]}"


def _causes_view(result: Dict[str, Any]) -> Dict[str, Any]:
    causes = []
    for index, raw in enumerate(_list(result.get("causes"))[:MAX_CAUSES]):
        if not isinstance(raw, dict):
            continue
        score = raw.get("score")
        score = float(score) if isinstance(score, (int, float)) and not isinstance(score, bool) else 0.0
        score = min(1.0, max(0.0, score if math.isfinite(score) else 0.0))
        causes.append({
            "rank": raw.get("rank", index + 1), "key": fmt_value(raw.get("key"), 200),
            "category": fmt_value(raw.get("category"), 40), "component": fmt_value(raw.get("component"), 40),
            "score": f"{score:.2f}", "score_pct": int(round(score * 100)),
            "good": fmt_value(raw.get("good")), "bad": fmt_value(raw.get("bad")),
            "good_absent": _missing_words(raw, "good"), "bad_absent": _missing_words(raw, "bad"),
            "why": fmt_value(raw.get("why"), 500) if raw.get("why") else "",
            "evidence": [fmt_value(e, 500) for e in _list(raw.get("evidence"))[:20]],
            "patches": [p for p in _list(raw.get("patches")) if isinstance(p, str) and _PATCH_ID.fullmatch(p)],
            "tied": bool(raw.get("tied")), "group_note": "", "bisect_line": "",
        })
    _anchor_ids(causes)
    _group_notes(result, causes[:MAX_CAUSES_SHOWN])
    _group_notes(result, causes[MAX_CAUSES_SHOWN:])
    total = len(_list(result.get("causes")))
    return {"shown": causes[:MAX_CAUSES_SHOWN], "more": causes[MAX_CAUSES_SHOWN:],
            "hidden": max(0, total - MAX_CAUSES), "total": total}


# ---------------------------------------------------------------- 2b. patches

_PATCH_ID = re.compile(r"patch-[0-9]{1,6}")  # ids become anchors: only envsnap's own form is used
HUNK_SHOWN = 40  # lines of a hunk shown before the rest folds into a closed <details>
CONTENT_SHOWN = 400  # lines of a file shown whole (no diff) before the rest is counted only


def _diff_line_class(line: str) -> str:
    if line.startswith(("diff --git ", "index ", "--- ", "+++ ", "new file mode", "deleted file mode", "similarity ",
                        "rename ", "old mode", "new mode", "Binary files")):
        return "meta"
    return {"+": "add", "-": "del", "@": "hunk", "\\": "meta"}.get(line[:1], "ctx")


def _hunks(diff: str) -> List[Dict[str, Any]]:
    """A diff as blocks: the file headers, then each hunk; a long hunk's tail folds."""
    blocks: List[Dict[str, Any]] = []
    for line in diff.rstrip("\n").split("\n"):
        cls = _diff_line_class(line)
        if cls == "hunk" or not blocks or (cls == "meta" and line.startswith("diff --git ")):
            blocks.append({"lines": []})
        blocks[-1]["lines"].append({"cls": cls, "text": line})
    for block in blocks:
        lines = block.pop("lines")
        block["shown"], block["folded"] = lines[:HUNK_SHOWN], lines[HUNK_SHOWN:]
    return blocks


def _patches_view(result: Dict[str, Any], causes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The Patches section: each changed file's diff, linked to and from the causes it supports
    (`causes`: those the report shows, with their anchors; one it does not show is named, unlinked)."""
    ranks = {c.get("key"): c.get("rank") for c in _list(result.get("causes")) if isinstance(c, dict)}
    anchors = {c["key"]: c["anchor"] for c in causes if c["anchor"]}
    patches = []
    for raw in _list(result.get("patches")):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not _PATCH_ID.fullmatch(raw["id"]):
            continue
        supports = []
        for key in _list(raw.get("causes")):
            rank = ranks.get(key)
            shown = fmt_value(key, 200)
            supports.append({"key": shown, "anchor": anchors.get(shown, ""),
                             "rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else None})
        diff = raw.get("diff") if isinstance(raw.get("diff"), str) else None
        content = raw.get("content") if isinstance(raw.get("content"), str) else None
        content_lines = content.rstrip("\n").split("\n") if content is not None else []
        patches.append({
            "id": raw["id"], "kind": fmt_value(raw.get("kind"), 20), "title": fmt_value(raw.get("title"), 300),
            "basis": fmt_value(raw.get("basis"), 600), "note": fmt_value(raw.get("note"), 600) if raw.get("note") else "",
            "good_sha": short_hash(raw.get("good_sha256")) if raw.get("good_sha256") else "—",
            "bad_sha": short_hash(raw.get("bad_sha256")) if raw.get("bad_sha256") else "—",
            "counts": (fmt_value(raw.get("shows"), 120) if isinstance(raw.get("shows"), str) and not diff
                       else f"−{raw.get('removed', 0)} +{raw.get('added', 0)}" if diff else "no diff"),
            "truncated": bool(raw.get("truncated")), "redacted": bool(raw.get("redacted")),
            "hunks": _hunks(diff) if diff else [],
            "content": content_lines[:CONTENT_SHOWN], "content_total": len(content_lines),
            "supports": supports,
        })
    return {"patches": patches, "total": len(patches)}


def _patch_status_view(result: Dict[str, Any], causes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The recorded patches (--patch): each patch's hunks with their status on GOOD and BAD; a hunk
    whose status differs is marked, linked to its cause (`causes`: those the report shows, with their
    anchors), and shows its text."""
    anchors = {c["key"]: c["anchor"] for c in causes if c["anchor"]}
    patches = []
    for raw in _list(result.get("patch_status"))[:ROWS_MORE]:
        if not isinstance(raw, dict):
            continue
        sides = {}
        for side in ("good", "bad"):
            info = as_dict(raw.get(side))
            target = as_dict(info.get("target"))
            where = ""
            if target.get("root"):
                owner = f" {target.get('dist')} {target.get('version') or ''}".rstrip() if target.get("dist") else ""
                where = f"{target['root']} ({target.get('kind')}{owner}, -p{target.get('strip')})"
            sides[side] = {"given": bool(info), "status": fmt_value(info.get("status"), 60) if info else "not given",
                           "where": fmt_value(where, 300), "note": fmt_value(info.get("error") or info.get("note"), 400)
                           if (info.get("error") or info.get("note")) else ""}
        rows = []
        for hunk in _list(raw.get("hunks"))[:ROWS_MORE]:
            if not isinstance(hunk, dict):
                continue
            rank = hunk.get("rank")
            text = hunk.get("text") if isinstance(hunk.get("text"), str) and hunk.get("changed") else None
            rows.append({"n": fmt_value(hunk.get("n"), 10), "file": fmt_value(hunk.get("file"), 300),
                         "header": fmt_value(hunk.get("header"), 200), "changed": bool(hunk.get("changed")),
                         "good": fmt_value(hunk.get("good"), 40) if hunk.get("good") is not None else "—",
                         "bad": fmt_value(hunk.get("bad"), 40) if hunk.get("bad") is not None else "—",
                         "rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else None,
                         "anchor": anchors.get(fmt_value(hunk.get("key"), 200), ""),
                         "why": "; ".join(f"{s}: {fmt_value(w, 200)}" for s, w in sorted(as_dict(hunk.get("why")).items())),
                         "hunks": _hunks(text) if text else []})
        if sides["good"]["where"] == sides["bad"]["where"] and not sides["good"]["note"]:
            sides["good"]["where"] = ""  # one target line for both sides
        patches.append({"name": fmt_value(raw.get("name"), 300), "good": sides["good"], "bad": sides["bad"],
                        "rows": rows, "changed": sum(1 for r in rows if r["changed"])})
    return {"patches": patches, "total": len(patches)}


# ---------------------------------------------------------------- 3. runs chart

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
            dots.append({"x": x(value), "y": round(y_mid + jitter, 1), "label": f"{side} run {run_no}: {fmt_num(value)}"})
        median = stats.median([v for _, v in points]) if points else None
        rows.append({"side": side, "y_mid": y_mid, "y0": y_mid - row_h / 2 + 4, "y1": y_mid + row_h / 2 - 4,
                     "dots": dots, "n": len(points),
                     "median_x": x(median) if median is not None else None, "median": fmt_num(median)})
    ticks = []
    count = int(round(span / step))
    decimals = _step_decimals(step)
    for i in range(count + 1):
        value = lo_tick + i * step
        ticks.append({"x": x(value), "label": f"{value:,.{decimals}f}"})
    axis_y = top + 2 * row_h
    return {"name": name, "direction": direction, "direction_text": fmt.direction(direction), "width": width,
            "height": axis_y + 34, "left": left, "right_x": width - right, "axis_y": axis_y, "ticks": ticks, "rows": rows}


def _charts_view(result: Dict[str, Any]) -> Dict[str, Any]:
    runs = as_dict(as_dict(result.get("tables")).get("runs"))
    good, bad = as_dict(runs.get("good")), as_dict(runs.get("bad"))
    good_values = {str(k): [(int(i), float(v)) for i, v in _list(p)] for k, p in as_dict(good.get("metrics")).items()}
    bad_values = {str(k): [(int(i), float(v)) for i, v in _list(p)] for k, p in as_dict(bad.get("metrics")).items()}
    verdict = as_dict(result.get("verdict"))
    main = verdict.get("metric")
    decomposition = as_dict(verdict.get("decomposition"))
    first = [main] + [as_dict(decomposition.get(p)).get("metric") for p in ("accept_length", "cycle_time")]
    names = sorted(set(good_values) | set(bad_values),
                   key=lambda n: (n not in first, first.index(n) if n in first else 0, _natural_key(n)))
    directions = {n: as_dict(as_dict(verdict.get("metrics")).get(n)).get("direction") for n in names}
    charts = [_chart(n, good_values.get(n, []), bad_values.get(n, []), directions.get(n) or "")
              for n in names[:MAX_CHARTS]]
    # The verdict's metric and the EAGLE-3 ones are shown; the other metrics wait in a closed <details>.
    lead = sum(1 for c in charts if c["name"] in first) or min(1, len(charts))
    return {"charts": charts[:lead], "more_charts": charts[lead:], "omitted": names[MAX_CHARTS:],
            "good_failed": good.get("failed", 0), "bad_failed": bad.get("failed", 0),
            "good_runs": good.get("total", 0), "bad_runs": bad.get("total", 0)}


# ---------------------------------------------------------------- 4. workers matrix

def _neighbours_view(result: Dict[str, Any], causes: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The other processes beside the work, per process, as analysis/compare/neighbours.py worded them: the
    causes first (linked to their rank), then the busiest of the rest."""
    found = result.get("neighbours")
    if not isinstance(found, dict):
        return None
    # By the raw keys (a view's key is clipped for display): the view's causes are the raw ones, in order.
    raw_causes = [c for c in _list(result.get("causes")) if isinstance(c, dict)]
    anchors = {raw.get("key"): view.get("anchor") for raw, view in zip(raw_causes, causes)}
    ranks = {c.get("key"): (c.get("rank"), anchors.get(c.get("key")) or None) for c in raw_causes}
    raw = list(_list(found.get("processes"))) + list(_list(found.get("gpu")))
    if isinstance(found.get("steal"), dict):
        raw.append(found["steal"])
    rows = []
    for row in raw:
        if not isinstance(row, dict):
            continue
        rank, anchor = ranks.get(row.get("key"), (None, None))
        where = f"GPU {row.get('gpu')}: " if row.get("kind") == "gpu" else ""
        rows.append({"command": fmt_value(f"{where}{row.get('command')}", 200), "good": fmt_value(row.get("good_text"), 200),
                     "bad": fmt_value(row.get("bad_text"), 200), "changed": bool(row.get("changed")), "rank": rank,
                     "anchor": anchor})
    rows.sort(key=lambda r: not r["changed"])
    return {"summary": fmt_value(found.get("summary"), 500), "rows": rows[:ROWS_MORE], "more": max(0, len(rows) - ROWS_MORE)}


def _shown(set_: Any, value: Any, limit: int = 120) -> str:
    return fmt_value(value, limit) if set_ else "unset"


def _cell_view(cell: Dict[str, Any], has_parent_column: bool) -> Dict[str, str]:
    """A matrix cell's text, classes and tooltip, from the analysis' flags."""
    if not cell.get("readable"):
        return {"cls": "unreadable", "text": "?", "tip": f"environment {cell.get('status', 'unreadable')}"}
    classes, notes = [], []
    vs_parent = cell.get("vs_parent")
    if isinstance(vs_parent, dict):
        classes.append("vs-parent")
        notes.append(f"parent: {_shown(vs_parent.get('set'), vs_parent.get('value'))}")
    if cell.get("vs_peers"):
        classes.append("vs-peers")
        notes.append("peers disagree")
    in_process = cell.get("in_process")
    if isinstance(in_process, dict):
        classes.append("in-process")
        notes.append(f"at exec: {_shown(in_process.get('set'), in_process.get('value'))}; changed inside the process")
    full = _shown(cell.get("set"), cell.get("value"), TOOLTIP_CHARS)
    if not cell.get("set"):
        text, classes = "unset", classes + ["unset"]
    elif has_parent_column and cell.get("has_parent") and not classes:
        text = "="  # same as the parent: the parent column of this row holds the value
        classes.append("same")
    else:
        text = _cut(str(cell.get("value")), CELL_CHARS)
    # A tooltip only where it adds something (a cut value, a note): it is most of the size.
    tip = "; ".join([full] + notes) if notes or (text != full and text != "=") else ""
    return {"cls": " ".join(classes), "text": text, "tip": tip}


def _workers_view(result: Dict[str, Any]) -> Dict[str, Any]:
    table = as_dict(as_dict(result.get("tables")).get("workers"))
    rows = [r for r in _list(table.get("rows")) if isinstance(r, dict)]
    views = []
    for side in ("good", "bad"):
        columns = [c for c in _list(as_dict(table.get("columns")).get(side)) if isinstance(c, dict)]
        cells = as_dict(as_dict(table.get("cells")).get(side))
        views.append({
            "side": side,
            "columns": [{"key": fmt_value(c.get("key"), 200),
                         "key_parts": re.findall(r"[^_\-/]+[_\-/]?|[_\-/]", str(c.get("key"))),
                         "title": fmt_value(c.get("title") or "", 200), "kind": c.get("kind"),
                         "status": c.get("status"), "note": fmt_value(c.get("note") or "", 200),
                         "source": c.get("source") or "", "parent": c.get("parent") or "",
                         "readable": bool(c.get("readable"))} for c in columns],
            "cells": {r["name"]: {str(c.get("key")): _cell_view(as_dict(as_dict(cells.get(r["name"])).get(str(c.get("key")))),
                                                                 True)
                                  for c in columns} for r in rows},
        })
    same = [str(n) for n in _list(table.get("same_everywhere"))]
    return {"sides": views, "rows": rows, "same_everywhere": same,
            "has_any": any(v["columns"] for v in views), "shown": len(rows), "total": len(rows) + len(same),
            "differing": table.get("differing", 0)}


def _command_lines_view(result: Dict[str, Any]) -> Dict[str, Any]:
    """Each process's command line (and the benchmark command's), item by item, both sides (tables/flags.py)."""
    table = as_dict(as_dict(result.get("tables")).get("command_lines"))
    groups = []
    for group in _list(table.get("groups")):
        if not isinstance(group, dict):
            continue
        rows = [{"item": fmt_value(r.get("item"), 200), "differs": bool(r.get("differs")),
                 "good": fmt_value(r.get("good"), 300) if group.get("good_seen") else "not captured",
                 "bad": fmt_value(r.get("bad"), 300) if group.get("bad_seen") else "not captured"}
                for r in _list(group.get("rows")) if isinstance(r, dict)]
        groups.append({"key": fmt_value(group.get("key"), 200), "command": group.get("where") == "command",
                       "rows": rows, "differing": group.get("differing", 0)})
    return {"groups": groups, "differing": table.get("differing", 0)}


# ---------------------------------------------------------------- 5. code state

def _state_text(state: Any) -> str:
    state = as_dict(state)
    name = state.get("state") or "—"
    if name == "modified":
        return short_hash(state.get("sha256"))
    if name in ("as recorded", "clean", "missing", "not captured"):
        return "matches RECORD" if name == "as recorded" else name
    return f"{name} {short_hash(state.get('sha256'))}".strip() if state.get("sha256") else str(name)


def _git_state_text(state: Any) -> str:
    """A checkout file's state as the analysis words it ("modified", "untracked", "clean", "absent"), with its hash."""
    state = as_dict(state)
    name = fmt_value(state.get("state") or "—", 40)
    return f"{name} {short_hash(state.get('sha256'))}" if state.get("sha256") else name


def _capped_rows(table: Dict[str, Any], row: Callable[[Dict[str, Any]], Dict[str, Any]]) -> Dict[str, Any]:
    """The analysis' capped table as the template's shown / more / hidden split."""
    rows = [r for r in _list(table.get("rows")) if isinstance(r, dict)]
    capped = _capped(rows, row)
    capped["hidden"] += int(table.get("same_not_listed") or 0)
    capped["total"] = int(table.get("total") or len(rows))
    return capped


def _integrity_view(table: Dict[str, Any]) -> Dict[str, Any]:
    def row(raw: Dict[str, Any]) -> Dict[str, Any]:
        g, b = as_dict(raw.get("good")), as_dict(raw.get("bad"))
        return {"path": fmt_value(raw.get("path"), 200), "dist": fmt_value(raw.get("dist") or "", 60),
                "recorded": short_hash(raw.get("recorded_sha256")) if raw.get("recorded_sha256") else "—",
                "good": _state_text(g), "bad": _state_text(b),
                "good_state": "ok" if g.get("state") == "as recorded" else g.get("state"),
                "bad_state": "ok" if b.get("state") == "as recorded" else b.get("state"),
                "differs": bool(raw.get("differs"))}

    summary = {side: {k: fmt_value(v) if k in ("mode", "checked") else v
                      for k, v in as_dict(as_dict(table.get("summary")).get(side)).items()} for side in ("good", "bad")}
    return {"rows": _capped_rows(table, row), "summary": summary, "present": bool(table.get("present"))}


def _package_text(facts: Any) -> str:
    facts = as_dict(facts)
    text = fmt_value(facts.get("version"), 60)
    if facts.get("build"):  # another build of the same version on the other side
        text += f" [{fmt_value(facts['build'], 120)}]"
    if facts.get("origin") and facts.get("origin") != "index":
        text += f" ({facts['origin']}" + (f" {short_hash(facts.get('commit'))}" if facts.get("commit") else "") + ")"
    return text


def _packages_view(table: Dict[str, Any]) -> Dict[str, Any]:
    rows = [{"name": fmt_value(r.get("name"), 120), "good": _package_text(r.get("good")) if r.get("good") else "—",
             "bad": _package_text(r.get("bad")) if r.get("bad") else "—",
             "good_absent": "not installed" if r.get("good") is None else False,
             "bad_absent": "not installed" if r.get("bad") is None else False}
            for r in _list(table.get("rows")) if isinstance(r, dict)]
    return {"rows": _capped(rows), "good_count": table.get("good_count", 0), "bad_count": table.get("bad_count", 0)}


def _hooks_view(rows: List[Any]) -> List[Dict[str, Any]]:
    def describe(hook: Any) -> Optional[Dict[str, str]]:
        if not isinstance(hook, dict):
            return None
        mentions = ", ".join(str(m) for m in _list(hook.get("env_mentions"))[:20])
        return {"sha": short_hash(hook.get("sha256")), "size": fmt_value(hook.get("size")),
                "env": ("sets environment" + (f": {mentions}" if mentions else "")) if hook.get("touches_env") else "",
                "imports": fmt_value("; ".join(str(i) for i in _list(hook.get("import_lines"))[:5]), 200)}

    return [{"path": fmt_value(r.get("path"), 200), "kind": fmt_value(r.get("kind") or "", 30),
             "good": describe(r.get("good")), "bad": describe(r.get("bad")), "differs": bool(r.get("differs"))}
            for r in rows if isinstance(r, dict)]


_GIT_LABELS = {"roles": "Roles", "branch": "Branch", "head": "Commit", "upstream": "Upstream",
               "dirty_files": "Dirty files", "untracked_files": "Untracked", "stash": "Stash", "errors": "Errors"}


def _git_fact_text(name: str, value: Any, captured: bool) -> str:
    if not captured:
        return "not captured"
    if name == "roles":
        return ", ".join(str(r) for r in _list(value)) or "—"
    if name == "branch":
        return fmt_value(value, 200) if value else "(detached)"
    if name == "head":
        return short_hash(value) if value else "—"
    if name == "upstream":
        up = as_dict(value)
        return fmt_value(f"{up.get('name')} ahead {up.get('ahead', 0)} behind {up.get('behind', 0)}", 200) if up else "—"
    if name == "stash":
        return "; ".join(f"{as_dict(e).get('name')} {fmt_value(as_dict(e).get('message'), 120)}" for e in _list(value)) or "—"
    if name == "errors":
        return "; ".join(f"{k}: {fmt_value(v, 120)}" for k, v in sorted(as_dict(value).items())) or "—"
    return str(value)


def _git_view(repos: List[Any]) -> List[Dict[str, Any]]:
    out = []
    for repo in (r for r in repos if isinstance(r, dict)):
        good_captured, bad_captured = bool(repo.get("good_captured")), bool(repo.get("bad_captured"))
        rows = [{"label": _GIT_LABELS.get(str(f.get("fact")), str(f.get("fact"))),
                 "good": _git_fact_text(str(f.get("fact")), f.get("good"), good_captured),
                 "bad": _git_fact_text(str(f.get("fact")), f.get("bad"), bad_captured), "differs": bool(f.get("differs"))}
                for f in _list(repo.get("facts")) if isinstance(f, dict)]

        def file_row(raw: Dict[str, Any]) -> Dict[str, Any]:
            return {"path": fmt_value(raw.get("path"), 200), "good": _git_state_text(raw.get("good")),
                    "bad": _git_state_text(raw.get("bad")), "differs": bool(raw.get("differs"))}

        out.append({"path": fmt_value(repo.get("path"), 200), "rows": rows,
                    "files": _capped_rows(as_dict(repo.get("files")), file_row),
                    "good_absent": not good_captured, "bad_absent": not bad_captured, "differs": bool(repo.get("differs"))})
    return out


def _files_view(table: Dict[str, Any]) -> Dict[str, Any]:
    def describe(entry: Any) -> str:
        if not isinstance(entry, dict):
            return "—"
        if entry.get("error"):
            return "error: " + fmt_value(entry.get("error"), 120)
        return f"{short_hash(entry.get('sha256'))} ({fmt_value(entry.get('size'))} B)"

    def row(raw: Dict[str, Any]) -> Dict[str, Any]:
        return {"path": fmt_value(raw.get("path"), 200), "good": describe(raw.get("good")),
                "bad": describe(raw.get("bad")), "differs": bool(raw.get("differs"))}

    return {"rows": _capped_rows(table, row), "differing": table.get("differing", 0)}


def _code_view(tables: Dict[str, Any]) -> Dict[str, Any]:
    code = as_dict(tables.get("code"))
    return {
        "integrity": _integrity_view(as_dict(code.get("integrity"))),
        "packages": _packages_view(as_dict(code.get("packages"))),
        "hooks": _hooks_view(_list(code.get("hooks"))),
        "git": _git_view(_list(code.get("git"))),
        "files": _files_view(as_dict(code.get("files"))),
    }


# ---------------------------------------------------------------- 6. GPU and host

def _side_text(value: Any, key: str = "") -> str:
    if key.endswith("_bytes") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{fmt.size(value)} ({value})"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(fmt_value(v, 80) for v in value) if value else "(none)"
    return fmt_value(value)


def _cmp_rows(rows: List[Any]) -> Dict[str, Any]:
    """Compare rows of the analysis as the template's main (differing or pinned) and same lists."""
    main: List[Dict[str, Any]] = []
    same: List[Dict[str, Any]] = []
    for raw in (r for r in rows if isinstance(r, dict)):
        label = str(raw.get("label"))
        row = {"label": label, "good": _side_text(raw.get("good"), label) if raw.get("good_set") else "—",
               "bad": _side_text(raw.get("bad"), label) if raw.get("bad_set") else "—",
               "differs": bool(raw.get("differs")), "good_absent": not raw.get("good_set"),
               "bad_absent": not raw.get("bad_set")}
        (main if raw.get("differs") or raw.get("pinned") else same).append(row)
    return {"main": main, "same": same, "differs": sum(1 for r in main if r["differs"])}


def _status_text(status: Any) -> str:
    status = as_dict(status)
    reason = status.get("reason")
    return f"{status.get('status')}: {fmt_value(reason, 160)}" if reason else str(status.get("status") or "?")


def _gpu_host_view(tables: Dict[str, Any]) -> Dict[str, Any]:
    hw = as_dict(tables.get("hardware"))
    gpus = as_dict(hw.get("gpus"))
    rows: List[Dict[str, Any]] = []
    same: List[Dict[str, Any]] = []
    for raw in (r for r in _list(gpus.get("rows")) if isinstance(r, dict)):
        attr = str(raw.get("attribute"))
        cells = []
        for cell in (c for c in _list(raw.get("cells")) if isinstance(c, dict)):
            g = _side_text(cell.get("good"), attr) if cell.get("good_set") else "—"
            b = _side_text(cell.get("bad"), attr) if cell.get("bad_set") else "—"
            cells.append({"same": True, "text": g} if cell.get("same") else {"same": False, "good": g, "bad": b})
        row = {"label": attr, "cells": cells, "differs": bool(raw.get("differs")), "volatile": bool(raw.get("at_capture"))}
        (rows if raw.get("changed") or raw.get("pinned") else same).append(row)
    topology = None
    topo = hw.get("topology")
    if isinstance(topo, dict):
        names = [str(n) for n in _list(topo.get("names"))]
        differs = _list(topo.get("differs"))
        sides = []
        for side in ("good", "bad"):
            matrix = _list(topo.get(side))
            side_rows = []
            for i, name in enumerate(names):
                values = _list(matrix[i]) if i < len(matrix) else []
                cells = []
                for j, col in enumerate(names):
                    value = values[j] if j < len(values) else None
                    text = "X" if name == col and value is None else (fmt_value(value, 12) if value is not None else "")
                    cells.append({"text": text, "differs": bool(_list(differs[i])[j]) if i < len(differs) else False})
                side_rows.append({"name": name, "cells": cells})
            sides.append({"side": side, "rows": side_rows, "present": bool(topo.get(f"{side}_present"))})
        topology = {"names": names, "sides": sides, "differing": topo.get("differing", 0)}
    status = as_dict(hw.get("status"))
    return {"overview": _cmp_rows(_list(hw.get("overview"))),
            "gpu_indices": [str(i) for i in _list(gpus.get("indices"))], "gpu_rows": rows, "gpu_same": same,
            "topology": topology, "host": _cmp_rows(_list(hw.get("host"))),
            "nvidia_status": tuple(_status_text(as_dict(status.get("nvidia")).get(s)) for s in ("good", "bad")),
            "host_status": tuple(_status_text(as_dict(status.get("host")).get(s)) for s in ("good", "bad"))}


# ---------------------------------------------------------------- 7. differences, provenance

def _differences_view(result: Dict[str, Any]) -> Dict[str, Any]:
    groups: Dict[str, List[Dict[str, Any]]] = {}
    volatile: List[Dict[str, Any]] = []
    for raw in _list(result.get("differences")):
        if not isinstance(raw, dict):
            continue
        if raw.get("volatile"):
            volatile.append(raw)
        else:
            groups.setdefault(str(raw.get("category") or "other"), []).append(raw)

    def row(raw: Dict[str, Any]) -> Dict[str, Any]:
        return {"key": fmt_value(raw.get("key"), 240), "change": _change(raw),
                "good": fmt_value(raw.get("good")), "bad": fmt_value(raw.get("bad")),
                "good_absent": _missing_words(raw, "good"), "bad_absent": _missing_words(raw, "bad")}
    categories = []
    for name in sorted(groups, key=category_key):
        rows = groups[name]
        counts = Counter(_change(r) for r in rows)
        categories.append({"name": fmt_value(name, 60), "rows": _capped(rows, row), "counts": sorted(counts.items())})
    total = sum(len(r) for r in groups.values())
    return {"categories": categories, "volatile": _capped(volatile, row), "total": total, "open": total <= 60}


def _missing_words(raw: Dict[str, Any], side: str) -> Any:
    """False when the side has a value, else the analysis's words for it ("not captured", "clean", ...)."""
    if raw.get(side) is not None:
        return False
    return value_text(str(raw.get("change") or "changed"), side, None, fmt_value(raw.get("absent") or "absent", 40))


def _change(raw: Dict[str, Any]) -> str:
    return fmt_value(raw.get("change") or "changed", 10)


_PROVENANCE_LABELS = {"envsnap_version": "envsnap", "schema_version": "Schema", "redaction": "Redaction",
                      "provenance_kind": "Provenance"}


def _provenance_view(result: Dict[str, Any]) -> Dict[str, Any]:
    tables = as_dict(result.get("tables"))
    prov = as_dict(tables.get("provenance"))
    differing = {_PROVENANCE_LABELS.get(str(k), str(k)) for k in _list(prov.get("differs"))}
    sides = {}
    banners: List[Dict[str, str]] = []
    for side in ("good", "bad"):
        meta, facts = as_dict(result.get(side)), as_dict(prov.get(side))
        nodes = [str(n) for n in _list(facts.get("nodes"))]
        sides[side] = {
            "Label": fmt_value(meta.get("label") or "(no label)", 200),
            "Host": fmt_value(meta.get("host") or "—", 200),
            "Captured": fmt_value(meta.get("created") or "—", 60),
            "File": fmt_value(meta.get("file") or "—", 300),
            "envsnap": fmt_value(facts.get("envsnap_version") or "—", 40),
            "Schema": fmt_value(facts.get("schema_version"), 10),
            "Redaction": fmt_value(facts.get("redaction") or "—", 10),
            "Runs": f"{facts.get('runs', 0)} ({facts.get('failed_runs', 0)} failed)",
            "Nodes": f"{len(nodes)}: {fmt_value(', '.join(nodes), 300)}" if nodes else "single node",
            "Provenance": fmt_value(facts.get("provenance_kind") or "—", 40),
            "Provenance note": fmt_value(facts.get("provenance_note") or "—", 600),
            "Provenance detail": fmt_value(facts.get("provenance_detail"), 600) if facts.get("provenance_detail") else "—",
        }
        if facts.get("provenance_kind") == "illustrative":
            note = fmt_value(facts.get("provenance_note") or "", 600)
            if banners and banners[-1]["note"] == note:
                banners[-1]["side"] = "both"
            else:
                banners.append({"side": side, "note": note})
    # Labels, hosts, times and files always differ: only a difference in how the data was made is marked.
    rows = [{"label": label, "good": sides["good"][label], "bad": sides["bad"][label], "differs": label in differing}
            for label in sides["good"]]
    statuses = [{"label": fmt_value(f"{node}: {r.get('section')}" if node else r.get("section"), 200),
                 "good": _status_text(r.get("good")), "bad": _status_text(r.get("bad")),
                 "differs": bool(r.get("differs"))}
                for node, part in _node_tables(tables) for r in _list(part.get("sections")) if isinstance(r, dict)]
    return {"rows": rows, "sections": statuses, "banners": banners,
            # the header and <title> get a short form; the provenance table has the label in full
            "good_label": _cut(sides["good"]["Label"], 80), "bad_label": _cut(sides["bad"]["Label"], 80),
            "good_host": sides["good"]["Host"], "bad_host": sides["bad"]["Host"],
            "good_created": sides["good"]["Captured"], "bad_created": sides["bad"]["Captured"]}


# ---------------------------------------------------------------- nodes

def _node_tables(tables: Dict[str, Any]) -> List[Tuple[Optional[str], Dict[str, Any]]]:
    """(node, its code/hardware/sections tables): one per node of merged snapshots, else (None, tables)."""
    nodes = [n for n in _list(tables.get("nodes")) if isinstance(n, dict)]
    if not nodes:
        return [(None, tables)]
    return [(str(n.get("node")), n) for n in nodes]


def _node_parts(result: Dict[str, Any]) -> List[Dict[str, Any]]:
    """Code state and GPU/host per node compared (one untitled part for two single-node snapshots)."""
    tables = as_dict(result.get("tables"))
    parts = []
    for node, part in _node_tables(tables):
        title = ""
        if node is not None:
            hosts = {side: part.get(f"{side}_host") for side in ("good", "bad")}
            missing = [side for side, host in hosts.items() if host is None]
            detail = (f"{missing[0]}: no such node, not captured" if missing else
                      f"good {hosts['good']}, bad {hosts['bad']}" if hosts["good"] != hosts["bad"] else "")
            title = f"node {fmt_value(node, 200)}" + (f" ({fmt_value(detail, 300)})" if detail else "")
        parts.append({"node": node, "title": title, "code": _code_view(part), "gpu_host": _gpu_host_view(part)})
    return parts


# ---------------------------------------------------------------- rendering

def _templates_dir() -> str:
    """templates/ beside this module: inside the package, so wheels and source checkouts alike have it."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


@lru_cache(maxsize=1)
def _environment() -> "jinja2.Environment":
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(_templates_dir()),
        autoescape=True,  # every snapshot value is text, whatever it contains
        undefined=jinja2.StrictUndefined,  # a template typo fails the tests instead of vanishing
        trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["num"] = fmt_num
    return env


@lru_cache(maxsize=4)
def _asset(name: str) -> str:
    with open(os.path.join(_templates_dir(), name), encoding="utf-8") as handle:
        return handle.read()


def build_view(result: Dict[str, Any]) -> Dict[str, Any]:
    """Everything the template shows, as display-ready plain data, from the analysis result alone."""
    if not isinstance(result, dict) or not isinstance(result.get("tables"), dict):
        raise EnvsnapError("report: needs the analysis result with its tables (analyze(..., tables=True))")
    causes = _causes_view(result)
    return {
        "provenance": _provenance_view(result),
        "verdict": _verdict_view(result),
        "warnings": [fmt_value(w, 500) for w in _list(result.get("warnings"))[:50]],
        "causes": causes,
        "patches": _patches_view(result, causes["shown"] + causes["more"]),
        "patch_status": _patch_status_view(result, causes["shown"] + causes["more"]),
        "runs": _charts_view(result),
        "neighbours": _neighbours_view(result, causes["shown"] + causes["more"]),
        "workers": _workers_view(result),
        "command_lines": _command_lines_view(result),
        "node_parts": _node_parts(result),
        "differences": _differences_view(result),
        "envsnap_version": __version__,
        "caps": {"shown": ROWS_SHOWN, "more": ROWS_MORE},
    }


def render_report(result: Dict[str, Any]) -> str:
    """The report as one self-contained HTML document (str)."""
    view = build_view(result)
    script = _asset("report.js")
    if "</script" in script.lower():  # would end the inline script early
        raise RuntimeError("report.js must not contain '</script'")
    # The CSP allows exactly this script (by hash), no other script, no fetch of any kind: even a
    # value that slipped past escaping could neither run nor load anything.
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    template = _environment().get_template("report.html.j2")
    page: str = template.render(view=view, css=_asset("report.css"), script=script, script_hash=script_hash)
    return page
