"""Difference kinds: each kind of difference is one module that says how it can reach a measured process.

A kind module has `NAME`, `owns(d)` (is this difference of the kind?), `reach(d, ctx)` (its reach from what the
snapshots observed, or None when they say nothing either way), `acted_by(names)` (a combination of its score's
factors that means it acted, beyond the common ones), `undecided(d, names, why)` (what it says when nothing
decided), `size(d, loss, mechanism)` (its own measure of its share of the loss, from the runs' counters, if it
has one), `evidence(d, ctx, component, why, score, notes)` (its evidence terms on the cause's score), `note(d,
facts)` (what it tells the other differences: domain.Facts), `prior(d, rule, comp)` (its own prior, or None for
its field rule's) and `mechanism(d, component, found, score, notes)` (what the runs' mechanism says of it): the
explicit list below, checked by mypy against the `DifferenceKind` Protocol, as the collectors are.
The ranking asks `kind_of(d)` and never switches on a difference's `where` itself (analysis/rank/reach.py). A
difference no kind owns is judged by the observation factors of its score alone.
"""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Protocol, Sequence, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.rank.domain import Facts
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds import (
    checkout_file,
    command_line,
    file_read,
    gpu_setting,
    installed_file,
    interpreter,
    library,
    locale_setting,
    nccl_effect,
    neighbour,
    package,
    patch_hunk,
    scheduling,
    search_path,
    section_presence,
    shadowed_module,
    startup_hook,
    variable,
    watched_file,
)
from envsnap.analysis.rank.priors import Prior
from envsnap.analysis.rank.reach_model import Reach, ReachContext, Size
from envsnap.analysis.rank.running import Running


class DifferenceKind(Protocol):
    NAME: str

    def owns(self, d: Difference) -> bool: ...

    def reach(self, d: Difference, ctx: ReachContext) -> Optional[Reach]: ...

    def acted_by(self, names: Sequence[str]) -> Optional[str]: ...

    def undecided(self, d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]: ...

    def size(self, d: Difference, loss: Optional[float],
             mechanism: Optional[Mapping[str, Any]] = None) -> Optional[Size]: ...

    def evidence(self, d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
                 notes: List[str]) -> Tuple[str, str]: ...

    def note(self, d: Difference, facts: Facts) -> None: ...

    def prior(self, d: Difference, rule: knowledge.FieldRule, comp: Comparison) -> Optional[Prior]: ...

    def mechanism(self, d: Difference, component: str, found: Optional[Mapping[str, Any]], score: Score,
                  notes: List[str]) -> None: ...


# The explicit list, most specific first (a variable is a search path before it is anything else).
KINDS: Tuple[DifferenceKind, ...] = (search_path, locale_setting, variable, installed_file, package, library, shadowed_module,
                                     startup_hook, neighbour, scheduling, checkout_file, patch_hunk, file_read,
                                     watched_file, command_line, nccl_effect, gpu_setting, interpreter, section_presence)


def kind_of(d: Difference) -> Optional[DifferenceKind]:
    """The kind that owns a difference, or None."""
    return next((kind for kind in KINDS if kind.owns(d)), None)


def facts_of(comp: Comparison, diffs: Sequence[Difference], running: Optional[Running] = None) -> Facts:
    """What the differences of one comparison tell each other: each kind notes its own part, in the order found."""
    facts = Facts(comp, running)
    for d in diffs:
        kind = kind_of(d)
        if kind is not None:
            kind.note(d, facts)
    return facts
