"""Nodes: the code and GPU/host parts of the report once per node compared (merged multi-node snapshots),
or once for two single-node snapshots."""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap import format as fmt
from envsnap.model.result_types import DiffResult, NodeTables, Tables
from envsnap.render.report.code import code_view
from envsnap.render.report.hardware import gpu_host_view


def node_tables(tables: Tables) -> List[NodeTables]:
    """The code/hardware/sections tables per node of merged snapshots, else one untitled part (node None)."""
    if "nodes" in tables:
        return tables["nodes"]
    return [{"node": None, "good_host": None, "bad_host": None, "code": tables["code"],
             "hardware": tables["hardware"], "sections": tables["sections"]}]


def node_parts(result: DiffResult) -> List[Dict[str, Any]]:
    """Code state and GPU/host per node compared (one untitled part for two single-node snapshots)."""
    parts = []
    for part in node_tables(result["tables"]):
        node = part["node"]
        title = ""
        if node is not None:
            hosts = {"good": part["good_host"], "bad": part["bad_host"]}
            missing = [side for side, host in hosts.items() if host is None]
            detail = (f"{missing[0]}: no such node, not captured" if missing else
                      f"good {hosts['good']}, bad {hosts['bad']}" if hosts["good"] != hosts["bad"] else "")
            title = f"node {fmt.value(node, 200)}" + (f" ({fmt.value(detail, 300)})" if detail else "")
        parts.append({"node": node, "title": title, "code": code_view(part["code"]),
                      "gpu_host": gpu_host_view(part["hardware"])})
    return parts
