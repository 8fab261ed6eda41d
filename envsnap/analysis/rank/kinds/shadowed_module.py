"""A module a measured process imported from another file than the library of that name (the module lists)."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, Size
from envsnap.model import keys

NAME = "shadowed module"


def owns(d: Difference) -> bool:
    return d.where == "process" and keys.aspect_kind(d.subject.aspect) == keys.SHADOWED


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return Reach(ACTED, "modules", f"{d.subject.entity} imported it from another file (its module list)")


def acted_by(names: Sequence[str]) -> Optional[str]:
    """A combination of the score's factors that means this kind acted, beyond the common ones: none."""
    return None


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    """What this kind says when no observation decided: nothing more than the common line."""
    return None


def size(d: Difference, loss: Optional[float]) -> Optional[Size]:
    """This kind's own measure of its share of the loss: none (the traces may measure its component)."""
    return None
