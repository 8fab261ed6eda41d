"""A shared object a measured process mapped (libraries section): another file or build under one name, or
mapped on one side only. Being in the process's maps is the observation."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import domain
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
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext
from envsnap.model import keys

NAME = "library"


def owns(d: Difference) -> bool:
    return d.where == "library"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """An object a measured process mapped, another file or build under one name, or on one side only."""
    who = keys.run_process_words(d.subject.entity)
    if d.good is not None and d.bad is not None:
        return Reach(ACTED, "maps", f"{who} mapped {d.subject.aspect} on both sides, another file or build on BAD")
    return Reach(ACTED, "maps", f"{who} mapped {d.subject.aspect} on {'BAD' if d.good is None else 'GOOD'} only")


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    return component, domain.library_why(d, why, score)
