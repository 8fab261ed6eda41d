"""A section captured on one side only: what it holds cannot be compared, so it is a difference of its own."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    mechanism as mechanism,
    note as note,
    prior as prior,
    size as size,
    undecided as undecided,
)
from envsnap.analysis.rank.reach_model import Reach, ReachContext

NAME = "section captured on one side"


def owns(d: Difference) -> bool:
    return d.where == "section"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    return component, "a section was captured on one side only: what it holds cannot be compared"
