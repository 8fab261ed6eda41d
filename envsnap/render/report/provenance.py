"""Provenance: which snapshots were compared, how each was made (envsnap version, redaction, runs, nodes,
measured or illustrative), and each section's status on both sides."""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap.model.result_types import DiffResult
from envsnap.model.snapshot import as_dict
from envsnap.render.report.common import cut, fmt_value, listed, status_text
from envsnap.render.report.nodes import node_tables

_PROVENANCE_LABELS = {"envsnap_version": "envsnap", "schema_version": "Schema", "redaction": "Redaction",
                      "provenance_kind": "Provenance"}


def provenance_view(result: DiffResult) -> Dict[str, Any]:
    tables = as_dict(result.get("tables"))
    prov = as_dict(tables.get("provenance"))
    differing = {_PROVENANCE_LABELS.get(str(k), str(k)) for k in listed(prov.get("differs"))}
    sides = {}
    banners: List[Dict[str, str]] = []
    for side in ("good", "bad"):
        meta, facts = result["good"] if side == "good" else result["bad"], as_dict(prov.get(side))
        nodes = [str(n) for n in listed(facts.get("nodes"))]
        sides[side] = {
            "Label": fmt_value(meta["label"] or "(no label)", 200),
            "Host": fmt_value(meta["host"] or "—", 200),
            "Captured": fmt_value(meta["created"] or "—", 60),
            "File": fmt_value(meta["file"] or "—", 300),
            "envsnap": fmt_value(facts.get("envsnap_version") or "—", 40),
            "Schema": fmt_value(facts.get("schema_version"), 10),
            "Redaction": fmt_value(facts.get("redaction") or "—", 10),
            "Runs": f"{facts.get('runs', 0)} ({facts.get('failed_runs', 0)} failed)",
            "Nodes": f"{len(nodes)}: {fmt_value(', '.join(nodes), 300)}" if nodes else "single node",
            "Provenance": fmt_value(facts.get("provenance_kind") or "—", 40),
            "Provenance note": fmt_value(facts.get("provenance_note") or "—", 600),
            "Provenance detail": fmt_value(facts.get("provenance_detail"), 600) if facts.get("provenance_detail") else "—",
        }
        if facts.get("provenance_kind") == "illustrative":
            note = fmt_value(facts.get("provenance_note") or "", 600)
            if banners and banners[-1]["note"] == note:
                banners[-1]["side"] = "both"
            else:
                banners.append({"side": side, "note": note})
    # Labels, hosts, times and files always differ: only a difference in how the data was made is marked.
    rows = [{"label": label, "good": sides["good"][label], "bad": sides["bad"][label], "differs": label in differing}
            for label in sides["good"]]
    statuses = [{"label": fmt_value(f"{node}: {r.get('section')}" if node else r.get("section"), 200),
                 "good": status_text(r.get("good")), "bad": status_text(r.get("bad")),
                 "differs": bool(r.get("differs"))}
                for node, part in node_tables(tables) for r in listed(part.get("sections")) if isinstance(r, dict)]
    return {"rows": rows, "sections": statuses, "banners": banners,
            # the header and <title> get a short form; the provenance table has the label in full
            "good_label": cut(sides["good"]["Label"], 80), "bad_label": cut(sides["bad"]["Label"], 80),
            "good_host": sides["good"]["Host"], "bad_host": sides["bad"]["Host"],
            "good_created": sides["good"]["Captured"], "bad_created": sides["bad"]["Captured"]}
