"""Another process (or the hypervisor) beside the work: judged by what it took, against what the runs lost."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import neighbours
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.rank import observed
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.kinds.defaults import note as note  # noqa: F401 (the Protocol's defaults)
from envsnap.analysis.rank.priors import Prior, neighbour_prior
from envsnap.analysis.rank.reach_model import ACCOUNTS_ENOUGH, CANNOT, COULD_ACT, Reach, ReachContext, Size, cpu_lost

NAME = "neighbour"


def owns(d: Difference) -> bool:
    return d.where == "neighbour"


def _lost(good: Optional[Dict[str, Any]], bad: Optional[Dict[str, Any]], kind: str,
          mechanism: Optional[Mapping[str, Any]]) -> Optional[Tuple[float, str]]:
    """(share of BAD's time the work lost to others, how it was measured): the runs' own CPUs kept busy where the
    runs recorded them (a CPU neighbour takes CPU time the work waits for), else the share of the machine it took."""
    lost = cpu_lost(mechanism) if kind == "cpu" else None
    if lost is not None:
        return lost
    share = neighbours.share_taken(kind, good, bad)
    if share is None:
        return None
    return share, f"it took {share:.0%} of the machine on BAD beyond GOOD"


def reach(d: Difference, ctx: ReachContext) -> Optional[Reach]:
    """A neighbour rules itself out when it took less from BAD than from GOOD, or when nothing was measured
    that it could have delayed (no run, no measured process on either side); one whose take cannot account for
    the loss (less than half of it: the runs' own lost CPU, else its share of the machine) cannot lead (could
    act, by its size)."""
    sides, loss = ctx.sides, ctx.loss
    good: Optional[Dict[str, Any]] = d.good if isinstance(d.good, dict) else None
    bad: Optional[Dict[str, Any]] = d.bad if isinstance(d.bad, dict) else None
    row: Dict[str, Any] = {"kind": d.subject.aspect, "good": good, "bad": bad}
    if row["kind"] in ("cpu", "steal", "gpu") and not neighbours.more_on_bad(row):
        return Reach(CANNOT, "took less on BAD", "it took less from BAD than from GOOD: it cannot have slowed BAD down")
    if not any(view.measured for view in sides.values()):
        return Reach(CANNOT, "nothing measured", "no run and no measured process on either side: there was no "
                                                 "work for it to delay")
    lost = _lost(good, bad, d.subject.aspect, ctx.mechanism)
    if loss is not None and lost is not None and lost[0] < ACCOUNTS_ENOUGH * loss:
        return Reach(COULD_ACT, "size", f"{lost[1]}, less than half the {loss:.0%} of BAD's time the runs lost: "
                                        "it cannot account for the loss")
    return None


def acted_by(names: Sequence[str]) -> Optional[str]:
    """Measured beside the runs and named by the mechanism as what they lost their CPU or GPU to."""
    return "mechanism_matches" if "neighbour_measured" in names and "mechanism_matches" in names else None


def undecided(d: Difference, names: Sequence[str], why: Mapping[str, str]) -> Optional[Reach]:
    return Reach(COULD_ACT, "neighbour_measured" if "neighbour_measured" in names else "name",
                 why.get("neighbour_measured", ""), False,
                 "the runs' run-queue wait and lost CPU would show whether it took the work's CPU")


def size(d: Difference, loss: Optional[float], mechanism: Optional[Mapping[str, Any]] = None) -> Optional[Size]:
    """The share of the machine it took on BAD beyond GOOD, against the share of BAD's time the runs lost."""
    good = d.good if isinstance(d.good, dict) else None
    bad = d.bad if isinstance(d.bad, dict) else None
    share = neighbours.share_taken(d.subject.aspect, good, bad)
    if loss is None or share is None or loss <= 0:
        return None
    return Size(share / loss, f"it took {share:.0%} of the machine on BAD beyond GOOD, the runs lost {loss:.0%} of "
                              "BAD's time")


def prior(d: Difference, rule: knowledge.FieldRule, comp: Comparison) -> Optional[Prior]:
    """Sized by the share of the machine it took on BAD beyond GOOD (priors.neighbour_prior)."""
    found = neighbour_prior(d)
    if found is None:
        return None
    return Prior(found[0], f"sized: {found[1]}", component=rule.component if rule.pattern != "*" else "")


def mechanism(d: Difference, component: str, found: Optional[Mapping[str, Any]], score: Score,
              notes: List[str]) -> None:
    """Judged by what it did (evidence) and by whether the mechanism names it, not by a component. A neighbour slows
    a run only by taking CPU or GPU time the run waits for: a mechanism that found the time elsewhere (more work,
    waits, an idle GPU) argues against it."""
    if not found:
        return
    if d.base_key in (found.get("neighbours") or []):
        score.apply("mechanism_matches", f"the mechanism names it: {found.get('line')}")
    elif found.get("kind") not in (None, "unknown", "contention") and isinstance(d.bad, dict) and neighbours.more_on_bad(
            {"kind": d.subject.aspect, "good": d.good if isinstance(d.good, dict) else None, "bad": d.bad}):
        score.apply("mechanism_contradicts", f"contradicts the mechanism: a neighbour slows a run only by taking the "
                                             f"CPU or GPU time it waits for, and the runs show {found.get('line')}")


def evidence(d: Difference, ctx: EvidenceContext, component: str, why: str, score: Score,
             notes: List[str]) -> Tuple[str, str]:
    """What it took during the runs against what the runs lost (rank/observed.py)."""
    observed.apply_neighbour(d, ctx.mechanism, score, notes)
    return component, why
