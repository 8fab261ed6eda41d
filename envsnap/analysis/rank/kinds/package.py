"""A distribution whose version or build changed: acted when a measured process imported a top-level module of
its name."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, Size, who

NAME = "package"


def owns(d: Difference) -> bool:
    return d.where == "packages"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A distribution whose version or build changed: imported (by a top-level name equal to its name)."""
    sides = ctx.sides
    name = d.subject.entity.replace("-", "_").lower()
    for side, view in sides.items():
        for module, takers in view.imported.items():
            if module.lower() == name:
                return Reach(ACTED, "modules", f"{module} was imported by {who(takers)} on {side}")
    return None


def acted_by(names: Sequence[str]) -> Optional[str]:
    """A combination of the score's factors that means this kind acted, beyond the common ones: none."""
    return None


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    """What this kind says when no observation decided: nothing more than the common line."""
    return None


def size(d: Difference, loss: Optional[float]) -> Optional[Size]:
    """This kind's own measure of its share of the loss: none (the traces may measure its component)."""
    return None
