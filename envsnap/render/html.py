"""The HTML forensic report: a diff/rank result and its two snapshots as one self-contained file.

render_report() turns the inputs into a plain "view" (dicts and lists of display strings, long
tables already capped) and renders templates/report.html.j2 with jinja2, autoescape on. Every
value that came from a snapshot reaches the page only as escaped text: no snapshot value is ever
used as a URL, an id, a class name or script. The page fetches nothing (inline CSS, inline SVG,
one inline script allowed by a Content-Security-Policy hash) and reads fine with JavaScript off.

Long tables are capped (ROWS_SHOWN visible, up to ROWS_MORE more inside a closed <details>, the
rest counted): two big snapshots stay a few MB at most and render in well under a second.
"""
from __future__ import annotations

import base64
import hashlib
import json
import math
import os
import re
import statistics
from collections import Counter
from functools import lru_cache
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from envsnap import __version__
from envsnap.analysis import knowledge
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics as metrics_mod

ROWS_SHOWN = 40          # rows of a long table shown before "N more"
ROWS_MORE = 400          # further rows inside the closed "N more" <details>; beyond: counted only
MAX_CAUSES_SHOWN = 8
MAX_CAUSES = 100
MAX_CHARTS = 24
CELL_CHARS = 24          # a workers-matrix cell; the full value is in the cell's tooltip
VALUE_CHARS = 300        # a value in a table
TOOLTIP_CHARS = 600
PERF_ENV_PREFIXES = ("NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "SGLANG_", "NVSHMEM_", "CUBLAS", "CUDNN_")
PERF_ENV_NAMES = ("LD_PRELOAD", "LD_LIBRARY_PATH", "OMP_NUM_THREADS", "PYTHONPATH")

ABSENT = None  # marker: the value does not exist on that side


# ---------------------------------------------------------------- formatting helpers

def fmt_num(value: Any) -> str:
    """A metric value for people: 1,520 / 152.3 / 3.41 / 0.8123."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "—" if value is None else str(value)
    if not math.isfinite(value):
        return str(value)
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 100:
        return f"{value:.1f}"
    if float(value).is_integer():
        return str(int(value))
    if magnitude >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def fmt_pct(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return "—"
    sign = "+" if value > 0 else ("−" if value < 0 else "±")
    return f"{sign}{abs(value):.1f}%"


def fmt_value(value: Any, limit: int = VALUE_CHARS) -> str:
    """Any JSON value as one line of text, cut at `limit` characters (the cut is said)."""
    if value is None:
        text = "—"
    elif isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        text = value
    elif isinstance(value, (int, float)):
        text = repr(value)
    else:
        try:
            text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(value)
    return _cut(text, limit)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… (+{len(text) - limit} chars)"


def short_hash(value: Any) -> str:
    if isinstance(value, str) and re.fullmatch(r"[0-9a-fA-F]{16,}", value):
        return value[:12]
    return fmt_value(value, 40)


def _natural_key(text: str) -> Tuple:
    return tuple(int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", str(text)))


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> List[Any]:
    return value if isinstance(value, list) else []


def _sections(snap: Dict[str, Any]) -> Dict[str, Any]:
    """The snapshot's sections; for a merged multi-node snapshot (empty top level), its first node's."""
    sections = _dict(snap.get("sections"))
    node = _first_node(snap)
    if not sections and node:
        return _dict(_dict(_dict(snap.get("nodes")).get(node)).get("sections"))
    return sections


def _first_node(snap: Dict[str, Any]) -> Optional[str]:
    nodes = _dict(snap.get("nodes"))
    return sorted(nodes)[0] if nodes else None


def _data(sections: Dict[str, Any], name: str) -> Dict[str, Any]:
    return _dict(_dict(sections.get(name)).get("data"))


def _capped(rows: List[Any], fmt: Optional[Callable[[Any], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Split a long list for display: shown, more (closed details), hidden count.

    `fmt` turns a raw item into a display row; it runs only on the rows that are displayed, so a
    20,000-entry table costs what its 440 displayed rows cost.
    """
    fmt = fmt or (lambda row: row)
    return {
        "shown": [fmt(r) for r in rows[:ROWS_SHOWN]],
        "more": [fmt(r) for r in rows[ROWS_SHOWN:ROWS_SHOWN + ROWS_MORE]],
        "hidden": max(0, len(rows) - ROWS_SHOWN - ROWS_MORE),
        "total": len(rows),
    }


def _flat(obj: Any, prefix: str = "") -> Dict[str, Any]:
    """Flatten nested dicts to dotted keys; lists of scalars stay one value (shown joined)."""
    out: Dict[str, Any] = {}
    if isinstance(obj, dict):
        if not obj and prefix:
            out[prefix] = {}
        for key in sorted(obj, key=lambda k: _natural_key(str(k))):
            out.update(_flat(obj[key], f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(obj, list) and any(isinstance(item, (dict, list)) for item in obj):
        for index, item in enumerate(obj):
            out.update(_flat(item, f"{prefix}.{index}"))
    else:
        out[prefix] = obj
    return out


def _bytes_text(value: float) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= size:
            return f"{value / size:.1f} {unit}"
    return f"{value} B"


def _side_text(value: Any, key: str = "") -> str:
    if key.endswith("_bytes") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{_bytes_text(value)} ({value})"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(fmt_value(v, 80) for v in value) if value else "(none)"
    return fmt_value(value)


def _compare_rows(good: Dict[str, Any], bad: Dict[str, Any], pinned: Sequence[str] = (),
                  skip: Callable[[str], bool] = lambda key: False) -> Dict[str, Any]:
    """Rows {label, good, bad, differs} for two flat dicts: differing and pinned rows first."""
    keys = sorted(set(good) | set(bad), key=_natural_key)
    rows_main, rows_same = [], []
    for key in keys:
        if skip(key):
            continue
        g, b = good.get(key, ABSENT), bad.get(key, ABSENT)
        row = {"label": key, "good": _side_text(g, key), "bad": _side_text(b, key), "differs": g != b,
               "good_absent": key not in good, "bad_absent": key not in bad}
        if row["differs"] or any(key == p or key.startswith(p + ".") for p in pinned):
            rows_main.append(row)
        else:
            rows_same.append(row)
    return {"main": rows_main, "same": rows_same, "differs": sum(1 for r in rows_main if r["differs"])}


# ---------------------------------------------------------------- 1. verdict

def _stats(raw: Any) -> Dict[str, Any]:
    raw = _dict(raw)
    values = [v for v in _list(raw.get("values")) if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return {
        "median": fmt_num(raw.get("median")), "spread": fmt_num(raw.get("spread")),
        "n": raw.get("n", len(values)) if raw else 0, "min": fmt_num(raw.get("min")),
        "max": fmt_num(raw.get("max")), "present": bool(raw),
    }


def _outcome(direction: str, change: Any, significant: Any) -> str:
    """'worse', 'better', 'noise' or 'unknown' — drives the one colour of the verdict."""
    if not isinstance(change, (int, float)) or isinstance(change, bool) or not math.isfinite(change):
        return "unknown"
    if not significant:
        return "noise"
    if change == 0:
        return "noise"
    worse = change < 0 if direction != "lower" else change > 0
    return "worse" if worse else "better"


def _metric_view(name: str, raw: Dict[str, Any], direction: Optional[str] = None) -> Dict[str, Any]:
    direction = raw.get("direction") or direction or metrics_mod.direction(name)
    change = raw.get("change_pct")
    significant = raw.get("significant")
    p_value = raw.get("p_value")
    return {
        "name": name, "direction": direction, "good": _stats(raw.get("good")), "bad": _stats(raw.get("bad")),
        "change": fmt_pct(change), "significant": bool(significant),
        "p_value": "—" if not isinstance(p_value, (int, float)) or isinstance(p_value, bool) else f"{p_value:.3g}",
        "method": raw.get("method") or "", "outcome": _outcome(direction, change, significant),
    }


def _decomposition_part(raw: Any) -> Optional[Dict[str, Any]]:
    raw = _dict(raw)
    if not raw:
        return None

    def median_of(value: Any) -> str:
        return fmt_num(value.get("median")) if isinstance(value, dict) else fmt_num(value)

    return {"metric": raw.get("metric") or "", "good": median_of(raw.get("good")), "bad": median_of(raw.get("bad")),
            "change": fmt_pct(raw.get("change_pct")), "holds": bool(raw.get("holds"))}


def _verdict_view(result: Dict[str, Any]) -> Dict[str, Any]:
    verdict = _dict(result.get("verdict"))
    name = verdict.get("metric")
    main = _metric_view(name, verdict) if name else None
    others = []
    for other, raw in sorted(_dict(verdict.get("metrics")).items(), key=lambda kv: _natural_key(kv[0])):
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
            "summary": verdict.get("summary") or "", "outcome": main["outcome"] if main else "unknown"}


# ---------------------------------------------------------------- 2. causes

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
            "good_absent": raw.get("good") is None, "bad_absent": raw.get("bad") is None,
            "why": fmt_value(raw.get("why"), 500) if raw.get("why") else "",
            "evidence": [fmt_value(e, 500) for e in _list(raw.get("evidence"))[:20]],
            "patches": [p for p in _list(raw.get("patches")) if isinstance(p, str) and _PATCH_ID.fullmatch(p)],
        })
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


def _patches_view(result: Dict[str, Any]) -> Dict[str, Any]:
    """The Patches section: each changed file's diff, linked to and from the causes it supports."""
    ranks = {c.get("key"): c.get("rank") for c in _list(result.get("causes")) if isinstance(c, dict)}
    patches = []
    for raw in _list(result.get("patches")):
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str) or not _PATCH_ID.fullmatch(raw["id"]):
            continue
        supports = []
        for key in _list(raw.get("causes")):
            rank = ranks.get(key)
            supports.append({"key": fmt_value(key, 200),
                             "rank": rank if isinstance(rank, int) and not isinstance(rank, bool) else None})
        diff = raw.get("diff") if isinstance(raw.get("diff"), str) else None
        content = raw.get("content") if isinstance(raw.get("content"), str) else None
        content_lines = content.rstrip("\n").split("\n") if content is not None else []
        patches.append({
            "id": raw["id"], "kind": fmt_value(raw.get("kind"), 20), "title": fmt_value(raw.get("title"), 300),
            "basis": fmt_value(raw.get("basis"), 600), "note": fmt_value(raw.get("note"), 600) if raw.get("note") else "",
            "good_sha": short_hash(raw.get("good_sha256")) if raw.get("good_sha256") else "—",
            "bad_sha": short_hash(raw.get("bad_sha256")) if raw.get("bad_sha256") else "—",
            "counts": f"−{raw.get('removed', 0)} +{raw.get('added', 0)}" if diff else "no diff",
            "truncated": bool(raw.get("truncated")), "redacted": bool(raw.get("redacted")),
            "hunks": _hunks(diff) if diff else [],
            "content": content_lines[:CONTENT_SHOWN], "content_total": len(content_lines),
            "supports": supports,
        })
    return {"patches": patches, "total": len(patches)}


# ---------------------------------------------------------------- 3. runs chart

def _nice_step(span: float, target: int = 5) -> float:
    raw = span / max(1, target)
    power = 10 ** math.floor(math.log10(raw))
    for factor in (1, 2, 2.5, 5, 10):
        if raw <= factor * power:
            return factor * power
    return 10 * power


def _step_decimals(step: float) -> int:
    """Decimals every tick of an axis needs: 0.25 -> 2, 2.5 -> 1, 5 -> 0, 0.05 -> 2."""
    exponent = math.floor(math.log10(step) + 1e-9)
    mantissa = round(step / 10 ** exponent, 6)
    return max(0, -exponent + (0 if mantissa in (1, 2, 5, 10) else 1))


def _run_values(snap: Dict[str, Any]) -> Tuple[Dict[str, List[Tuple[int, float]]], int]:
    values: Dict[str, List[Tuple[int, float]]] = {}
    failed = 0
    for index, run in enumerate(_list(snap.get("runs"))):
        if not isinstance(run, dict):
            continue
        if run.get("ok") is False:
            failed += 1
            continue  # a failed run is never a measurement
        for name, value in _dict(run.get("metrics")).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                values.setdefault(str(name), []).append((index + 1, float(value)))
    return values, failed


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
        median = statistics.median([v for _, v in points]) if points else None
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
    return {"name": name, "direction": direction, "width": width, "height": axis_y + 34, "left": left,
            "right_x": width - right, "axis_y": axis_y, "ticks": ticks, "rows": rows}


def _charts_view(result: Dict[str, Any], good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    good_values, good_failed = _run_values(good)
    bad_values, bad_failed = _run_values(bad)
    verdict = _dict(result.get("verdict"))
    main = verdict.get("metric")
    decomposition = _dict(verdict.get("decomposition"))
    first = [main] + [_dict(decomposition.get(p)).get("metric") for p in ("accept_length", "cycle_time")]
    names = sorted(set(good_values) | set(bad_values),
                   key=lambda n: (n not in first, first.index(n) if n in first else 0, _natural_key(n)))
    directions = {n: _dict(_dict(verdict.get("metrics")).get(n)).get("direction") for n in names}
    charts = [_chart(n, good_values.get(n, []), bad_values.get(n, []),
                     directions.get(n) or (verdict.get("direction") if n == main else None) or metrics_mod.direction(n))
              for n in names[:MAX_CHARTS]]
    # The verdict's metric and the EAGLE-3 ones are shown; the other metrics wait in a closed <details>.
    lead = sum(1 for c in charts if c["name"] in first) or min(1, len(charts))
    return {"charts": charts[:lead], "more_charts": charts[lead:], "omitted": names[MAX_CHARTS:],
            "good_failed": good_failed, "bad_failed": bad_failed,
            "good_runs": len(_list(good.get("runs"))), "bad_runs": len(_list(bad.get("runs")))}


# ---------------------------------------------------------------- 4. workers matrix

_KIND_ORDER = {"main": 0, "dp_controller": 1, "tokenizer": 2, "detokenizer": 3, "scheduler": 4, "rank": 5, "other": 6}


def _env_sources(snap: Dict[str, Any]) -> List[Tuple[str, Dict[str, Any]]]:
    """(prefix, sections) pairs: each node of a merged multi-node snapshot, else the snapshot itself."""
    nodes = _dict(snap.get("nodes"))
    if nodes:
        return [(f"{host}/", _dict(_dict(node).get("sections"))) for host, node in sorted(nodes.items())]
    return [("", _sections(snap))]


def _worker_columns(snap: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    columns: Dict[str, Dict[str, Any]] = {}
    for prefix, sections in _env_sources(snap):
        processes = _dict(_data(sections, "processes").get("processes"))
        records = _dict(_data(sections, "probe").get("records"))
        for key, proc in processes.items():
            proc = _dict(proc)
            role = _dict(proc.get("role"))
            status = proc.get("environ_status") or ("ok" if isinstance(proc.get("environ"), dict) else "unreadable")
            environ = proc.get("environ") if status == "ok" and isinstance(proc.get("environ"), dict) else None
            column = {
                "key": prefix + str(key), "local": str(key), "title": fmt_value(proc.get("title") or "", 200),
                "kind": role.get("kind") or "other", "order": (role.get("dp", 0), role.get("tp", 0), role.get("pp", 0)),
                "parent": prefix + str(proc["parent_key"]) if proc.get("parent_key") else None,
                "status": status, "note": fmt_value(proc.get("environ_note") or "", 200),
                "env": environ, "exec_env": None, "source": "/proc environ (at exec)" if environ is not None else "",
            }
            record = _dict(records.get(key))
            probe_env = record.get("env_at_init") if isinstance(record.get("env_at_init"), dict) else record.get("env_at_start")
            if isinstance(probe_env, dict):
                # The probe sees os.environ inside the worker: the truth NCCL reads. /proc environ is
                # kept to show what was changed in-process (sitecustomize, engine code).
                column["exec_env"] = environ
                column["env"] = probe_env
                column["status"] = "ok"
                column["source"] = "probe at init" if isinstance(record.get("env_at_init"), dict) else "probe at start"
            columns[column["key"]] = column
        for key, record in records.items():
            if key in processes:
                continue
            record = _dict(record)
            env = record.get("env_at_init") if isinstance(record.get("env_at_init"), dict) else record.get("env_at_start")
            rank = _dict(record.get("init")).get("rank")
            columns[prefix + str(key)] = {
                "key": prefix + str(key), "local": str(key), "title": fmt_value(record.get("title") or "", 200),
                "kind": "rank",
                "order": (0, rank if isinstance(rank, int) else 0, 0), "parent": None,
                "status": "ok" if isinstance(env, dict) else "unreadable", "note": "",
                "env": env if isinstance(env, dict) else None, "exec_env": None,
                "source": "probe at init" if isinstance(record.get("env_at_init"), dict) else "probe at start",
            }
    # Node by node; in a node: main process, tokenizer, detokenizer, then schedulers by DP/TP rank.
    ordered = sorted(columns.values(), key=lambda c: (c["key"][:len(c["key"]) - len(c["local"])],
                                                      _KIND_ORDER.get(c["kind"], 6), c["order"], _natural_key(c["key"])))
    return {c["key"]: c for c in ordered}


def _is_perf_var(name: str) -> bool:
    return name.startswith(PERF_ENV_PREFIXES) or name in PERF_ENV_NAMES


def _peer_group(column: Dict[str, Any]) -> Tuple[str, str]:
    return column["kind"], column["parent"] or ""


def _side_matrix(columns: Dict[str, Dict[str, Any]], names: List[str]) -> Dict[str, Dict[str, Any]]:
    """For each variable, each column's cell: value, class, note."""
    readable = {k: c for k, c in columns.items() if c["env"] is not None}
    # Peers: processes of the same kind under the same parent (the TP schedulers of one server).
    groups: Dict[Tuple[str, str], List[str]] = {}
    for key, column in readable.items():
        groups.setdefault(_peer_group(column), []).append(key)
    out: Dict[str, Dict[str, Any]] = {}
    for name in names:
        cells = {}
        majority: Dict[Tuple[str, str], Tuple[Counter, int]] = {}
        for group, keys in groups.items():
            if len(keys) >= 2:
                counts = Counter(readable[k]["env"].get(name) for k in keys)
                majority[group] = (counts, max(counts.values()))
        for key, column in columns.items():
            if column["env"] is None:
                cells[key] = {"cls": "unreadable", "text": "?", "tip": f"environment {column['status']}"}
                continue
            value = column["env"].get(name)
            classes, notes = [], []
            parent = readable.get(column["parent"] or "")
            if parent is not None and parent["env"].get(name) != value:
                classes.append("vs-parent")
                notes.append(f"parent {column['parent']}: {fmt_value(parent['env'].get(name), 120) if name in parent['env'] else 'unset'}")
            if _peer_group(column) in majority:
                counts, top = majority[_peer_group(column)]
                tied = sum(1 for c in counts.values() if c == top) > 1
                if counts[value] < top or tied:
                    classes.append("vs-peers")
                    notes.append(f"peers ({column['kind']}) disagree")
            exec_env = column["exec_env"]
            if exec_env is not None and exec_env.get(name) != value:
                classes.append("in-process")
                notes.append(f"at exec: {fmt_value(exec_env.get(name), 120) if name in exec_env else 'unset'}; changed inside the process")
            full = fmt_value(value, TOOLTIP_CHARS) if name in column["env"] else "unset"
            if name not in column["env"]:
                text, classes = "unset", classes + ["unset"]
            elif parent is not None and not classes:
                text = "="  # same as the parent: the parent column of this row holds the value
                classes.append("same")
            else:
                text = _cut(str(value), CELL_CHARS)
            # A tooltip only where it adds something (a cut value, a note): it is most of the size.
            tip = "; ".join([full] + notes) if notes or (text != full and text != "=") else ""
            cells[key] = {"cls": " ".join(classes), "text": text, "tip": tip}
        out[name] = cells
    return out


def _workers_view(good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    sides = {"good": _worker_columns(good), "bad": _worker_columns(bad)}
    names = set()
    for columns in sides.values():
        for column in columns.values():
            names.update(str(n) for n in (column["env"] or {}))
            names.update(str(n) for n in (column["exec_env"] or {}))
    names_sorted = sorted(names)
    matrices = {side: _side_matrix(columns, names_sorted) for side, columns in sides.items()}
    rows = []
    for name in names_sorted:
        inside = any(cell["cls"] and cell["cls"] != "same" and cell["cls"] != "unreadable"
                     for side in matrices.values() for cell in side[name].values())
        across = False
        for key, column in sides["bad"].items():
            other = sides["good"].get(key)
            if other and column["env"] is not None and other["env"] is not None \
                    and column["env"].get(name) != other["env"].get(name):
                across = True
                break
        rows.append({"name": name, "differs": inside or across, "across": across,
                     "perf": _is_perf_var(name), "quiet": not (inside or across or _is_perf_var(name))})
    views = []
    for side, columns in sides.items():
        views.append({
            "side": side,
            "columns": [{"key": c["key"], "key_parts": re.findall(r"[^_\-/]+[_\-/]?|[_\-/]", c["key"]), "title": c["title"], "kind": c["kind"], "status": c["status"],
                         "note": c["note"], "source": c["source"], "parent": c["parent"] or "",
                         "readable": c["env"] is not None} for c in columns.values()],
            "cells": matrices[side],
        })
    return {"sides": views, "rows": rows, "has_any": any(sides.values()),
            "shown": sum(1 for r in rows if not r["quiet"]), "total": len(rows),
            "differing": sum(1 for r in rows if r["differs"])}


# ---------------------------------------------------------------- 5. code state

def _no_text(entry: Any) -> Any:
    """An entry without its file text (content/patch records): whether a file differs is its hash's
    business, not the text's (redaction on one side only, or no text kept by an older envsnap)."""
    if isinstance(entry, dict) and ("content" in entry or "patch" in entry):
        return {k: v for k, v in entry.items() if k not in ("content", "patch")}
    return entry


def _integrity_view(good_pkgs: Dict[str, Any], bad_pkgs: Dict[str, Any]) -> Dict[str, Any]:
    g_int, b_int = _dict(good_pkgs.get("integrity")), _dict(bad_pkgs.get("integrity"))
    g_mod, b_mod = _dict(g_int.get("modified")), _dict(b_int.get("modified"))
    g_miss, b_miss = _dict(g_int.get("missing")), _dict(b_int.get("missing"))

    def state(path: str, modified: Dict[str, Any], missing: Dict[str, Any]) -> Tuple[str, str]:
        if path in modified:
            return "modified", short_hash(_dict(modified[path]).get("actual_sha256"))
        if path in missing:
            return "missing", "missing"
        return "ok", "matches RECORD"

    def row(path: str) -> Dict[str, Any]:
        entry = _dict(b_mod.get(path) or g_mod.get(path) or b_miss.get(path) or g_miss.get(path))
        g_state, g_text = state(path, g_mod, g_miss)
        b_state, b_text = state(path, b_mod, b_miss)
        recorded = _dict(b_mod.get(path)).get("recorded_sha256") or _dict(g_mod.get(path)).get("recorded_sha256")
        return {"path": fmt_value(path, 200), "dist": fmt_value(entry.get("dist") or "", 60),
                "recorded": short_hash(recorded) if recorded else "—", "good": g_text, "bad": b_text,
                "good_state": g_state, "bad_state": b_state,
                "differs": (g_state, g_text) != (b_state, b_text)}

    def differs(path: str) -> bool:
        return _no_text(g_mod.get(path)) != _no_text(b_mod.get(path)) or (path in g_miss) != (path in b_miss)

    paths = sorted(set(g_mod) | set(b_mod) | set(g_miss) | set(b_miss), key=lambda p: (not differs(p), str(p)))
    summary = {side: {"mode": fmt_value(d.get("mode") or "—"), "checked": fmt_value(d.get("checked_files")),
                      "modified": len(_dict(d.get("modified"))), "missing": len(_dict(d.get("missing"))),
                      "rewritten": len(_dict(d.get("rewritten_scripts"))), "errors": len(_dict(d.get("errors")))}
               for side, d in (("good", g_int), ("bad", b_int))}
    return {"rows": _capped(paths, row), "summary": summary, "present": bool(g_int or b_int)}


def _packages_view(good_pkgs: Dict[str, Any], bad_pkgs: Dict[str, Any]) -> Dict[str, Any]:
    g, b = _dict(good_pkgs.get("dists")), _dict(bad_pkgs.get("dists"))

    def describe(dist: Any) -> str:
        dist = _dict(dist)
        origin = _dict(dist.get("origin"))
        text = fmt_value(dist.get("version"), 60)
        kind = origin.get("kind")
        if kind and kind != "index":
            text += f" ({kind}" + (f" {short_hash(origin.get('commit'))}" if origin.get("commit") else "") + ")"
        return text

    rows = []
    for name in sorted(set(g) | set(b), key=_natural_key):
        g_text = describe(g[name]) if name in g else "—"
        b_text = describe(b[name]) if name in b else "—"
        if name not in g or name not in b or g_text != b_text or _dict(g[name]).get("origin") != _dict(b[name]).get("origin"):
            rows.append({"name": fmt_value(name, 120), "good": g_text, "bad": b_text,
                         "good_absent": name not in g, "bad_absent": name not in b})
    return {"rows": _capped(rows), "good_count": len(g), "bad_count": len(b)}


def _hooks_view(good_py: Dict[str, Any], bad_py: Dict[str, Any]) -> List[Dict[str, Any]]:
    g, b = _dict(good_py.get("startup_hooks")), _dict(bad_py.get("startup_hooks"))

    def describe(hook: Any) -> Dict[str, str]:
        hook = _dict(hook)
        mentions = ", ".join(str(m) for m in _list(hook.get("env_mentions"))[:20])
        return {"sha": short_hash(hook.get("sha256")), "size": fmt_value(hook.get("size")),
                "env": ("sets environment" + (f": {mentions}" if mentions else "")) if hook.get("touches_env") else "",
                "imports": fmt_value("; ".join(str(i) for i in _list(hook.get("import_lines"))[:5]), 200)}

    rows = []
    for path in sorted(set(g) | set(b)):
        hook = _dict(b.get(path) or g.get(path))
        rows.append({"path": fmt_value(path, 200), "kind": fmt_value(hook.get("kind") or "", 30),
                     "good": describe(g[path]) if path in g else None, "bad": describe(b[path]) if path in b else None,
                     "differs": _no_text(g.get(path)) != _no_text(b.get(path))})
    rows.sort(key=lambda r: (not r["differs"], r["path"]))
    return rows


def _git_view(good_git: Dict[str, Any], bad_git: Dict[str, Any]) -> List[Dict[str, Any]]:
    g, b = _dict(good_git.get("repos")), _dict(bad_git.get("repos"))

    def facts(repo: Any) -> Dict[str, Any]:
        repo = _dict(repo)
        branch = repo.get("branch") or ("(detached)" if repo.get("detached") else "—")
        tracking = ""
        if repo.get("upstream"):
            tracking = f"{repo.get('upstream')} ahead {repo.get('ahead', 0)} behind {repo.get('behind', 0)}"
        stash = _dict(repo.get("stash"))
        return {
            "Roles": ", ".join(str(r) for r in _list(repo.get("roles"))) or "—",
            "Branch": fmt_value(branch, 200), "Commit": short_hash(repo.get("head")) if repo.get("head") else "—",
            "Upstream": fmt_value(tracking, 200) if tracking else "—",
            "Dirty files": str(len(_dict(repo.get("dirty")))), "Untracked": str(len(_dict(repo.get("untracked")))),
            "Stash": "; ".join(f"{k} {fmt_value(_dict(v).get('message'), 120)}" for k, v in sorted(stash.items())) or "—",
            "Errors": "; ".join(f"{k}: {fmt_value(v, 120)}" for k, v in sorted(_dict(repo.get("errors")).items())) or "—",
        }

    repos = []
    for path in sorted(set(g) | set(b)):
        gf = facts(g[path]) if path in g else None
        bf = facts(b[path]) if path in b else None
        rows = []
        for label in ("Roles", "Branch", "Commit", "Upstream", "Dirty files", "Untracked", "Stash", "Errors"):
            gv = gf[label] if gf else "—"
            bv = bf[label] if bf else "—"
            if label == "Errors" and gv == bv == "—":
                continue
            rows.append({"label": label, "good": gv, "bad": bv, "differs": gv != bv})
        g_dirty, b_dirty = _dict(_dict(g.get(path)).get("dirty")), _dict(_dict(b.get(path)).get("dirty"))
        g_untr, b_untr = _dict(_dict(g.get(path)).get("untracked")), _dict(_dict(b.get(path)).get("untracked"))
        files = []
        for name in sorted(set(g_dirty) | set(b_dirty) | set(g_untr) | set(b_untr)):
            def state(dirty: Dict[str, Any], untracked: Dict[str, Any]) -> str:
                if name in dirty:
                    entry = _dict(dirty[name])
                    return f"{entry.get('status', 'M')} {short_hash(entry.get('sha256'))}".strip()
                if name in untracked:
                    return f"?? {short_hash(_dict(untracked[name]).get('sha256'))}".strip()
                return "clean"
            gs, bs = state(g_dirty, g_untr), state(b_dirty, b_untr)
            files.append({"path": fmt_value(name, 200), "good": gs, "bad": bs, "differs": gs != bs})
        files.sort(key=lambda r: (not r["differs"], r["path"]))
        repos.append({"path": fmt_value(path, 200), "rows": rows, "files": _capped(files),
                      "good_absent": gf is None, "bad_absent": bf is None,
                      "differs": any(r["differs"] for r in rows) or any(f["differs"] for f in files)})
    return repos


def _files_view(good_files: Dict[str, Any], bad_files: Dict[str, Any]) -> Dict[str, Any]:
    g, b = _dict(good_files.get("entries")), _dict(bad_files.get("entries"))

    def describe(entry: Any) -> str:
        entry = _dict(entry)
        if entry.get("error"):
            return "error: " + fmt_value(entry.get("error"), 120)
        return f"{short_hash(entry.get('sha256'))} ({fmt_value(entry.get('size'))} B)"

    def row(path: str) -> Dict[str, Any]:
        gv = describe(g[path]) if path in g else "—"
        bv = describe(b[path]) if path in b else "—"
        return {"path": fmt_value(path, 200), "good": gv, "bad": bv, "differs": gv != bv}

    differing = {p for p in set(g) | set(b) if _no_text(g.get(p, ABSENT)) != _no_text(b.get(p, ABSENT))}
    paths = sorted(set(g) | set(b), key=lambda p: (p not in differing, str(p)))
    return {"rows": _capped(paths, row), "differing": len(differing)}


def _code_view(good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    gs, bs = _sections(good), _sections(bad)
    return {
        "integrity": _integrity_view(_data(gs, "packages"), _data(bs, "packages")),
        "packages": _packages_view(_data(gs, "packages"), _data(bs, "packages")),
        "hooks": _hooks_view(_data(gs, "python"), _data(bs, "python")),
        "git": _git_view(_data(gs, "git"), _data(bs, "git")),
        "files": _files_view(_data(gs, "files"), _data(bs, "files")),
    }


# ---------------------------------------------------------------- 6. GPU and host

_GPU_PINNED = ("name", "clocks.max", "clocks.application", "clock_event_reasons", "power.limit_w", "pcie",
               "nvlink", "persistence_mode", "ecc.current", "mig_mode")
# Volatile GPU fields worth seeing anyway (throttling, link training at the moment of capture); they
# are shown as "at capture" and never highlighted as differences. Other volatile fields are left out.
_GPU_AT_CAPTURE = ("clock_event_reasons", "clocks.current", "performance_state", "pcie.current_gen")


def _gpu_volatile(attr: str) -> bool:
    return knowledge.is_volatile(f"nvidia.gpus.0.{attr}")


def _gpu_flat(gpu: Any) -> Dict[str, Any]:
    gpu = _dict(gpu)
    flat = {}
    for key, value in _flat({k: v for k, v in gpu.items() if k != "nvlink"}).items():
        if not _gpu_volatile(key) or key.startswith(_GPU_AT_CAPTURE):
            flat[key] = value
    nvlink = gpu.get("nvlink")
    if isinstance(nvlink, dict):
        states = Counter(str(_dict(link).get("state", link)) for link in nvlink.values())
        flat["nvlink"] = ", ".join(f"{count}× {state}" for state, count in sorted(states.items())) or "no links"
    elif nvlink is not None:
        flat["nvlink"] = nvlink
    return flat


def _topology_view(good_nv: Dict[str, Any], bad_nv: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    g = _dict(_dict(good_nv.get("topology")).get("matrix"))
    b = _dict(_dict(bad_nv.get("topology")).get("matrix"))
    if not g and not b:
        return None
    names = sorted(set(g) | set(b) | {c for row in list(g.values()) + list(b.values()) for c in _dict(row)},
                   key=_natural_key)
    sides = []
    for side, mine, other in (("good", g, b), ("bad", b, g)):
        rows = []
        for row in names:
            cells = []
            for col in names:
                value = _dict(mine.get(row)).get(col)
                other_value = _dict(other.get(row)).get(col)
                cells.append({"text": "X" if row == col and value is None else fmt_value(value, 12) if value is not None else "",
                              "differs": value != other_value})
            rows.append({"name": row, "cells": cells})
        sides.append({"side": side, "rows": rows, "present": bool(mine)})
    differing = sum(1 for r in sides[0]["rows"] for c in r["cells"] if c["differs"])
    return {"names": names, "sides": sides, "differing": differing}


def _gpu_host_view(good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    gs, bs = _sections(good), _sections(bad)
    g_nv, b_nv = _data(gs, "nvidia"), _data(bs, "nvidia")
    overview_keys = ("driver_version", "cuda_driver_version", "nvml_version", "count", "source")
    overview = _compare_rows({k: g_nv.get(k) for k in overview_keys if k in g_nv},
                             {k: b_nv.get(k) for k in overview_keys if k in b_nv}, pinned=overview_keys)
    g_gpus, b_gpus = _dict(g_nv.get("gpus")), _dict(b_nv.get("gpus"))
    indices = sorted(set(g_gpus) | set(b_gpus), key=_natural_key)
    flats = {i: (_gpu_flat(g_gpus[i]) if i in g_gpus else None, _gpu_flat(b_gpus[i]) if i in b_gpus else None)
             for i in indices}
    attrs = sorted({k for pair in flats.values() for side in pair if side for k in side}, key=_natural_key)

    def pinned(attr: str) -> bool:
        return any(attr == p or attr.startswith(p + ".") for p in _GPU_PINNED)

    gpu_rows, gpu_same = [], []
    for attr in attrs:
        cells, differs, volatile = [], False, _gpu_volatile(attr)
        for index in indices:
            g_flat, b_flat = flats[index]
            gv = g_flat.get(attr, ABSENT) if g_flat is not None else ABSENT
            bv = b_flat.get(attr, ABSENT) if b_flat is not None else ABSENT
            if gv == bv:
                cells.append({"same": True, "text": _side_text(gv, attr) if gv is not None else "—"})
            else:
                differs = True
                cells.append({"same": False, "good": _side_text(gv, attr) if gv is not None else "—",
                              "bad": _side_text(bv, attr) if bv is not None else "—"})
        row = {"label": attr, "cells": cells, "differs": differs and not volatile, "volatile": volatile}
        (gpu_rows if differs or pinned(attr) else gpu_same).append(row)
    gpu_rows.sort(key=lambda r: (r["volatile"], not r["differs"], _natural_key(r["label"])))
    g_host, b_host = _flat(_data(gs, "host")), _flat(_data(bs, "host"))
    host = _compare_rows(g_host, b_host,
                         pinned=("kernel", "os", "cpu.model", "cpu.governor", "cpu.boost", "cpu.logical", "numa_nodes",
                                 "memory.total_bytes", "thp"),
                         skip=lambda key: knowledge.is_volatile(f"host.{key}"))
    return {"overview": overview, "gpu_indices": indices, "gpu_rows": gpu_rows, "gpu_same": gpu_same,
            "topology": _topology_view(g_nv, b_nv), "host": host,
            "nvidia_status": (_section_status(good, "nvidia"), _section_status(bad, "nvidia")),
            "host_status": (_section_status(good, "host"), _section_status(bad, "host"))}


def _section_status(snap: Dict[str, Any], name: str) -> str:
    section = _dict(_sections(snap).get(name))
    if not section:
        return "not captured"
    status = section.get("status") or "?"
    reason = section.get("reason") or section.get("error")
    return f"{status}: {fmt_value(reason, 160)}" if reason else str(status)


# ---------------------------------------------------------------- 7. differences, provenance

_CATEGORY_ORDER = ("workers", "env", "nccl", "startup", "integrity", "packages", "git", "files", "sglang",
                   "gpu", "host", "torch")


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
                "good_absent": raw.get("good") is None, "bad_absent": raw.get("bad") is None}
    order = sorted(groups, key=lambda c: (c not in _CATEGORY_ORDER,
                                          _CATEGORY_ORDER.index(c) if c in _CATEGORY_ORDER else 0, c))
    categories = []
    for name in order:
        rows = groups[name]
        counts = Counter(_change(r) for r in rows)
        categories.append({"name": fmt_value(name, 60), "rows": _capped(rows, row), "counts": sorted(counts.items())})
    total = sum(len(r) for r in groups.values())
    return {"categories": categories, "volatile": _capped(volatile, row), "total": total, "open": total <= 60}


def _change(raw: Dict[str, Any]) -> str:
    return fmt_value(raw.get("change") or "changed", 10)


def _provenance_view(result: Dict[str, Any], good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    sides = {}
    banners = []
    for side, snap in (("good", good), ("bad", bad)):
        meta = _dict(result.get(side))
        prov = _dict(snap.get("provenance")) or _dict(meta.get("provenance"))
        runs = _list(snap.get("runs"))
        failed = sum(1 for r in runs if isinstance(r, dict) and r.get("ok") is False)
        extra = {k: v for k, v in prov.items() if k not in ("kind", "note")}
        sides[side] = {
            "Label": fmt_value(meta.get("label") or snap.get("label") or "(no label)", 200),
            "Host": fmt_value(meta.get("host") or snap.get("host") or "—", 200),
            "Captured": fmt_value(meta.get("created") or snap.get("created") or "—", 60),
            "File": fmt_value(meta.get("file") or "—", 300),
            "envsnap": fmt_value(snap.get("envsnap_version") or "—", 40),
            "Schema": fmt_value(snap.get("schema_version"), 10),
            "Redaction": fmt_value(snap.get("redaction") or "—", 10),
            "Runs": f"{len(runs)} ({failed} failed)",
            "Nodes": (f"{len(_dict(snap.get('nodes')))}: {fmt_value(', '.join(sorted(_dict(snap.get('nodes')))), 300)}"
                      f" (code, GPU and host sections show {fmt_value(_first_node(snap), 100)}; workers show all)")
            if snap.get("nodes") else "single node",
            "Provenance": fmt_value(prov.get("kind") or "—", 40),
            "Provenance note": fmt_value(prov.get("note") or "—", 600),
            "Provenance detail": fmt_value(extra, 600) if extra else "—",
        }
        if prov.get("kind") == "illustrative":
            note = fmt_value(prov.get("note") or "", 600)
            if banners and banners[-1]["note"] == note:
                banners[-1]["side"] = "both"
            else:
                banners.append({"side": side, "note": note})
    labels = list(sides["good"])
    # Labels, hosts, times and files always differ: only a difference in how the data was made is marked.
    meaningful = ("envsnap", "Schema", "Redaction", "Provenance")
    rows = [{"label": label, "good": sides["good"][label], "bad": sides["bad"][label],
             "differs": label in meaningful and sides["good"][label] != sides["bad"][label]} for label in labels]
    names = sorted(set(_sections(good)) | set(_sections(bad)))
    statuses = [{"label": name, "good": _section_status(good, name), "bad": _section_status(bad, name)}
                for name in names]
    for row in statuses:
        row["differs"] = row["good"] != row["bad"]
    return {"rows": rows, "sections": statuses, "banners": banners,
            # the header and <title> get a short form; the provenance table has the label in full
            "good_label": _cut(sides["good"]["Label"], 80), "bad_label": _cut(sides["bad"]["Label"], 80),
            "good_host": sides["good"]["Host"], "bad_host": sides["bad"]["Host"],
            "good_created": sides["good"]["Captured"], "bad_created": sides["bad"]["Captured"]}


# ---------------------------------------------------------------- rendering

def _templates_dir() -> str:
    """templates/ beside this module: inside the package, so wheels and source checkouts alike have it."""
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")


@lru_cache(maxsize=1)
def _environment():
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


def build_view(result: Dict[str, Any], good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    """Everything the template shows, as display-ready plain data."""
    if not isinstance(result, dict) or not isinstance(good, dict) or not isinstance(bad, dict):
        raise EnvsnapError("report: the result and both snapshots must be JSON objects")
    return {
        "provenance": _provenance_view(result, good, bad),
        "verdict": _verdict_view(result),
        "warnings": [fmt_value(w, 500) for w in _list(result.get("warnings"))[:50]],
        "causes": _causes_view(result),
        "patches": _patches_view(result),
        "runs": _charts_view(result, good, bad),
        "workers": _workers_view(good, bad),
        "code": _code_view(good, bad),
        "gpu_host": _gpu_host_view(good, bad),
        "differences": _differences_view(result),
        "envsnap_version": __version__,
        "caps": {"shown": ROWS_SHOWN, "more": ROWS_MORE},
    }


def render_report(result: Dict[str, Any], good: Dict[str, Any], bad: Dict[str, Any]) -> str:
    """The report as one self-contained HTML document (str)."""
    view = build_view(result, good, bad)
    script = _asset("report.js")
    if "</script" in script.lower():  # would end the inline script early
        raise RuntimeError("report.js must not contain '</script'")
    # The CSP allows exactly this script (by hash), no other script, no fetch of any kind: even a
    # value that slipped past escaping could neither run nor load anything.
    script_hash = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    template = _environment().get_template("report.html.j2")
    return template.render(view=view, css=_asset("report.css"), script=script, script_hash=script_hash)



def compute_result(good: Dict[str, Any], bad: Dict[str, Any], *, good_file: Optional[str] = None,
                   bad_file: Optional[str] = None, metric: Optional[str] = None,
                   pristine: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """The diff/rank result (contract shape) of two loaded snapshots, from the diff/rank library."""
    try:
        from envsnap.analysis import result as result_mod
    except ImportError:
        raise EnvsnapError("this envsnap has no diff/rank library (envsnap.rank)") from None
    return result_mod.analyze(good, bad, metric=metric, good_file=good_file, bad_file=bad_file, pristine=pristine)
