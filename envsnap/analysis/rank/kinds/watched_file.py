"""A watched file (--watch): acted when the files the measured processes read (files_read section) hold it;
otherwise nothing captured says whether it was read (a native open between two samples is not seen)."""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import checkouts
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds import file_read
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    mechanism as mechanism,
    note as note,
    prior as prior,
    size as size,
)
from envsnap.analysis.rank.reach_model import ACTED, COULD_ACT, Reach, ReachContext, who
from envsnap.model.snapshot import as_dict, section_data

NAME = "watched file"


def owns(d: Difference) -> bool:
    return d.where == "files"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    for side, view in (("BAD", ctx.comp.bad), ("GOOD", ctx.comp.good)):
        entry = as_dict(as_dict((section_data(view.source, "files_read") or {}).get("files")).get(d.subject.entity))
        names = file_read.readers(entry)
        if names:
            return Reach(ACTED, "files read", f"read by {who(names)} on {side} (the files the measured processes "
                                              "read)")
    return None


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    return Reach(COULD_ACT, "name", "", False, "`envsnap run` (or the probe) records the files the measured "
                                              "processes read")


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    checkouts.apply_file_kind(d.subject.entity, score)
    return component, why
