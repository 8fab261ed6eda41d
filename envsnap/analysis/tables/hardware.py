"""GPUs, topology and host side by side.

Volatile GPU fields that are worth seeing anyway (clock-event reasons, current clocks, P-state,
current PCIe generation: throttling and link training at the moment of capture) are listed as
"at capture" and never count as differences; other volatile fields are left out.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional

from envsnap.analysis import knowledge
from envsnap.analysis.tables.common import (
    compare_rows,
    data,
    section_status,
    sections,
)
from envsnap.format import natural_key
from envsnap.model.keys import at_or_below, flat_key, gpu_flat, nested_keys
from envsnap.model.result_types import GpuCell, GpuRow, GpuTable, HardwareTables, TopologyTable
from envsnap.model.snapshot import as_dict

GPU_PINNED = ("name", "clocks.max", "clocks.application", "clock_event_reasons", "power.limit_w", "pcie",
              "nvlink", "persistence_mode", "ecc.current", "mig_mode")
GPU_AT_CAPTURE = ("clock_event_reasons", "clocks.current", "performance_state", "pcie.current_gen")
OVERVIEW = ("driver_version", "cuda_driver_version", "nvml_version", "count", "source")
HOST_PINNED = ("kernel", "os", "cpu.model", "cpu.governor", "cpu.boost", "cpu.logical", "numa_nodes",
               "memory.total_bytes", "thp")


def _gpu_volatile(index: str, attr: str) -> bool:
    return knowledge.is_volatile(gpu_flat(index, attr))


def _gpu_flat(index: str, gpu: Any) -> Dict[str, Any]:
    gpu = as_dict(gpu)
    out = {k: v for k, v in nested_keys({k: v for k, v in gpu.items() if k != "nvlink"}).items()
           if not _gpu_volatile(index, k) or any(at_or_below(k, p) for p in GPU_AT_CAPTURE)}
    nvlink = gpu.get("nvlink")
    if isinstance(nvlink, dict):
        states = Counter(str(as_dict(link).get("state", link)) for link in nvlink.values())
        out["nvlink"] = ", ".join(f"{count}\u00d7 {state}" for state, count in sorted(states.items())) or "no links"
    elif nvlink is not None:
        out["nvlink"] = nvlink
    return out


def _gpus(g_nv: Dict[str, Any], b_nv: Dict[str, Any]) -> GpuTable:
    g_gpus, b_gpus = as_dict(g_nv.get("gpus")), as_dict(b_nv.get("gpus"))
    indices = sorted(set(g_gpus) | set(b_gpus), key=natural_key)
    flats = {i: (_gpu_flat(i, g_gpus[i]) if i in g_gpus else None, _gpu_flat(i, b_gpus[i]) if i in b_gpus else None)
             for i in indices}
    attrs = sorted({k for pair in flats.values() for side in pair if side for k in side}, key=natural_key)
    rows: List[GpuRow] = []
    for attr in attrs:
        # Seen at capture when a volatile rule names it on a GPU that has it (the rules name every GPU alike).
        cells: List[GpuCell] = []
        differs = False
        volatile = any(_gpu_volatile(i, attr) for i in indices if any(attr in (side or {}) for side in flats[i]))
        for index in indices:
            g_flat, b_flat = flats[index]
            g_has, b_has = g_flat is not None and attr in g_flat, b_flat is not None and attr in b_flat
            gv = g_flat.get(attr) if g_has else None  # type: ignore[union-attr]
            bv = b_flat.get(attr) if b_has else None  # type: ignore[union-attr]
            same = (g_has, gv) == (b_has, bv)
            differs = differs or not same
            cells.append({"gpu": index, "good": gv, "bad": bv, "good_set": g_has, "bad_set": b_has, "same": same})
        pinned = any(at_or_below(attr, p) for p in GPU_PINNED)
        rows.append({"attribute": attr, "cells": cells, "differs": differs and not volatile, "changed": differs,
                     "at_capture": volatile, "pinned": pinned})
    rows.sort(key=lambda r: (r["at_capture"], not r["differs"], natural_key(r["attribute"])))
    return {"indices": indices, "rows": rows}


def _topology(g_nv: Dict[str, Any], b_nv: Dict[str, Any]) -> Optional[TopologyTable]:
    g = as_dict(as_dict(g_nv.get("topology")).get("matrix"))
    b = as_dict(as_dict(b_nv.get("topology")).get("matrix"))
    if not g and not b:
        return None
    names = sorted(set(g) | set(b) | {c for row in list(g.values()) + list(b.values()) for c in as_dict(row)},
                   key=natural_key)
    matrix = {side: [[as_dict(mine.get(r)).get(c) for c in names] for r in names]
              for side, mine in (("good", g), ("bad", b))}
    differs = [[matrix["good"][i][j] != matrix["bad"][i][j] for j in range(len(names))] for i in range(len(names))]
    return {"names": names, "good": matrix["good"], "bad": matrix["bad"], "differs": differs,
            "good_present": bool(g), "bad_present": bool(b), "differing": sum(map(sum, differs))}


def hardware_tables(good: Dict[str, Any], bad: Dict[str, Any]) -> HardwareTables:
    gs, bs = sections(good), sections(bad)
    g_nv, b_nv = data(gs, "nvidia"), data(bs, "nvidia")
    overview = compare_rows({k: g_nv.get(k) for k in OVERVIEW if k in g_nv},
                            {k: b_nv.get(k) for k in OVERVIEW if k in b_nv}, pinned=OVERVIEW)
    host = compare_rows(nested_keys(data(gs, "host")), nested_keys(data(bs, "host")), pinned=HOST_PINNED,
                        skip=lambda key: knowledge.is_volatile(flat_key("host", key)))
    return {"overview": overview, "gpus": _gpus(g_nv, b_nv), "topology": _topology(g_nv, b_nv), "host": host,
            "status": {"nvidia": {"good": section_status(good, "nvidia"), "bad": section_status(bad, "nvidia")},
                       "host": {"good": section_status(good, "host"), "bad": section_status(bad, "host")}}}
