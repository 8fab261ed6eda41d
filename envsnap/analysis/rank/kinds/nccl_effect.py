"""What NCCL logged it did (its algorithms, protocols, channels: the nccl section's fields that are not variables):
an effect of the settings NCCL read, folded under the workers' change of them when there is one."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare.diff import Difference, display
from envsnap.analysis.rank.domain import Facts
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    mechanism as mechanism,
    prior as prior,
    size as size,
    undecided as undecided,
)
from envsnap.analysis.rank.reach_model import Reach, ReachContext

NAME = "NCCL's logged setup"


def owns(d: Difference) -> bool:
    return d.category == "nccl" and d.variable is None


def note(d: Difference, facts: Facts) -> None:
    """What NCCL's log shows it chose differently (its algorithms, protocols, transports, NVLS channels): a line
    the workers' NCCL variables cite as their effect."""
    if d.subject.entity in ("algorithms", "protocols") or d.subject.entity.startswith(("transports",
                                                                                       "channel_counts.nvls")):
        facts.nccl_effects.append(f"{d.subject.entity} {display(d.subject, d.good)} \u2192 "
                                  f"{display(d.subject, d.bad)}")


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return None  # judged by the observation factors of its score (NCCL's log is itself an observation)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    changed = ctx.facts.worker_nccl_vars
    if not changed:
        return component, why
    said = f"an effect of the workers' {', '.join(changed)} change, as NCCL logged it"
    score.apply("nccl_effect", said)
    return component, f"{why} \u2014 {said}"
