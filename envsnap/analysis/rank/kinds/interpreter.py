"""The described Python interpreter's identity (the python section's version, implementation, prefixes,
executable, venv): its fields change together when the interpreter changes, and fold.py makes them one cause,
with the objects a process mapped from under either installation. Its reach is the observation factors' (what the
measured processes ran is observed by the processes and probe sections)."""
from __future__ import annotations

from typing import Optional

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    evidence as evidence,
    mechanism as mechanism,
    note as note,
    prior as prior,
    size as size,
    undecided as undecided,
)
from envsnap.analysis.rank.reach_model import Reach, ReachContext

NAME = "interpreter"
# The fields that name the interpreter: when it changes, these change together.
FIELDS = ("version", "implementation", "base_prefix", "prefix", "executable", "venv", "pyvenv")


def owns(d: Difference) -> bool:
    return d.where == "python" and d.subject.entity in FIELDS


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    return None  # judged by the observation factors of its score
