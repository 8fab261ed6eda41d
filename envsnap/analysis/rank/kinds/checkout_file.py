"""A changed file of a git checkout (dirty or untracked): acted when a measured process imported it, or a package
of the checkout whose directory holds it."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, Size, under, who

NAME = "checkout file"


def owns(d: Difference) -> bool:
    return d.where == "git"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A changed file of a checkout: acted when a measured process imported it, or a package of the checkout whose
    directory holds it (the module lists name top-level modules: a package's __init__.py)."""
    sides = ctx.sides
    if d.subject.aspect not in ("dirty", "untracked") or not d.subject.item:
        return None
    path = f"{d.subject.entity.rstrip('/')}/{d.subject.item}"
    if path in ctx.ran:
        return Reach(ACTED, "modules", "a measured process ran it as its main script or program")
    for side, view in sides.items():
        for module_file, takers in view.elsewhere.items():
            package = module_file[: -len("/__init__.py")] if module_file.endswith("/__init__.py") else None
            if module_file == path or (package and under(path, package)):
                what = "it" if module_file == path else f"its package {(package or '').rsplit('/', 1)[-1]}"
                return Reach(ACTED, "modules", f"{who(takers)} imported {what} from the checkout on {side}")
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
