"""Ranking: which differences most likely caused the change in the metric, and why.

Each difference starts from a prior (priors.py: its field rule's weight in the knowledge rules, or what an
unknown variable's name and values look like, or the size of a host resource change), and every piece
of evidence is a named factor (factors.py) applied to it and listed in its evidence:

  context    is the part of the stack it acts on in play (context.py: a GPU, NCCL, SGLang)?
  reads      did the measured processes read the variable (observed.py; C libraries count as readers)?
  mechanism  does its component fit how the runs got slower (mechanism.py, observed.py)?
  domain     the workers' own environment, NCCL's log, SGLang's launcher and custom all-reduce,
             checkouts the measured processes ran from (running.py), start-up hooks, hot-path packages
             (domain.py);
  patches    a recorded patch's hunk applied on one side only: did its file change, does it run
             (patch_status.py);
  EAGLE-3    the verify or drafter side the decomposition points at (eagle3.py);
  runs       how sure the runs are that something got worse (same for every cause).

score = 1 - exp(-2.3 * prior * factors). Causes with equal evidence share one rank and are reported
as a group ("tied": how many others share the rank; result["groups"] lists them), never ordered by name:
the snapshots cannot tell them apart.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Set, Tuple, cast

from envsnap.analysis import knowledge
from envsnap.analysis.compare import diff as diff_mod, nodes as nodes_mod
from envsnap.analysis.knowledge import CPU_HOST, MEMORY, NONE
from envsnap.analysis.rank import (
    context as context_mod,
    domain,
    fold as fold_mod,
    kinds,
    observed,
    priors,
    reach as reach_mod,
    running as running_mod,
    size as size_mod,
)
from envsnap.analysis.rank.evidence_context import EvidenceContext
from envsnap.analysis.rank.factors import SIDE_WEIGHTS, Score
from envsnap.analysis.rank.kinds import startup_hook, variable as variable_kind
from envsnap.analysis.runs.verdict import worse
from envsnap.model import keys
from envsnap.model.result_types import FoldedCause, RankedCause, ReachInfo, SizeInfo, Verdict

RESOURCE_COMPONENTS = {"cpus": CPU_HOST, "cpuset": CPU_HOST, "cpu_quota": CPU_HOST, "smt": CPU_HOST,
                       "memory": MEMORY}


def _runs_factor(verdict: Verdict) -> Tuple[str, str]:
    """How much the runs say 'something got worse' (scales every cause alike)."""
    if not verdict["metric"]:
        return "no_runs", ""
    entry = {"change_pct": verdict["change_pct"], "change_abs": verdict.get("change_abs"),
             "direction": verdict["direction"]}
    if not worse(entry):
        return "runs_not_worse", ""
    if verdict["significant"]:
        return "runs_significant", ""
    return "runs_beyond_noise", ""


class _Ranking:
    """Everything one ranking reads besides the difference itself."""

    def __init__(self, comp: diff_mod.Comparison, verdict: Verdict,
                 context: Optional[context_mod.Context], running: Optional[running_mod.Running] = None) -> None:
        self.comp = comp
        self.diffs = [d for d in comp.differences if not d.volatile]
        self.facts = kinds.facts_of(comp, self.diffs, running)
        self.context = context or context_mod.Context()
        self.facts.out_of_play = self._out_of_play
        self.mechanism = verdict["mechanism"]
        decomposition = verdict["decomposition"]
        self.side = decomposition["side"] if decomposition else None
        self.runs = _runs_factor(verdict)

    def _out_of_play(self, name: str) -> bool:
        """Is the part of the stack variable NAME acts on absent or unused in both snapshots (context.py)?"""
        found = context_mod.context_factor(keys.env_key(name), self.context)
        return found is not None and found[0] in ("out_of_context", "not_seen_in_play")

    def cause(self, d: diff_mod.Difference) -> Tuple[Score, RankedCause]:
        rule = knowledge.rule_for(d.base_key)
        kind = kinds.kind_of(d)
        prior = (kind.prior(d, rule, self.comp) if kind is not None else None) or priors.prior_for(d, rule, self.comp)
        score = Score(prior.value, prior.source)
        notes: List[str] = []
        component = rule.component
        why = prior.why or rule.why or f"{d.key} changed"
        if prior.sized:
            component = RESOURCE_COMPONENTS[knowledge.RESOURCE_KEYS[d.base_key]]
        elif prior.component:
            component = prior.component
        component, why = self._domain(d, kind, rule, component, why, score, notes)
        found = context_mod.context_factor(d.base_key, self.context)
        if found is not None:
            score.apply(*found)
        else:
            note = context_mod.context_note(d.base_key, self.context)
            if note:
                notes.append(note)
        if d.variable is not None:
            places = self.facts.by_var.get(d.variable, {})
            observed.apply_reads(d, self.comp, score, notes, variable_kind.counted_by_nccl(d, places))
        (kind.mechanism if kind is not None else observed.apply_mechanism)(d, component, self.mechanism, score, notes)
        self._eagle3(component, score, notes)
        score.apply(self.runs[0])
        cause = {"key": d.key, "category": d.category, "component": component, "score": score.score,
                 "good": diff_mod.display(d.subject, d.good), "bad": diff_mod.display(d.subject, d.bad),
                 "change": d.change, "absent": d.absent, "why": why,
                 "evidence": [domain.change_text(d)] + score.lines() + notes, "factors": score.to_json(),
                 **d.subject.to_json()}
        return score, cast(RankedCause, cause)  # its rank and ties: rank_causes, once all are scored

    def _domain(self, d: diff_mod.Difference, kind: Optional[kinds.DifferenceKind], rule: knowledge.FieldRule,
                component: str, why: str, score: Score, notes: List[str]) -> Tuple[str, str]:
        if kind is not None:  # the kind's own evidence terms (analysis/rank/kinds)
            component, why = kind.evidence(d, EvidenceContext(self.facts, rule, self.mechanism), component, why,
                                           score, notes)
        node = d.subject.node
        if node == nodes_mod.EVERY_NODE:
            notes.append("the same change on every node compared")
        elif node and "," in node:
            notes.append(f"the same change on nodes {node.replace(',', ', ')}")
        return component, why

    def _eagle3(self, component: str, score: Score, notes: List[str]) -> None:
        weights = SIDE_WEIGHTS.get(self.side or "")
        if not weights:
            return
        weight = weights.get(component, 1.0)
        if weight < 1.0:
            what = "what it acts on is not known" if component == NONE else f"{component} is not on that side"
            score.apply("eagle3_side", f"the EAGLE-3 decomposition points at the {self.side} side, and {what}",
                        value=weight)
        elif component != NONE:
            notes.append(f"fits the {self.side} side of the EAGLE-3 decomposition ({component})")


def _ruled_out_variables(entries: Sequence[Tuple[diff_mod.Difference, Score, RankedCause]]) -> Set[str]:
    """Variables every key of which the observations rule out (reach tier `cannot`)."""
    tiers: Dict[str, Set[str]] = {}
    for d, _, cause in entries:
        if d.variable is not None:
            tiers.setdefault(d.variable, set()).add(cause["reach"]["tier"])
    return {name for name, found in tiers.items() if found == {reach_mod.CANNOT}}


def rank_causes(comp: diff_mod.Comparison, verdict: Verdict,
                context: Optional[context_mod.Context] = None,
                running: Optional[running_mod.Running] = None) -> List[RankedCause]:
    """Every non-volatile change as a cause, most likely first: by reach tier (reach.py: what acted, over what
    could act, over what cannot have), then by score; one change, one cause (fold.py: its other keys and its
    consequences are folded into it); equal evidence shares a rank.
    `running`: where the measured processes ran from (running.running(good, bad)), for checkouts."""
    # Node by node (one part for single-node snapshots): the domain rules read the views of the node a
    # difference was found on. A difference merged over several nodes keeps its best-supported score.
    best: Dict[int, Tuple[diff_mod.Difference, Score, RankedCause]] = {}
    link = fold_mod.Link()
    loss = reach_mod.loss_share(cast(Dict[str, Any], verdict)) if verdict["metric"] else None
    mechanism = cast(Optional[Mapping[str, Any]], verdict["mechanism"]) if verdict["metric"] else None
    ran = tuple(sorted({p.path for p in (running or running_mod.Running()).places
                        if p.kind in ("main script", "command")}))
    for part in comp.node_parts():
        ranking = _Ranking(part, verdict, context, running)
        sides = {"BAD": reach_mod.seen(part.bad.source), "GOOD": reach_mod.seen(part.good.source)}
        entries = [(d, *ranking.cause(d)) for d in ranking.diffs]
        for d, score, cause in entries:
            cause["reach"] = cast(ReachInfo, reach_mod.reach_of(d, score.named_steps(), part, sides, loss=loss,
                                                                mechanism=mechanism, ran=ran).to_json())
        # A start-up hook's mentions count only for variables the observations leave in play: re-score hooks.
        ruled_out = _ruled_out_variables(entries)
        ranking.facts.ruled_out = ruled_out
        if ruled_out:
            entries = [(d, *ranking.cause(d)) if startup_hook.owns(d) else (d, score, cause)
                       for d, score, cause in entries]
            for d, score, cause in entries:
                if "reach" not in cause:
                    cause["reach"] = cast(ReachInfo, reach_mod.reach_of(d, score.named_steps(), part, sides,
                                                                        ruled_out, loss, mechanism, ran).to_json())
        fold_mod.links(part, ranking.diffs, ranking.facts, link)
        for d, score, cause in entries:
            cause["score"] = reach_mod.banded(cause["reach"]["order"], score.score)
            measured = size_mod.size_of(d, cause["component"], verdict["mechanism"], loss)
            if measured is not None and cause["reach"]["tier"] != reach_mod.CANNOT:
                cause["size"] = cast(SizeInfo, measured.to_json())
            key = (cause["reach"]["order"], score.signature())
            if id(d) not in best or key > (best[id(d)][2]["reach"]["order"], best[id(d)][1].signature()):
                best[id(d)] = (d, score, cause)
    scored = [fold_mod.Scored(d, score.signature(), cast(Dict[str, Any], cause), cause["reach"]["order"])
              for d, score, cause in best.values()]
    heads = [_folded_cause(head, face, members, link) for head, face, members in fold_mod.fold(scored, link)]
    heads.sort(key=lambda pair: (-pair[0][0], -pair[0][1], pair[1]["key"]))
    causes: List[RankedCause] = []
    rank = 0
    previous: Optional[Tuple[int, float]] = None
    group: List[RankedCause] = []

    def close(members: List[RankedCause]) -> None:
        for member in members:  # how many others share its rank (the group's keys: result["groups"])
            member["tied"] = len(members) - 1

    for order, cause in heads:
        if order != previous:
            close(group)
            rank, previous, group = rank + 1, order, []
        cause["rank"] = rank
        group.append(cause)
        causes.append(cause)
    close(group)
    return causes


def _folded_cause(head: fold_mod.Scored, face: fold_mod.Scored, members: Sequence[fold_mod.Scored],
                  link: fold_mod.Link) -> Tuple[Tuple[int, float], RankedCause]:
    """The head's cause carrying its folded members; ranked by its best face (the change acted if any of its
    keys was seen acting, and scores as its strongest key does)."""
    cause = cast(RankedCause, dict(head.cause))
    if face is not head:
        cause["score"] = face.cause["score"]
        cause["factors"] = face.cause["factors"]
        reach = dict(face.cause["reach"])
        reach["through"] = face.cause["key"]
        tier_words, _, observed = str(reach["line"]).partition(": ")
        reach["line"] = (f"{tier_words} through {face.cause['key']} "
                         f"({fold_mod.relation_of(face, head, link)}): {observed}")
        cause["reach"] = cast(ReachInfo, reach)
        cause["evidence"] = list(cause["evidence"]) + [
            f"ranked by {face.cause['key']}, {fold_mod.relation_of(face, head, link)}: {face.cause['why']}"]
    folded: List[FoldedCause] = []
    for member in sorted(members, key=lambda m: (-m.tier_order, -m.signature, m.cause["key"])):
        folded.append({"key": member.cause["key"], "relation": fold_mod.relation_of(member, head, link),
                       "good": member.cause["good"], "bad": member.cause["bad"], "absent": member.cause["absent"],
                       "tier": member.cause["reach"]["tier"], "score": member.cause["score"],
                       "why": member.cause["why"], "evidence": member.cause["evidence"],
                       "factors": member.cause["factors"], "reach": member.cause["reach"]})
    if folded:
        cause["folded"] = folded
    return (face.tier_order, face.signature), cause
