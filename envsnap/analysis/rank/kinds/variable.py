"""An environment variable (in the shell, the workers' own environment, set in-process, NCCL's log or config
files): its reach is decided by the observation factors of its score (a read, NCCL's log; a part of the stack
not in play, not read while reads were tracked, a value only the shell had); when none decides, what would."""
from __future__ import annotations

from typing import Mapping, Optional, Sequence

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, size as size  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.reach_model import COULD_ACT, Reach, ReachContext

NAME = "variable"
WOULD_DECIDE = ("the probe (--probe-dir, or `envsnap run`) would show which variables the measured processes' Python "
                "code read; NCCL_DEBUG=INFO logs what NCCL read")


def owns(d: Difference) -> bool:
    return d.variable is not None


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return None  # the factors decide (reach.reach_of)


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Reach:
    if "readable_by_loaded_code" in names:
        return Reach(COULD_ACT, "readable_by_loaded_code", why["readable_by_loaded_code"], False, WOULD_DECIDE)
    return Reach(COULD_ACT, "name", "", False, WOULD_DECIDE)
