"""What a difference kind says where it has nothing of its own to say: a kind module re-exports the ones it
does not define (`from ...defaults import size as size`), so every kind meets the DifferenceKind Protocol."""
from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.rank import observed
from envsnap.analysis.rank.domain import Facts
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.priors import Prior
from envsnap.analysis.rank.reach_model import Reach, Size


def acted_by(names: Sequence[str]) -> Optional[str]:
    """A combination of the score's factors that means this kind acted, beyond the common ones: none."""
    return None


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    """What this kind says when no observation decided: nothing more than the common line."""
    return None


def size(d: Difference, loss: Optional[float], mechanism: Optional[Mapping[str, Any]] = None) -> Optional[Size]:
    """This kind's own measure of its share of the loss: none (the traces may measure its component)."""
    return None


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """This kind's evidence terms on a cause's score, and its (component, why): none of its own."""
    return component, why


def note(d: Difference, facts: Facts) -> None:
    """What this difference tells the rest of the ranking (domain.Facts): nothing."""


def prior(d: Difference, rule: knowledge.FieldRule, comp: Comparison) -> Optional[Prior]:
    """This kind's own prior: none (the field rule's, or the section's default: priors.prior_for)."""
    return None


def mechanism(d: Difference, component: str, found: Optional[Mapping[str, Any]], score: Score,
              notes: List[str]) -> None:
    """What the runs' mechanism says of this difference: judged by its component (observed.apply_mechanism)."""
    observed.apply_mechanism(d, component, found, score, notes)
