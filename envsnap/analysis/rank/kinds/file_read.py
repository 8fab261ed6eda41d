"""A file the measured processes read (files_read section: the probe's opens, /proc/PID/fd during the runs):
acted when its content changed, since the readers are named in it; ruled out when only who read it changed."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.kinds.defaults import acted_by as acted_by, evidence as evidence, size as size, undecided as undecided  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.reach_model import ACTED, CANNOT, Reach, ReachContext, who

NAME = "file read"


def owns(d: Difference) -> bool:
    return d.where == "files_read"


def _value(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def readers(value: Any) -> Sequence[str]:
    found = _value(value).get("read_by")
    return [str(r) for r in found] if isinstance(found, list) else []


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    good, bad = _value(d.good), _value(d.bad)
    if good and bad and good.get("sha256") and good.get("sha256") == bad.get("sha256"):
        return Reach(CANNOT, "content", f"the same content on both sides (sha256 {str(good['sha256'])[:12]}): only "
                                       "which processes read it differs")
    side, value = ("BAD", bad) if bad else ("GOOD", good)
    names = readers(value)
    if not names:
        return None
    return Reach(ACTED, "files read", f"read by {who(names)} on {side}, and its content differs")
