"""Side-by-side comparisons for people: the tables the report shows, computed once, here.

`envsnap diff --format json` prints them under "tables" and the HTML report only formats them
(render/ never compares snapshots itself). Each table lists every row that differs; rows that are
the same on both sides are listed up to SAME_ROWS and counted beyond (a 20,000-file install that
is edited identically on both sides does not need 20,000 rows to say so).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from envsnap.analysis.compare import nodes
from envsnap.analysis.tables import code, flags, hardware, runs, workers
from envsnap.model.result_types import NodeTables, Tables

# A side that has no such node: every section "not captured".
_NO_NODE: Dict[str, Any] = {"sections": {}}


def build_tables(good: Dict[str, Any], bad: Dict[str, Any], pairing: Optional[nodes.Pairing] = None) -> Tables:
    """Every side-by-side table of the report for two loaded snapshots.

    Two single-node snapshots give one "code", "hardware" and "sections" table each. Merged
    multi-node snapshots give them per node instead, under "nodes" (one entry per node pair of
    analysis/compare/nodes.py, a side that lacks the node shown as not captured); the workers matrix has
    one group of columns per node ("node/process").
    """
    pairing = pairing or nodes.pair_nodes(good, bad)
    out: Tables = {
        "runs": runs.runs_table(good, bad),
        "workers": workers.workers_table(pairing),
        "command_lines": flags.command_lines_table(good, bad, pairing),
        "provenance": runs.provenance_table(good, bad),
    }
    if pairing.mode == "single":
        out["code"] = code.code_tables(good, bad)
        out["hardware"] = hardware.hardware_tables(good, bad)
        out["sections"] = runs.section_table(good, bad)
        return out
    per_node: List[NodeTables] = []
    out["nodes"] = per_node
    for pair in pairing.pairs:
        g = pair.good if pair.good is not None else _NO_NODE
        b = pair.bad if pair.bad is not None else _NO_NODE
        per_node.append({
            "node": pair.name, "good_host": None if pair.good is None else pair.good.get("host"),
            "bad_host": None if pair.bad is None else pair.bad.get("host"),
            "code": code.code_tables(g, b), "hardware": hardware.hardware_tables(g, b),
            "sections": runs.section_table(g, b)})
    return out
