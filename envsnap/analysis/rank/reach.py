"""Reach: did a difference act on the measured processes, could it have, or do the observations rule it out?

The tiers, the types and what each side's processes were seen loading are in reach_model.py; how each kind of
difference can reach a process is its kind module's (analysis/rank/kinds). `reach_of` joins the two: what the
kind observed in the snapshots decides, an observation factor of the score (factors.py: a read, a flag it was
started with, NCCL's log; a part of the stack not in play, a value only the shell had) decides otherwise, and a
rule-out observation wins over a kind's "acted" (a process met it, yet it could not act there). An "acted" whose
path the profiler traces measured and found unchanged while the step grew (the `trace_held` factor) could act, by
its size: it met the process, but what it acts through did not move, so it cannot account for the loss.
"""
from __future__ import annotations

from typing import AbstractSet, Any, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.rank import kinds
from envsnap.analysis.rank.reach_model import (  # noqa: F401  (the tiers and helpers callers use, re-exported)
    ACTED,
    ACTED_FACTORS,
    CANNOT,
    CANNOT_FACTORS,
    COULD_ACT,
    ORDER_BANDS,
    TIER_BANDS,
    TIER_ORDER,
    TIERS,
    Reach,
    ReachContext,
    Seen,
    banded,
    loss_share,
    order_of,
    seen,
)

FINAL_BASES = ("size", "bookkeeping")

__all__ = ["ACTED", "ACTED_FACTORS", "CANNOT", "CANNOT_FACTORS", "COULD_ACT", "ORDER_BANDS", "TIERS", "TIER_BANDS",
           "TIER_ORDER", "Reach", "ReachContext", "Seen", "banded", "loss_share", "order_of", "reach_of", "seen"]


def reach_of(d: Difference, steps: Sequence[Tuple[str, str]], comp: Comparison,
             sides: Optional[Mapping[str, Seen]] = None, ruled_out_variables: AbstractSet[str] = frozenset(),
             loss: Optional[float] = None, mechanism: Optional[Mapping[str, Any]] = None,
             ran: Tuple[str, ...] = ()) -> Reach:
    """The tier of one difference, from the observation factors its score carries ((name, why) in order) and
    the snapshots; an "acted" the traces size out could act, by its size (the module doc)."""
    found = _reach_of(d, steps, comp, sides, ruled_out_variables, loss, mechanism, ran)
    held = next((why for name, why in steps if name == TRACE_HELD), None)
    if found.tier != ACTED or held is None:
        return found
    measured = held.split(": ", 1)[0]  # "the profiler traces measured its component (X) and it held"
    return Reach(COULD_ACT, "size", f"{found.observation}, but {measured} while the step grew: it cannot account "
                                    "for the loss")


TRACE_HELD = "trace_held"


def _reach_of(d: Difference, steps: Sequence[Tuple[str, str]], comp: Comparison,
             sides: Optional[Mapping[str, Seen]] = None, ruled_out_variables: AbstractSet[str] = frozenset(),
             loss: Optional[float] = None, mechanism: Optional[Mapping[str, Any]] = None,
             ran: Tuple[str, ...] = ()) -> Reach:
    """reach_of before the traces' size check."""
    sides = sides if sides is not None else {"BAD": seen(comp.bad.source), "GOOD": seen(comp.good.source)}
    why = dict(reversed(list(steps)))  # the first step of each name
    names = [name for name, _ in steps]
    ruled_out = [n for n in names if n in CANNOT_FACTORS]
    kind = kinds.kind_of(d)
    judged = kind.reach(d, ReachContext(comp, sides, ruled_out_variables, loss, mechanism, ran)) if kind is not None else None
    # A kind's could-act that is itself an observation (a neighbour too small for the loss, a flag that names a
    # resource) holds over the common "acted" factors; any other could-act waits for them.
    if judged is not None and (judged.tier != COULD_ACT or judged.basis in FINAL_BASES):
        if judged.tier == ACTED and ruled_out:
            # Met by a measured process, yet an observation rules it out (the part it acts on was not in play,
            # only the shell had it, the code it edits is the same on both sides).
            return Reach(CANNOT, ruled_out[0], f"{why[ruled_out[0]]} (though {judged.observation})")
        return judged
    acted = [n for n in names if n in ACTED_FACTORS]
    extra = kind.acted_by(names) if kind is not None else None
    if extra:
        acted.append(extra)
    if ruled_out:
        return Reach(CANNOT, ruled_out[0], why[ruled_out[0]])
    if acted:
        return Reach(ACTED, acted[0], why[acted[0]])
    if judged is not None:
        return judged
    said = kind.undecided(d, names, why) if kind is not None else None
    return said if said is not None else Reach(COULD_ACT, "name", "", False, "")
