"""Provenance: which snapshots were compared, how each was made (envsnap version, redaction, runs, nodes,
measured or illustrative), and each section's status on both sides."""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap import format as fmt
from envsnap.model.result_types import DiffResult
from envsnap.render.report.common import status_text
from envsnap.render.report.nodes import node_tables

_PROVENANCE_LABELS = {"envsnap_version": "envsnap", "schema_version": "Schema", "redaction": "Redaction",
                      "provenance_kind": "Provenance"}


def provenance_view(result: DiffResult) -> Dict[str, Any]:
    tables = result["tables"]
    prov = tables["provenance"]
    differing = {_PROVENANCE_LABELS.get(k, k) for k in prov["differs"]}
    sides = {}
    banners: List[Dict[str, str]] = []
    for side in ("good", "bad"):
        meta, facts = (result["good"], prov["good"]) if side == "good" else (result["bad"], prov["bad"])
        nodes = facts["nodes"]
        sides[side] = {
            "Label": fmt.value(meta["label"] or "(no label)", 200),
            "Host": fmt.value(meta["host"] or "—", 200),
            "Captured": fmt.value(meta["created"] or "—", 60),
            "File": fmt.value(meta["file"] or "—", 300),
            "envsnap": fmt.value(facts["envsnap_version"] or "—", 40),
            "Schema": fmt.value(facts["schema_version"], 10),
            "Redaction": fmt.value(facts["redaction"] or "—", 10),
            "Runs": f"{facts['runs']} ({facts['failed_runs']} failed)",
            "Nodes": f"{len(nodes)}: {fmt.value(', '.join(nodes), 300)}" if nodes else "single node",
            "Provenance": fmt.value(facts["provenance_kind"] or "—", 40),
            "Provenance note": fmt.value(facts["provenance_note"] or "—", 600),
            "Provenance detail": fmt.value(facts["provenance_detail"], 600) if facts["provenance_detail"] else "—",
        }
        if facts["provenance_kind"] == "illustrative":
            note = fmt.value(facts["provenance_note"] or "", 600)
            if banners and banners[-1]["note"] == note:
                banners[-1]["side"] = "both"
            else:
                banners.append({"side": side, "note": note})
    # Labels, hosts, times and files always differ: only a difference in how the data was made is marked.
    rows = [{"label": label, "good": sides["good"][label], "bad": sides["bad"][label], "differs": label in differing}
            for label in sides["good"]]
    statuses = [{"label": fmt.value(f"{part['node']}: {r['section']}" if part["node"] else r["section"], 200),
                 "good": status_text(r["good"]), "bad": status_text(r["bad"]), "differs": r["differs"]}
                for part in node_tables(tables) for r in part["sections"]]
    return {"rows": rows, "sections": statuses, "banners": banners,
            # the header and <title> get a short form; the provenance table has the label in full
            "good_label": fmt.cut(sides["good"]["Label"], 80), "bad_label": fmt.cut(sides["bad"]["Label"], 80),
            "good_host": sides["good"]["Host"], "bad_host": sides["bad"]["Host"],
            "good_created": sides["good"]["Captured"], "bad_created": sides["bad"]["Captured"]}
