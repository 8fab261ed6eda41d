"""A file the measured processes read (files_read section: the probe's opens, /proc/PID/fd during the runs):
acted when its content changed, since the readers are named in it; ruled out when only who read it changed. A
file read on one side only and seen there by sampling alone (/proc/PID/fd: only what is open when a sample comes)
could act at most: a short open on the other side can fall between two samples, so its absence there is not
known to be one, and there is no content to compare."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

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
from envsnap.analysis.rank.reach_model import ACTED, CANNOT, COULD_ACT, Reach, ReachContext, who
from envsnap.model.snapshot import section_data

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
    if not (good and bad) and _sampled_only(ctx, side, d.subject.entity):
        other = "GOOD" if side == "BAD" else "BAD"
        return Reach(COULD_ACT, "sampled", f"read by {who(names)} on {side}, seen there only by sampling its open "
                                           f"files (/proc/PID/fd): a short open on {other} can fall between two "
                                           "samples", False, "the probe (Python's own opens) on both sides, or the "
                                           "file seen read on both, would decide")
    return Reach(ACTED, "files read", f"read by {who(names)} on {side}, and its content differs")


def _sampled_only(ctx: ReachContext, side: str, path: str) -> bool:
    """Whether `side` saw the file read only through /proc/PID/fd sampling (files_read's `seen_by`)."""
    view = ctx.comp.bad if side == "BAD" else ctx.comp.good
    entry = (section_data(view.source, "files_read").get("files") or {}).get(path)
    seen = entry.get("seen_by") if isinstance(entry, dict) else None
    return isinstance(seen, list) and bool(seen) and "python" not in seen
