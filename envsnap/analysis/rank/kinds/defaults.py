"""What a difference kind says where it has nothing of its own to say: a kind module re-exports the ones it
does not define (`from ...defaults import size as size`), so every kind meets the DifferenceKind Protocol."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from envsnap.analysis.compare.diff import Difference
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
