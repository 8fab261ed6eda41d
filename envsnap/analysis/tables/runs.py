"""Runs (every measurement of both sides, for the charts), section statuses and provenance."""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping

from envsnap.analysis.tables.common import (
    section_status,
    sections,
)
from envsnap.format import natural_key
from envsnap.model.result_types import MetricSeries, ProvenanceSide, ProvenanceTable, RunsTable, SectionRow
from envsnap.model.snapshot import as_dict, as_list


def _series(snap: Dict[str, Any]) -> MetricSeries:
    values: Dict[str, List[List[float]]] = {}
    failed = 0
    runs = as_list(snap.get("runs"))
    for index, run in enumerate(runs):
        if not isinstance(run, dict):
            continue
        if run.get("ok") is False:
            failed += 1
            continue  # a failed run is never a measurement
        for name, value in as_dict(run.get("metrics")).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                values.setdefault(str(name), []).append([index + 1, float(value)])
    return {"metrics": values, "failed": failed, "total": len(runs)}


def runs_table(good: Dict[str, Any], bad: Dict[str, Any]) -> RunsTable:
    """Each side's runs as (run number, value) per metric, and its failed-run count."""
    return {"good": _series(good), "bad": _series(bad)}


def section_table(good: Dict[str, Any], bad: Dict[str, Any]) -> List[SectionRow]:
    """Every section's status on both sides (a section on one side only is 'not captured' on the other)."""
    names = sorted(set(sections(good)) | set(sections(bad)), key=natural_key)
    rows: List[SectionRow] = []
    for name in names:
        g, b = section_status(good, name), section_status(bad, name)
        rows.append({"section": name, "good": g, "bad": b, "differs": g != b})
    return rows


# How the two files were made: a difference here changes how far they can be compared.
MEANINGFUL_PROVENANCE = ("envsnap_version", "schema_version", "redaction", "provenance_kind")


def provenance_table(good: Dict[str, Any], bad: Dict[str, Any]) -> ProvenanceTable:
    """Per side: envsnap version, schema, redaction, runs, nodes and provenance; which of them differ."""
    sides: Dict[str, ProvenanceSide] = {}
    for side, snap in (("good", good), ("bad", bad)):
        prov = as_dict(snap.get("provenance"))
        runs = as_list(snap.get("runs"))
        nodes = sorted(as_dict(snap.get("nodes")))
        sides[side] = {
            "envsnap_version": snap.get("envsnap_version"), "schema_version": snap.get("schema_version"),
            "redaction": snap.get("redaction"), "runs": len(runs),
            "failed_runs": sum(1 for r in runs if isinstance(r, dict) and r.get("ok") is False),
            "nodes": nodes, "provenance_kind": prov.get("kind"), "provenance_note": prov.get("note"),
            "provenance_detail": {k: v for k, v in prov.items() if k not in ("kind", "note")},
        }
    good_side: Mapping[str, object] = sides["good"]  # read by field name
    bad_side: Mapping[str, object] = sides["bad"]
    differs = [name for name in MEANINGFUL_PROVENANCE if good_side[name] != bad_side[name]]
    return {"good": sides["good"], "bad": sides["bad"], "differs": differs}
