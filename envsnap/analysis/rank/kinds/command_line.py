"""A command-line item of a measured process or of the benchmark command (a flag, a positional, the program):
the process was started with it, which is how it acts (the `on_command_line` factor) -- unless its name or its
values mark bookkeeping (a port, an address, a path, a name or an id: knowledge/flags.py, variables.py), which
names a resource and sets nothing the work does: then it could act at most, below what acted."""
from __future__ import annotations

from typing import List, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import flags
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, size as size, undecided as undecided  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.reach_model import COULD_ACT, Reach, ReachContext

NAME = "command-line item"
BOOKKEEPING = "bookkeeping"


def owns(d: Difference) -> bool:
    return flags.item_of(d) is not None


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    prior = flags.item_prior(d, ctx.comp)
    if prior is not None and prior.kind == BOOKKEEPING:
        return Reach(COULD_ACT, BOOKKEEPING, f"started with it, but {prior.source.split(': ', 1)[-1]} marks "
                                             "bookkeeping (a port, an address, a path, a name or an id): it names a "
                                             "resource and sets nothing the work does")
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """A server flag's own knowledge, an argument the server read (rank/flags.py)."""
    return flags.score_item(d, ctx.facts.comp, component, why, score, notes)
