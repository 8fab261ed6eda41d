"""The processes: the neighbours beside the work, the workers' environment matrix (one column per process,
flags per cell) and each process's command line, item by item."""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Tuple

from envsnap.model.result_types import DiffResult
from envsnap.model.snapshot import as_dict
from envsnap.render.report.common import CELL_CHARS, ROWS_MORE, TOOLTIP_CHARS, cut, fmt_value, listed


def neighbours_view(result: DiffResult, causes: List[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """The other processes beside the work, per process, as analysis/compare/neighbours.py worded them: the
    causes first (linked to their rank), then the busiest of the rest."""
    found = result.get("neighbours")
    if found is None:  # recorded by newer snapshots only
        return None
    # By the raw keys (a view's key is clipped for display): the view's causes are the raw ones, in order.
    raw_causes = result["causes"]
    anchors = {raw["key"]: view["anchor"] for raw, view in zip(raw_causes, causes)}
    ranks: Dict[Any, Tuple[Optional[int], Optional[str]]] = {
        c["key"]: (c["rank"], anchors.get(c["key"]) or None) for c in raw_causes}
    raw = list(listed(found.get("processes"))) + list(listed(found.get("gpu")))
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
        text = cut(str(cell.get("value")), CELL_CHARS)
    # A tooltip only where it adds something (a cut value, a note): it is most of the size.
    tip = "; ".join([full] + notes) if notes or (text != full and text != "=") else ""
    return {"cls": " ".join(classes), "text": text, "tip": tip}


def workers_view(result: DiffResult) -> Dict[str, Any]:
    table = as_dict(as_dict(result.get("tables")).get("workers"))
    rows = [r for r in listed(table.get("rows")) if isinstance(r, dict)]
    views = []
    for side in ("good", "bad"):
        columns = [c for c in listed(as_dict(table.get("columns")).get(side)) if isinstance(c, dict)]
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
    same = [str(n) for n in listed(table.get("same_everywhere"))]
    return {"sides": views, "rows": rows, "same_everywhere": same,
            "has_any": any(v["columns"] for v in views), "shown": len(rows), "total": len(rows) + len(same),
            "differing": table.get("differing", 0)}


def command_lines_view(result: DiffResult) -> Dict[str, Any]:
    """Each process's command line (and the benchmark command's), item by item, both sides (tables/flags.py)."""
    table = as_dict(as_dict(result.get("tables")).get("command_lines"))
    groups = []
    for group in listed(table.get("groups")):
        if not isinstance(group, dict):
            continue
        rows = [{"item": fmt_value(r.get("item"), 200), "differs": bool(r.get("differs")),
                 "good": fmt_value(r.get("good"), 300) if group.get("good_seen") else "not captured",
                 "bad": fmt_value(r.get("bad"), 300) if group.get("bad_seen") else "not captured"}
                for r in listed(group.get("rows")) if isinstance(r, dict)]
        groups.append({"key": fmt_value(group.get("key"), 200), "command": group.get("where") == "command",
                       "rows": rows, "differing": group.get("differing", 0)})
    return {"groups": groups, "differing": table.get("differing", 0)}
