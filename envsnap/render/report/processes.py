"""The processes: the neighbours beside the work, the workers' environment matrix (one column per process,
flags per cell) and each process's command line, item by item."""
from __future__ import annotations

import re
from typing import Any, Dict, Optional, Tuple

from envsnap import format as fmt
from envsnap.model.result_types import DiffResult, WorkerCell
from envsnap.model.snapshot import as_list
from envsnap.render.report.common import CELL_CHARS, ROWS_MORE, TOOLTIP_CHARS


def neighbours_view(result: DiffResult, links: Dict[str, Tuple[int, str]]) -> Optional[Dict[str, Any]]:
    """The other processes beside the work, per process, as analysis/compare/neighbours.py worded them: the
    causes first (linked to their rank: `links`, causes.cause_links), then the busiest of the rest."""
    found = result.get("neighbours")
    if found is None:  # recorded by newer snapshots only
        return None
    raw = list(as_list(found.get("processes"))) + list(as_list(found.get("gpu")))
    if isinstance(found.get("steal"), dict):
        raw.append(found["steal"])
    rows = []
    for row in raw:
        if not isinstance(row, dict):
            continue
        rank, anchor = links.get(str(row.get("key")), (None, ""))
        where = f"GPU {row.get('gpu')}: " if row.get("kind") == "gpu" else ""
        rows.append({"command": fmt.value(f"{where}{row.get('command')}", 200), "good": fmt.value(row.get("good_text"), 200),
                     "bad": fmt.value(row.get("bad_text"), 200), "changed": bool(row.get("changed")), "rank": rank,
                     "anchor": anchor})
    rows.sort(key=lambda r: not r["changed"])
    return {"summary": fmt.value(found.get("summary"), 500), "rows": rows[:ROWS_MORE], "more": max(0, len(rows) - ROWS_MORE)}


def _shown(set_: Any, value: Any, limit: int = 120) -> str:
    return fmt.value(value, limit) if set_ else "unset"


def _cell_view(cell: WorkerCell) -> Dict[str, str]:
    """A matrix cell's text, classes and tooltip, from the analysis' flags."""
    if not cell.get("readable"):
        return {"cls": "unreadable", "text": "?", "tip": f"environment {cell.get('status', 'unreadable')}"}
    classes, notes = [], []
    vs_parent = cell.get("vs_parent")
    if vs_parent is not None:
        classes.append("vs-parent")
        notes.append(f"parent: {_shown(vs_parent['set'], vs_parent['value'])}")
    if cell.get("vs_peers"):
        classes.append("vs-peers")
        notes.append("peers disagree")
    in_process = cell.get("in_process")
    if in_process is not None:
        classes.append("in-process")
        notes.append(f"at exec: {_shown(in_process['set'], in_process['value'])}; changed inside the process")
    full = _shown(cell.get("set"), cell.get("value"), TOOLTIP_CHARS)
    later = cell.get("later") or []
    if later:
        # What diff's changed_in_process says: the value it showed, then each value the process set after.
        classes += [] if "in-process" in classes else ["in-process"]
        steps = [_shown(change["set"], change["value"]) for change in later]
        notes.append("changed inside the process: " + ", then ".join(
            f"{step} at {'init_process_group' if change['stage'] == 'init' else change['stage']}"
            for step, change in zip(steps, later)))
        text = fmt.cut(" \u2192 ".join([_shown(cell.get("set"), cell.get("value"))] + steps), CELL_CHARS)
        if not cell.get("set"):
            classes.append("unset")
    elif not cell.get("set"):
        text, classes = "unset", classes + ["unset"]
    elif cell.get("has_parent") and not classes:
        text = "="  # same as the parent: the parent column of this row holds the value
        classes.append("same")
    else:
        text = fmt.cut(str(cell.get("value")), CELL_CHARS)
    # A tooltip only where it adds something (a cut value, a note): it is most of the size.
    tip = "; ".join([full] + notes) if notes or (text != full and text != "=") else ""
    return {"cls": " ".join(classes), "text": text, "tip": tip}


def workers_view(result: DiffResult) -> Dict[str, Any]:
    table = result["tables"]["workers"]
    rows = table["rows"]
    views = []
    for side in ("good", "bad"):
        columns = table["columns"][side]
        cells = table["cells"][side]
        views.append({
            "side": side,
            "columns": [{"key": fmt.value(c["key"], 200),
                         "key_parts": re.findall(r"[^_\-/]+[_\-/]?|[_\-/]", c["key"]),
                         "title": fmt.value(c["title"] or "", 200), "kind": c["kind"],
                         "status": c["status"], "note": fmt.value(c["note"] or "", 200),
                         "source": c["source"] or "", "parent": c["parent"] or "",
                         "readable": c["readable"]} for c in columns],
            # every listed variable has a cell in every column of its side (tables/workers.workers_table)
            "cells": {r["name"]: {c["key"]: _cell_view(cells[r["name"]][c["key"]]) for c in columns}
                      for r in rows},
        })
    same = table["same_everywhere"]
    return {"sides": views, "rows": rows, "same_everywhere": same,
            "has_any": any(v["columns"] for v in views), "shown": len(rows), "total": len(rows) + len(same),
            "differing": table["differing"]}


def command_lines_view(result: DiffResult) -> Dict[str, Any]:
    """Each process's command line (and the benchmark command's), item by item, both sides (tables/flags.py)."""
    table = result["tables"]["command_lines"]
    groups = []
    for group in table["groups"]:
        rows = [{"item": fmt.value(r["item"], 200), "differs": r["differs"],
                 "good": fmt.value(r["good"], 300) if group["good_seen"] else "not captured",
                 "bad": fmt.value(r["bad"], 300) if group["bad_seen"] else "not captured"}
                for r in group["rows"]]
        groups.append({"key": fmt.value(group["key"], 200), "command": group["where"] == "command",
                       "rows": rows, "differing": group["differing"]})
    return {"groups": groups, "differing": table["differing"]}
