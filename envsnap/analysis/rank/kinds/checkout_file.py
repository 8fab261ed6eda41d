"""A changed file of a git checkout (dirty or untracked): acted when a measured process imported it, or a package
of the checkout whose directory holds it."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import checkouts, domain
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
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, under, who

NAME = "checkout file"


def owns(d: Difference) -> bool:
    return d.where == "git"


def note(d: Difference, facts: Facts) -> None:
    if d.subject.aspect == "dirty":
        facts.dirty.append(d)


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A changed file of a checkout: acted when a measured process imported it, or a package of the checkout whose
    directory holds it (the module lists name top-level modules: a package's __init__.py)."""
    sides = ctx.sides
    if d.subject.aspect not in ("dirty", "untracked") or not d.subject.item:
        return None
    path = f"{d.subject.entity.rstrip('/')}/{d.subject.item}"
    if path in ctx.ran:
        return Reach(ACTED, "modules", "a measured process ran it as its main script or program")
    for side, view in sides.items():
        for module_file, takers in view.elsewhere.items():
            package = module_file[: -len("/__init__.py")] if module_file.endswith("/__init__.py") else None
            if module_file == path or (package and under(path, package)):
                what = "it" if module_file == path else f"its package {(package or '').rsplit('/', 1)[-1]}"
                return Reach(ACTED, "modules", f"{who(takers)} imported {what} from the checkout on {side}")
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """Whether the checkout is code that runs (rank/checkouts.py), and the kind of the file that changed."""
    domain.score_git(d, ctx.facts, score, notes)
    if d.subject.aspect in ("dirty", "untracked") and d.subject.item:
        checkouts.apply_file_kind(d.subject.item, score)
    return component, why
