"""GPU and host: the overview, per-GPU attributes, the GPU topology matrix of each side and the host's
facts, from the analysis' hardware tables (analysis/tables)."""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap import format as fmt
from envsnap.model.result_types import CompareRow, HardwareTables
from envsnap.render.report.common import status_text


def _side_text(value: Any, key: str = "") -> str:
    if key.endswith("_bytes") and isinstance(value, (int, float)) and not isinstance(value, bool):
        return f"{fmt.size(value)} ({value})"
    if isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value):
        return ", ".join(fmt.value(v, 80) for v in value) if value else "(none)"
    return fmt.value(value)


def _cmp_rows(rows: List[CompareRow]) -> Dict[str, Any]:
    """Compare rows of the analysis as the template's main (differing or pinned) and same lists."""
    main: List[Dict[str, Any]] = []
    same: List[Dict[str, Any]] = []
    for raw in rows:
        label = raw["label"]
        row = {"label": label, "good": _side_text(raw["good"], label) if raw["good_set"] else "—",
               "bad": _side_text(raw["bad"], label) if raw["bad_set"] else "—",
               "differs": raw["differs"], "good_absent": not raw["good_set"],
               "bad_absent": not raw["bad_set"]}
        (main if raw["differs"] or raw["pinned"] else same).append(row)
    return {"main": main, "same": same, "differs": sum(1 for r in main if r["differs"])}


def gpu_host_view(hw: HardwareTables) -> Dict[str, Any]:
    gpus = hw["gpus"]
    rows: List[Dict[str, Any]] = []
    same: List[Dict[str, Any]] = []
    for raw in gpus["rows"]:
        attr = raw["attribute"]
        cells: List[Dict[str, Any]] = []
        for cell in raw["cells"]:
            g = _side_text(cell["good"], attr) if cell["good_set"] else "—"
            b = _side_text(cell["bad"], attr) if cell["bad_set"] else "—"
            cells.append({"same": True, "text": g} if cell["same"] else {"same": False, "good": g, "bad": b})
        row = {"label": attr, "cells": cells, "differs": raw["differs"], "volatile": raw["at_capture"]}
        (rows if raw["changed"] or raw["pinned"] else same).append(row)
    topology = None
    topo = hw["topology"]
    if topo is not None:
        names = topo["names"]
        differs = topo["differs"]
        sides = []
        for side, matrix, present in (("good", topo["good"], topo["good_present"]),
                                      ("bad", topo["bad"], topo["bad_present"])):
            side_rows = []
            for i, name in enumerate(names):  # the analysis gives every row and column, on both sides
                cells = []
                for j, col in enumerate(names):
                    value = matrix[i][j]
                    text = "X" if name == col and value is None else (fmt.value(value, 12) if value is not None else "")
                    cells.append({"text": text, "differs": differs[i][j]})
                side_rows.append({"name": name, "cells": cells})
            sides.append({"side": side, "rows": side_rows, "present": present})
        topology = {"names": names, "sides": sides, "differing": topo["differing"]}
    status = hw["status"]
    return {"overview": _cmp_rows(hw["overview"]),
            "gpu_indices": gpus["indices"], "gpu_rows": rows, "gpu_same": same,
            "topology": topology, "host": _cmp_rows(hw["host"]),
            "nvidia_status": tuple(status_text(status["nvidia"][s]) for s in ("good", "bad")),
            "host_status": tuple(status_text(status["host"][s]) for s in ("good", "bad"))}
