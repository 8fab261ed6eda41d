"""An environment variable (in the shell, the workers' own environment, set in-process, NCCL's log or config
files): its reach is decided by the observation factors of its score (a read, NCCL's log; a part of the stack
not in play, not read while reads were tracked, a value only the shell had); when none decides, what would."""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import domain
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, size as size  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.reach_model import COULD_ACT, Reach, ReachContext

NAME = "variable"
WOULD_DECIDE = ("the probe (--probe-dir, or `envsnap run`) would show which variables the measured processes' Python "
                "code read; NCCL_DEBUG=INFO logs what NCCL read")


def owns(d: Difference) -> bool:
    return d.variable is not None


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return None  # the factors decide (reach.reach_of)


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Reach:
    for basis in ("readable_by_loaded_code", "named_by_startup_hook"):
        if basis in names:
            return Reach(COULD_ACT, basis, why[basis], False, WOULD_DECIDE)
    return Reach(COULD_ACT, "name", "", False, WOULD_DECIDE)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """Where the variable is set and seen (the workers, set in-process, NCCL's log and config files, the server's
    parent; rank/domain.py)."""
    return component, domain.score_variable(d, component, why, ctx.facts, score, notes)


def counted_by_nccl(d: Difference, places: Mapping[str, Difference]) -> bool:
    """Whether NCCL's own log counts this variable's reads: a key of NCCL's log, or the workers' or NCCL's config
    files' copy of a variable NCCL logged."""
    return d.where == "nccl" or (d.where in ("workers", "nccl_conf") and "nccl" in places)
