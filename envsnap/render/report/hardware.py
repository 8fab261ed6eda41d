"""GPU and host: the overview, per-GPU attributes, the GPU topology matrix of each side and the host's
facts, from the analysis' hardware tables (analysis/tables)."""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap import format as fmt
from envsnap.model.snapshot import as_dict
from envsnap.render.report.common import fmt_value, listed, status_text


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


def gpu_host_view(tables: Dict[str, Any]) -> Dict[str, Any]:
    hw = as_dict(tables.get("hardware"))
    gpus = as_dict(hw.get("gpus"))
    rows: List[Dict[str, Any]] = []
    same: List[Dict[str, Any]] = []
    for raw in (r for r in listed(gpus.get("rows")) if isinstance(r, dict)):
        attr = str(raw.get("attribute"))
        cells = []
        for cell in (c for c in listed(raw.get("cells")) if isinstance(c, dict)):
            g = _side_text(cell.get("good"), attr) if cell.get("good_set") else "—"
            b = _side_text(cell.get("bad"), attr) if cell.get("bad_set") else "—"
            cells.append({"same": True, "text": g} if cell.get("same") else {"same": False, "good": g, "bad": b})
        row = {"label": attr, "cells": cells, "differs": bool(raw.get("differs")), "volatile": bool(raw.get("at_capture"))}
        (rows if raw.get("changed") or raw.get("pinned") else same).append(row)
    topology = None
    topo = hw.get("topology")
    if isinstance(topo, dict):
        names = [str(n) for n in listed(topo.get("names"))]
        differs = listed(topo.get("differs"))
        sides = []
        for side in ("good", "bad"):
            matrix = listed(topo.get(side))
            side_rows = []
            for i, name in enumerate(names):
                values = listed(matrix[i]) if i < len(matrix) else []
                cells = []
                for j, col in enumerate(names):
                    value = values[j] if j < len(values) else None
                    text = "X" if name == col and value is None else (fmt_value(value, 12) if value is not None else "")
                    cells.append({"text": text, "differs": bool(listed(differs[i])[j]) if i < len(differs) else False})
                side_rows.append({"name": name, "cells": cells})
            sides.append({"side": side, "rows": side_rows, "present": bool(topo.get(f"{side}_present"))})
        topology = {"names": names, "sides": sides, "differing": topo.get("differing", 0)}
    status = as_dict(hw.get("status"))
    return {"overview": _cmp_rows(listed(hw.get("overview"))),
            "gpu_indices": [str(i) for i in listed(gpus.get("indices"))], "gpu_rows": rows, "gpu_same": same,
            "topology": topology, "host": _cmp_rows(listed(hw.get("host"))),
            "nvidia_status": tuple(status_text(as_dict(status.get("nvidia")).get(s)) for s in ("good", "bad")),
            "host_status": tuple(status_text(as_dict(status.get("host")).get(s)) for s in ("good", "bad"))}
