"""A GPU's setting or state (clocks, power limit, ECC, MIG, driver: the gpu section, per GPU or the same change on
every GPU)."""
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

NAME = "GPU setting"
EVERY_GPU = "*"  # the entity of the same change on every GPU (compare/diff.py _merge_instances)


def owns(d: Difference) -> bool:
    return d.where == "gpu"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return None  # judged by the observation factors of its score (the GPUs in play, the runs' GPU counters)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    if d.subject.entity == EVERY_GPU:
        notes.append("the same change on every GPU")
    return component, why
