"""The snapshot's types, for readers and for mypy: the envelope, a section, a run.

A snapshot is plain JSON data; these TypedDicts name its fields (render/show.py reads a snapshot
through them; the diff result's types are model/result_types.py). Each section's own data is
described by the shape table that validation uses (schema.SECTION_SHAPES), and
tests/model/test_types.py checks that these types and that table name the same fields, so the two
cannot drift apart.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, TypedDict


class Section(TypedDict, total=False):
    """One collector's result: status ok | unavailable | error | timeout, and its data."""
    status: str
    data: Dict[str, Any]
    reason: str
    error: str
    elapsed_s: Optional[float]  # null only on a refused section that had no time of its own (runner._finish_section)


class Run(TypedDict, total=False):
    """One measured run of a benchmark command (measure/runs.py)."""
    ok: bool
    exit_code: int
    duration_s: float
    started: str
    metrics: Dict[str, float]
    output_tail: str
    command: List[str]
    source: str
    parsers: List[str]
    error: str
    note: str
    host: str
    telemetry: Dict[str, Any]
    trace: Dict[str, Any]  # profiler traces summarised (measure/traces.py)
    server_metrics: Dict[str, Any]  # the SGLang server's /metrics changes across the run (measure/server_metrics.py)


class Snapshot(TypedDict, total=False):
    """A whole snapshot file (model/store.py reads and writes it)."""
    schema_version: int
    envsnap_version: str
    label: str
    host: str
    created: str
    redaction: str
    provenance: Dict[str, Any]
    metric_directions: Dict[str, str]
    run_session: Dict[str, Any]
    runs: List[Run]
    sections: Dict[str, Section]
    nodes: Dict[str, Any]  # a merged multi-node snapshot (model/merge.py)
