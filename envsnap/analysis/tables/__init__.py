"""Side-by-side comparisons for people: the tables the report shows, computed once, here.

`envsnap diff --format json` prints them under "tables" and the HTML report only formats them
(render/ never compares snapshots itself). Each table lists every row that differs; rows that are
the same on both sides are listed up to SAME_ROWS and counted beyond (a 20,000-file install that
is edited identically on both sides does not need 20,000 rows to say so).
"""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.tables import code, hardware, runs, workers


def build_tables(good: Dict[str, Any], bad: Dict[str, Any]) -> Dict[str, Any]:
    """Every side-by-side table of the report for two loaded snapshots."""
    return {
        "runs": runs.runs_table(good, bad),
        "workers": workers.workers_table(good, bad),
        "code": code.code_tables(good, bad),
        "hardware": hardware.hardware_tables(good, bad),
        "sections": runs.section_table(good, bad),
        "provenance": runs.provenance_table(good, bad),
    }
