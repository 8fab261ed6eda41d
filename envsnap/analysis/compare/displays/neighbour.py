"""Another process beside the work, or the hypervisor (analysis/compare/neighbours.py): what it took of the CPUs
or of a GPU, in the words the neighbours' own table uses."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.compare import neighbours
from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"neighbour"})


def absent(subject: Subject) -> str:
    return "not seen"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    side = "bad"  # describe() reads a row: one side of it is enough to word this value
    return neighbours.describe({"kind": subject.aspect, "gpu": subject.item, side: value}, side,
                               str(value.get("source") or "runs"))
