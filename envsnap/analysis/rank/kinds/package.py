"""A distribution whose version or build changed: acted when a measured process imported a top-level module of
its name."""
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
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, who

NAME = "package"


def owns(d: Difference) -> bool:
    return d.where == "packages"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A distribution whose version or build changed: imported (by a top-level name equal to its name)."""
    sides = ctx.sides
    name = d.subject.entity.replace("-", "_").lower()
    for side, view in sides.items():
        for module, takers in view.imported.items():
            if module.lower() == name:
                return Reach(ACTED, "modules", f"{module} was imported by {who(takers)} on {side}")
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    return domain.score_package(d, ctx.rule, component, why, score, notes)
