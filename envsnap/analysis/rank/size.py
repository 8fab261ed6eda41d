"""Size: can a cause's observed share account for the loss the runs measured?

A cause acts through a path, and where the snapshots measured that path its share of the loss can be told:
  a scheduling  a measured process's priority or CPUs: how much longer it waited on the run queue per run, against
                how much longer each run took;
  a neighbour   the share of the machine it took on BAD beyond GOOD, against the share of BAD's time GOOD did not
                need (reach_model.loss_share): a neighbour that took less cannot account for the loss;
  a component   the profiler traces' time per step of the component a cause acts on (runs/trace_diff.py), against
                how much the step grew: GEMM +5.9 ms of a step that grew 6.1 ms accounts for 97% of it.
The share is said, and what it leaves unexplained ("unexplained: 40% of the loss"). Where no path was measured,
nothing is said: a size is never guessed from a name.
"""
from __future__ import annotations

from typing import Any, Mapping, Optional

from envsnap.analysis.compare.diff import Difference
from envsnap.analysis.rank import kinds
from envsnap.analysis.rank.reach_model import Size


def of_component(component: str, trace: Mapping[str, Any]) -> Optional[Size]:
    """The traces' growth of `component` per step against the step's growth."""
    step = trace.get("step_ms") if isinstance(trace.get("step_ms"), dict) else None
    if not step:
        return None
    grew = float(step.get("bad") or 0.0) - float(step.get("good") or 0.0)
    if grew <= 0:
        return None
    change = sum(float(r.get("change_ms") or 0.0) for r in trace.get("components") or []
                 if isinstance(r, dict) and r.get("component") == component and r.get("moved"))
    if change <= 0:
        return None
    return Size(change / grew, f"its component ({component}) grew {change:.3g} ms of the {grew:.3g} ms a step gained "
                               "in the profiler traces")


def size_of(d: Difference, component: str, mechanism: Optional[Mapping[str, Any]], loss: Optional[float]) -> Optional[Size]:
    """What the snapshots measured of a cause's share of the loss, or None: the kind's own measure (a neighbour's
    share of the machine), else the traces' measure of its component."""
    kind = kinds.kind_of(d)
    own = kind.size(d, loss, mechanism) if kind is not None else None
    if own is not None:
        return own
    trace = (mechanism or {}).get("trace")
    if isinstance(trace, dict):
        return of_component(component, trace)
    return None
