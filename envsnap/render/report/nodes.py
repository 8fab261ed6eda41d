"""Nodes: the code and GPU/host parts of the report once per node compared (merged multi-node snapshots),
or once for two single-node snapshots."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from envsnap.model.result_types import DiffResult
from envsnap.model.snapshot import as_dict
from envsnap.render.report.code import code_view
from envsnap.render.report.common import fmt_value, listed
from envsnap.render.report.hardware import gpu_host_view


def node_tables(tables: Dict[str, Any]) -> List[Tuple[Optional[str], Dict[str, Any]]]:
    """(node, its code/hardware/sections tables): one per node of merged snapshots, else (None, tables)."""
    nodes = [n for n in listed(tables.get("nodes")) if isinstance(n, dict)]
    if not nodes:
        return [(None, tables)]
    return [(str(n.get("node")), n) for n in nodes]


def node_parts(result: DiffResult) -> List[Dict[str, Any]]:
    """Code state and GPU/host per node compared (one untitled part for two single-node snapshots)."""
    tables = as_dict(result.get("tables"))
    parts = []
    for node, part in node_tables(tables):
        title = ""
        if node is not None:
            hosts = {side: part.get(f"{side}_host") for side in ("good", "bad")}
            missing = [side for side, host in hosts.items() if host is None]
            detail = (f"{missing[0]}: no such node, not captured" if missing else
                      f"good {hosts['good']}, bad {hosts['bad']}" if hosts["good"] != hosts["bad"] else "")
            title = f"node {fmt_value(node, 200)}" + (f" ({fmt_value(detail, 300)})" if detail else "")
        parts.append({"node": node, "title": title, "code": code_view(part), "gpu_host": gpu_host_view(part)})
    return parts
