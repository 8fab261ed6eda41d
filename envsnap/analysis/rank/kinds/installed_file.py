"""An installed file that differs from pip's RECORD (packages section's integrity): mapped by a measured process
(a compiled file), or in a package one imported; ruled out when the module lists are known and none imported it."""
from __future__ import annotations

from typing import List, Mapping, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import domain
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
from envsnap.analysis.rank.reach_model import ACTED, CANNOT, COULD_ACT, Reach, ReachContext, Seen, who

NAME = "installed file"


def owns(d: Difference) -> bool:
    return d.where == "integrity"


def note(d: Difference, facts: Facts) -> None:
    facts.integrity[d.subject.entity] = d


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return of_file(d.subject.entity, ctx.sides)


def top_module(rel: str) -> str:
    """The top-level module an installed file belongs to ("pkg/sub/x.py" -> "pkg", "mod.py" -> "mod")."""
    first = rel.split("/", 1)[0]
    if "/" in rel:
        return first
    return first.split(".", 1)[0]


def of_file(rel: str, sides: Mapping[str, Seen]) -> Optional[Reach]:
    """An installed file that differs from RECORD: mapped (a compiled file), or in a package a measured
    process imported; ruled out when every side's module lists and maps are known and none shows it."""
    if not rel or rel.endswith((".dist-info/RECORD", "/RECORD")):
        return None
    for side, view in sides.items():
        mapped = sorted(path for path in view.mapped if path.endswith("/" + rel))
        if mapped:
            return Reach(ACTED, "maps", f"mapped by {who(view.mapped[mapped[0]])} on {side}")
    top = top_module(rel)
    for side, view in sides.items():
        if top in view.imported:
            return Reach(ACTED, "modules", f"its package {top} was imported by {who(view.imported[top])} on {side}")
    if rel.endswith((".py", ".so", ".pyc")) and all(v.modules_known for v in sides.values()):
        return Reach(CANNOT, "modules", f"no measured process imported {top} (their module lists are known on both sides)")
    if rel.endswith((".py", ".so")):
        return Reach(COULD_ACT, "modules", "", False, "the measured processes' module lists (the probe, or `envsnap run`) "
                                           f"would show whether {top} was imported")
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """The file's kind, its package on the hot path, a recorded patch that shows it (rank/domain.py)."""
    return domain.score_integrity(d, ctx.rule, component, why, ctx.facts, score, notes)
