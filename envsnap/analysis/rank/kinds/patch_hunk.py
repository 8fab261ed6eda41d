"""A recorded patch's hunk whose status changed (--patch): acted when a measured process imported the file it
edits (installed: its package; a checkout: the file itself)."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare import patch_status
from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import hunks
from envsnap.analysis.rank.domain import Facts
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds import installed_file
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    mechanism as mechanism,
    prior as prior,
    size as size,
    undecided as undecided,
)
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, who
from envsnap.model.snapshot import as_dict

NAME = "patch hunk"


def owns(d: Difference) -> bool:
    return d.where == patch_status.CATEGORY


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A recorded patch's hunk whose status changed: acted when a measured process imported the file it edits
    (installed: its package; a checkout: the file itself), ruled out as an installed file is."""
    comp, sides = ctx.comp, ctx.sides
    info = comp.bad.patch_info.get(d.base_key) or comp.good.patch_info.get(d.base_key)
    if not info or d.subject.aspect != "hunk":
        return None
    rel = str(as_dict(info.get("hunk")).get("file") or "")
    target = as_dict(as_dict(info.get("patch")).get("target"))
    if not rel:
        return None
    if target.get("kind") == "site-packages":
        return installed_file.of_file(rel, sides)
    root = str(target.get("root") or "")
    path = f"{root.rstrip('/')}/{rel}" if root else rel
    for side, view in sides.items():
        if path in view.elsewhere:
            return Reach(ACTED, "modules", f"{who(view.elsewhere[path])} imported {path} on {side}")
    return None


def note(d: Difference, facts: Facts) -> None:
    """The file whose change this hunk shows: that file's own cause defers to the hunk (domain.Facts.hunk_twins)."""
    twin = hunks.twin_of(facts.comp, d)
    if twin is not None:
        facts.hunk_twins.setdefault(twin, d.key)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """Whether the hunk is in the code, and whether that code runs (rank/hunks.py)."""
    return hunks.score_hunk(d, ctx.facts.comp, component, why, score, notes, ctx.facts.running)
