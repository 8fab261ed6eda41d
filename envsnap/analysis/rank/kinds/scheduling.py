"""A measured process's own scheduling and placement: its priority (nice), policy, CPUs, memory nodes and cgroup
limits (capture/collectors/placement.py). They are facts of the process itself, read from /proc: a process that
ran the runs ran them with these, so the difference acted. Its size, where the runs measured it: how much longer
the process waited on the run queue (/proc/PID/schedstat's run_delay, per run) against how much longer each run
took."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Tuple

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank.kinds.defaults import (  # noqa: F401 (the Protocol's defaults)
    acted_by as acted_by,
    evidence as evidence,
    mechanism as mechanism,
    note as note,
    prior as prior,
    undecided as undecided,
)
from envsnap.analysis.rank.reach_model import ACTED, Reach, ReachContext, Size
from envsnap.model.snapshot import as_dict

NAME = "scheduling"
# The process fields and the placement collector's groups (workers_view._process_keys, _placement_keys).
FIELDS = {"nice": "priority (nice)", "cpu_affinity": "CPU affinity"}
GROUPS = {"placement.": "placement", "cgroup.": "cgroup limit"}
# The aspects whose effect is CPU time the process's threads wait for: the run-queue wait measures them.
WAITED_FOR = ("nice", "cpu_affinity", "placement.policy", "placement.rt_priority", "cgroup.cpu_weight",
              "cgroup.cpu_shares")


def _what(aspect: str) -> Optional[str]:
    if aspect in FIELDS:
        return FIELDS[aspect]
    return next((f"{word} {aspect[len(prefix):]}" for prefix, word in GROUPS.items() if aspect.startswith(prefix)),
                None)


def owns(d: Difference) -> bool:
    return d.where == "process" and _what(d.subject.aspect) is not None


def _watched_in_runs(snap: Mapping[str, Any], process: str) -> int:
    """How many of a snapshot's runs sampled `process` (run telemetry's watched processes)."""
    runs = snap.get("runs") if isinstance(snap, dict) else None
    return sum(1 for run in runs or [] if isinstance(run, dict) and run.get("ok") is not False
               and process in as_dict(as_dict(run.get("telemetry")).get("watched")))


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """Acted when BAD's runs sampled the process that has it (it did the measured work with it); else nothing
    observed either way (a capture alone shows the setting, not that the process worked under it)."""
    process = d.subject.entity
    runs = max((_watched_in_runs(part.bad.source, process) for part in ctx.comp.node_parts()), default=0)
    if not runs:
        return None
    what = _what(d.subject.aspect) or d.subject.aspect
    return Reach(ACTED, NAME, f"{process} ran BAD's runs with this {what} (its own, read from /proc; sampled in "
                              f"{runs} run{'s' if runs != 1 else ''})")


def _factor(mechanism: Optional[Mapping[str, Any]], name: str) -> Optional[Tuple[float, float]]:
    found = as_dict(as_dict(as_dict(mechanism).get("factors")).get(name))
    good, bad = found.get("good"), found.get("bad")
    if isinstance(good, (int, float)) and isinstance(bad, (int, float)):
        return float(good), float(bad)
    return None


def size(d: Difference, loss: Optional[float], mechanism: Optional[Mapping[str, Any]] = None) -> Optional[Size]:
    """The growth of the process's run-queue wait per run against the growth of the runs' wall time."""
    if d.subject.aspect not in WAITED_FOR or loss is None:
        return None
    wait = _factor(mechanism, f"run_delay_s.{d.subject.entity}")
    wall = _factor(mechanism, "wall_s")
    if wait is None or wall is None or wall[1] <= wall[0]:
        return None
    grew = max(0.0, wait[1] - wait[0])
    return Size(grew / (wall[1] - wall[0]), f"{d.subject.entity} waited {wait[0]:.2g} \u2192 {wait[1]:.2g} s a run on the "
                                            f"run queue, the runs took {wall[0]:.2g} \u2192 {wall[1]:.2g} s")
