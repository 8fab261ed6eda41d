"""A module a measured process imported from another file than the library of that name (the module lists)."""
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

NAME = "shadowed module"


def owns(d: Difference) -> bool:
    return d.where == "process" and keys.aspect_kind(d.subject.aspect) == keys.SHADOWED


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return Reach(ACTED, "modules", f"{d.subject.entity} imported it from another file (its module list)")


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    return component, domain.shadowed_why(d, why)
