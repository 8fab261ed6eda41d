"""An environment variable (in the shell, the workers' own environment, set in-process, NCCL's log or config
files): its reach is decided by the observation factors of its score (a read, NCCL's log; a part of the stack
not in play, not read while reads were tracked, a value only the shell had); when none decides, what would."""
from __future__ import annotations

from typing import List, Mapping, Optional, Sequence, Tuple

from envsnap import format as fmt
from envsnap.analysis import knowledge
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds import variable_places
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, mechanism as mechanism, size as size  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.kinds.variable_places import note as note  # noqa: F401 (the Protocol's note)
from envsnap.analysis.rank.priors import Prior, variable_prior
from envsnap.analysis.rank.reach_model import ACCOUNTS_ENOUGH, COULD_ACT, Reach, ReachContext, cpu_lost

NAME = "variable"
WOULD_DECIDE = ("the probe (--probe-dir, or `envsnap run`) would show which variables the measured processes' Python "
                "code read; NCCL_DEBUG=INFO logs what NCCL read")


def owns(d: Difference) -> bool:
    return d.variable is not None


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """The factors decide (reach.reach_of), except for the size of a thread-pool setting (thread_pool_size)."""
    return thread_pool_size(d, ctx)


def thread_pool_size(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A setting that sizes a thread pool, when the runs' threads fell with it: fewer threads slow the work only
    by the CPU it then stopped keeping busy. When that CPU is less than half the share of BAD's time the runs lost,
    the setting cannot account for the loss (could act, by its size: it cannot lead)."""
    link = knowledge.series_link(d.base_key)
    if link is None or link.series != knowledge.PEAK_THREADS or not ctx.loss:
        return None
    factors = (ctx.mechanism or {}).get("factors") or {}
    threads = factors.get(knowledge.PEAK_THREADS) if isinstance(factors, dict) else None
    if not isinstance(threads, dict) or not threads.get("beyond_noise"):
        return None
    g, b = threads.get("good"), threads.get("bad")
    if not isinstance(g, (int, float)) or not isinstance(b, (int, float)) or b >= g:
        return None  # more threads slow work by contention, which the CPU kept busy does not bound
    lost = cpu_lost(ctx.mechanism)
    if lost is None or lost[0] >= ACCOUNTS_ENOUGH * ctx.loss:
        return None
    return Reach(COULD_ACT, "size", f"the runs' threads fell with it ({fmt.num(g)} \u2192 {fmt.num(b)}), but {lost[1]}, "
                                    f"less than half the {ctx.loss:.0%} of BAD's time the runs lost: it cannot account "
                                    "for the loss")


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Reach:
    for basis in ("readable_by_loaded_code", "named_by_startup_hook"):
        if basis in names:
            return Reach(COULD_ACT, basis, why[basis], False, WOULD_DECIDE)
    return Reach(COULD_ACT, "name", "", False, WOULD_DECIDE)


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """Where the variable is set and seen (the workers, set in-process, NCCL's log and config files, the server's
    parent; kinds/variable_places.py)."""
    return component, variable_places.place_evidence(d, component, why, ctx.facts, score, notes)


def prior(d: Difference, rule: knowledge.FieldRule, comp: Comparison) -> Prior:
    """Its rule's prior read with its values as set where it is set, or the prior of the kind of setting its
    name or values mark (priors.variable_prior)."""
    return variable_prior(d, rule, variable_places.values(d))


def counted_by_nccl(d: Difference, places: Mapping[str, Difference]) -> bool:
    """Whether NCCL's own log counts this variable's reads: a key of NCCL's log, or the workers' or NCCL's config
    files' copy of a variable NCCL logged."""
    return d.where == "nccl" or (d.where in ("workers", "nccl_conf") and "nccl" in places)
