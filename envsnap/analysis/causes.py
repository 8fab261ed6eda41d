"""Ranking: which differences most likely caused the change in the metric, and why.

Three ingredients (pure functions, no I/O):
  1. the knowledge table (envsnap.knowledge): a prior weight and the component of the
     inference stack each kind of difference acts on;
  2. domain logic: a variable the server's parent set after its TP workers started (so they
     never saw it) ranks first, the workers' own environment outranks the capturing shell's,
     NCCL's log corroborates (a missing log line is never read as "unset"), SGLang's custom
     all-reduce makes NCCL tuning matter less, an edited engine.py explains worker env changes,
     start-up hooks that mention a changed variable...;
  3. evidence from runs: the verdict (medians, spread, Mann-Whitney, bootstrap) and the
     EAGLE-3 decomposition (throughput ~ accept length / cycle time), which weights the
     verify-side or the drafter-side components.

score = 1 - exp(-2.3 * prior * factors): 0..1, monotone in the evidence; a plain prior of
0.3 scores 0.5, a strong, corroborated communication difference on the verify side ~0.9.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.analysis import diff as diff_mod
from envsnap.analysis import evidence as evidence_mod
from envsnap.analysis import knowledge
from envsnap.analysis import nodes as nodes_mod
from envsnap.analysis.knowledge import (
    COMMUNICATION,
    CPU_HOST,
    DRAFTER,
    GRAPHS,
    KERNELS,
    MEMORY,
    NONE,
)
from envsnap.analysis.verdict import worse
from envsnap.model.names import canonical_name

SCORE_SCALE = 2.3

# EAGLE-3: which components explain a slower verify step vs a worse drafter.
SIDE_WEIGHTS = {
    "verify": {COMMUNICATION: 1.0, KERNELS: 1.0, GRAPHS: 1.0, MEMORY: 0.6, CPU_HOST: 0.6, DRAFTER: 0.35, NONE: 0.5},
    "drafter": {DRAFTER: 1.0, KERNELS: 0.55, GRAPHS: 0.5, COMMUNICATION: 0.5, MEMORY: 0.5, CPU_HOST: 0.5, NONE: 0.5},
}


# ---------------------------------------------------------------- causes

class _Ctx:
    """What the domain rules look at across all differences."""

    def __init__(self, comp: diff_mod.Comparison, verdict: Dict[str, Any]) -> None:
        self.comp = comp
        self.diffs = [d for d in comp.differences if not d.volatile]
        self.by_var: Dict[str, Dict[str, diff_mod.Difference]] = {}
        for d in self.diffs:
            if d.variable is not None:
                self.by_var.setdefault(d.variable, {})[d.where] = d
        self.workers_both = bool(comp.good.workers) and bool(comp.bad.workers)
        decomposition = verdict.get("decomposition") or {}
        self.side = decomposition.get("side")
        self.evidence_factor = _evidence_factor(verdict)
        self.car, self.car_note = _custom_allreduce(comp)
        self.integrity = {d.subject.entity: d for d in self.diffs if d.where == "integrity"}
        self.dirty = [d for d in self.diffs if d.where == "git" and d.subject.aspect == "dirty"]
        self.worker_nccl_vars = sorted(n for n, places in self.by_var.items()
                                       if n.startswith("NCCL_") and "workers" in places)
        self.nccl_effects = [f"{d.subject.entity} {diff_mod.display(d.subject, d.good)} \u2192 "
                             f"{diff_mod.display(d.subject, d.bad)}"
                             for d in self.diffs if d.where == "nccl" and d.variable is None
                             and (d.subject.entity in ("algorithms", "protocols")
                                  or d.subject.entity.startswith(("transports", "channel_counts.nvls")))]


def _evidence_factor(verdict: Dict[str, Any]) -> float:
    """How much the runs say 'something got worse' (scales every cause alike)."""
    if not verdict.get("metric"):
        return 0.8
    entry = {"change_pct": verdict.get("change_pct"), "direction": verdict.get("direction")}
    if not worse(entry):
        return 0.6
    if verdict.get("significant"):
        return 1.0
    return 0.85


def _custom_allreduce(comp: diff_mod.Comparison) -> Tuple[Optional[str], str]:
    """'on' / 'off' / None: does SGLang's custom all-reduce carry decode all-reduces (bad side)?"""
    states = []
    for view in (comp.good, comp.bad):
        disabled = view.values["sglang"].get("sglang.args.disable_custom_all_reduce")
        tp = view.values["sglang"].get("sglang.args.tp_size")
        if disabled is None and tp is None:
            states.append(None)
        elif disabled:
            states.append("off")
        elif isinstance(tp, int) and tp in (2, 4, 6, 8):
            # sglang 0.5.5 distributed/device_communicators/custom_all_reduce.py:55: world sizes 2,4,6,8
            states.append("on")
        else:
            states.append("off")
    bad_state = states[1] if states[1] is not None else states[0]
    if bad_state == "on":
        return "on", ("SGLang's custom all-reduce is on (tp_size in 2/4/6/8), and it carries the small decode "
                      "all-reduces on NVLink boxes, so NCCL tuning matters less (mostly prefill)")
    if bad_state == "off":
        which = "on both sides" if states[0] == states[1] == "off" else "in bad"
        return "off", (f"custom all-reduce is disabled {which} (disable_custom_all_reduce), so decode "
                       "all-reduces go through NCCL: NCCL settings act on every decode step")
    return None, ""


def _change_text(d: diff_mod.Difference) -> str:
    return f"good {d.side_text('good')} \u2192 bad {d.side_text('bad')}"


def _score(d: diff_mod.Difference, ctx: _Ctx) -> Tuple[float, str, str, List[str]]:
    """(raw score, component, why, evidence) of one difference."""
    rule = knowledge.rule_for(d.base_key)
    prior, component = rule.weight, rule.component
    why = rule.why or f"{d.key} changed"
    evidence: List[str] = [_change_text(d)]
    factor = 1.0
    if d.variable is not None:
        factor, why = _score_var(d, d.where, d.variable, why, evidence, ctx)
        nccl_var = d.variable.startswith(("NCCL_", "TORCH_NCCL_"))
        if nccl_var and ctx.car == "on":
            factor *= 0.6
            why += "; but custom all-reduce is on, so NCCL tuning matters less"
            evidence.append(ctx.car_note)
        elif nccl_var and ctx.car == "off" and component == COMMUNICATION:
            factor *= 1.1
            evidence.append(ctx.car_note)
    elif d.category == "integrity":
        prior, component, why, factor = _score_integrity(d, rule, prior, component, why, evidence, ctx)
    elif d.where == "packages":
        name = d.subject.entity
        if rule.pattern == "packages.*" and name in knowledge.HOT_PATH_PACKAGES:
            prior, component, why = 0.5, KERNELS, f"{name} runs on the decode hot path"
        gv = (d.good or {}).get("version") if isinstance(d.good, dict) else None
        bv = (d.bad or {}).get("version") if isinstance(d.bad, dict) else None
        if d.change == "changed" and gv == bv:
            factor *= 0.7
            why += " (same version, different origin)"
    elif d.category == "startup":
        prior, factor, why = _score_startup(d, prior, why, evidence, ctx)
    elif d.category == "git":
        factor, why = _score_git(d, why, evidence, ctx)
    elif d.category == "nccl" and ctx.worker_nccl_vars:
        # What NCCL logged it did (algorithms, protocols, channels) follows from the settings it read.
        factor *= 0.5
        why += f" \u2014 an effect of the workers' {', '.join(ctx.worker_nccl_vars)} change, as NCCL logged it"
    elif d.where == "gpu" and d.subject.entity == "*":
        evidence.append("the same change on every GPU")
    elif d.where == "section":
        why = "a section was captured on one side only: what it holds cannot be compared"
    node = d.subject.node
    if node == nodes_mod.EVERY_NODE:
        evidence.append("the same change on every node compared")
    elif node and "," in node:
        evidence.append(f"the same change on nodes {node.replace(',', ', ')}")
    side_factor = SIDE_WEIGHTS.get(ctx.side or "", {}).get(component, 1.0)
    if ctx.side in SIDE_WEIGHTS and component != NONE:
        if side_factor < 1.0:
            evidence.append(f"{component} is not on the {ctx.side} side the EAGLE-3 decomposition points at")
        else:
            evidence.append(f"fits the {ctx.side} side of the EAGLE-3 decomposition ({component})")
    raw = prior * factor * side_factor * ctx.evidence_factor
    return raw, component, why, evidence


def _score_var(d: diff_mod.Difference, where: str, name: str, why: str, evidence: List[str], ctx: _Ctx
               ) -> Tuple[float, str]:
    places = ctx.by_var.get(name, {})
    factor = 1.0
    if where == "workers":
        source = {"probe": "seen by the in-process probe", "proc": "from /proc/PID/environ"}.get(
            ctx.comp.bad.worker_env_source or ctx.comp.good.worker_env_source, "")
        why += f" \u2014 changed in the TP workers' own environment{f' ({source})' if source else ''}"
        if d.subject.aspect == "disagree":
            why += "; the workers disagree with each other"
        if "nccl" in places:
            factor *= 1.3
            logged = places["nccl"]
            if logged.good is not None and logged.bad is not None:
                evidence.append(f"NCCL's own log confirms it ({_change_text(logged)})")
            else:  # one side has no "set by environment" line: consistent, not proof
                evidence.append(f"NCCL's own log agrees ({_change_text(logged)}; a missing line is not proof "
                                "it was unset)")
        if name.startswith("NCCL_") and ctx.nccl_effects:
            evidence.append("NCCL's log shows the effect: " + "; ".join(ctx.nccl_effects))
        if "env" in places:
            evidence.append(f"also changed in the capturing shell ({_change_text(places['env'])})")
        if "in_process" in places:
            evidence.append(f"set in-process, after start-up ({places['in_process'].key})")
        if "parent_only" in places:
            if _server_parent_only(places["parent_only"]):
                evidence.append("the server's parent process had it, the workers never saw it "
                                f"(workers.parent_only.{name})")
            else:
                evidence.append("the shell's value never reached the workers (workers.parent_only." + name + ")")
        if name in knowledge.ENGINE_SET_ENV:
            edited = [rel for rel in ctx.integrity if rel.endswith("sglang/srt/entrypoints/engine.py")]
            if edited:
                evidence.append(f"integrity.{edited[0]} is edited, and engine.py's _set_envs_and_config sets "
                                f"{name} for the workers")
    elif where == "env":
        if ctx.workers_both:
            if "workers" in places:
                factor *= 0.5
                why += f" \u2014 the workers' own value (workers.env.{name}) is what the server uses"
            else:
                factor *= 0.2
                why = f"{name} changed only in the capturing shell: the running workers did not see it"
    elif where == "in_process":
        factor, why = _score_in_process(d, name, why, evidence, places)
    elif where == "parent_only" and _server_parent_only(d):
        factor, why = _score_server_parent_only(d, name, evidence, ctx)
    elif where == "parent_only":
        value = d.bad if isinstance(d.bad, dict) else (d.good if isinstance(d.good, dict) else {})
        seen = value.get("workers")
        factor *= 0.6 * (0.6 if "workers" in places else 1.0)
        why = (f"{name}={value.get('parent')} is set in the shell but the workers run with "
               f"{'it unset' if seen is None else seen}: the setting never reached them")
        evidence.append("a cause candidate and a measurement trap: the shell's env is not the server's")
    elif where == "nccl":
        if "workers" in places:
            factor *= 0.5
            why = f"NCCL's log confirms the workers' {name} change (the effective setting at communicator init)"
        else:
            factor *= 1.1
            why += " \u2014 as NCCL itself read it at communicator init"
    return factor, why


def _score_in_process(d: diff_mod.Difference, name: str, why: str, evidence: List[str],
                      places: Dict[str, diff_mod.Difference]) -> Tuple[float, str]:
    """A variable a process set in its own os.environ after start-up (seen by the probe: start vs init/exit).

    Where the same change already shows as the workers' own environment or as the server parent's
    late setting, this key names the mechanism (who set it, in-process) and ranks below that key.
    """
    process = d.subject.entity
    who = "every probed process" if process == "*" else process
    why += f" \u2014 set in-process by {who} after start-up (os.environ): /proc/PID/environ never shows it"
    evidence.append("the probe saw it change between the process's start and its later records "
                    "(init_process_group / exit)")
    factor = 1.0
    for other, label in (("workers", "the workers' own environment"), ("parent_only", "the server's parent")):
        if other in places:
            factor *= 0.4
            why += f"; the same change shows in {label} ({places[other].key}), which ranks it"
            break
    return factor, why


def _server_parent_only(d: diff_mod.Difference) -> bool:
    """Is this workers.parent_only.X about the server's own parent process (not the capturing shell)?"""
    return any(isinstance(v, dict) and v.get("in") == "server" for v in (d.good, d.bad))


def _score_server_parent_only(d: diff_mod.Difference, name: str, evidence: List[str], ctx: _Ctx
                              ) -> Tuple[float, str]:
    """The headline case: the server's parent set NAME (in-process, after the TP workers started), the
    workers never saw it. When the other side's workers did run with that value, this is the mechanism
    behind the workers' env change, so it ranks above workers.env.NAME itself."""
    comp = ctx.comp
    flagged, other = ("bad", "good") if isinstance(d.bad, dict) and d.bad.get("in") == "server" else ("good", "bad")
    fview, oview = (comp.bad, comp.good) if flagged == "bad" else (comp.good, comp.bad)
    value = d.bad if flagged == "bad" else d.good
    parent = value.get("parent")
    info = fview.parent_only_info.get(name) or {}
    if info.get("late"):
        why = (f"{name}={parent} set in the parent after the workers started: the TP workers never saw it "
               f"(parent: {info.get('process', '?')})")
    else:
        why = (f"{name}={parent} is in the server's parent process ({info.get('process', '?')}), but the TP "
               "workers never saw it: removed before they started")
    evidence.extend(evidence_mod.parent_only_evidence(fview, name, flagged))
    evidence.append(evidence_mod.worker_sightings(oview, name, other))
    nccl_line = evidence_mod.nccl_sightings(name, [(flagged, fview), (other, oview)])
    evidence.append(nccl_line)
    other_envs = [env for env, _ in oview.worker_views.values()]
    factor = 1.0
    if other_envs and all(env.get(name) == parent for env in other_envs):
        factor *= 1.2
        evidence.append(f"{other}'s TP workers did run with {name}={parent}: this is what changed for them")
    elif "workers" in ctx.by_var.get(name, {}):
        evidence.append(f"the workers' {name} differs between good and bad too")
    else:
        factor *= 0.4
        why += f"; {other}'s workers did not run with it either, so it is a measurement trap more than the change"
    # NCCL's log corroborates when it read the value on the other side and not on the flagged one.
    franks, oranks = fview.nccl_rank_env or {}, oview.nccl_rank_env or {}
    if oranks and franks and all(env.get(name) == parent for env in oranks.values()) \
            and all(env.get(name) != parent for env in franks.values()):
        factor *= 1.3
    if name in knowledge.ENGINE_SET_ENV or info.get("late"):
        edited = [rel for rel in ctx.integrity if rel.endswith("sglang/srt/entrypoints/engine.py")]
        if edited:
            evidence.append(f"integrity.{edited[0]} is edited: the launcher's environment handling lives there, "
                            "a likely place for this os.environ change")
    return factor, why


def _score_integrity(d: diff_mod.Difference, rule: knowledge.FieldRule, prior: float, component: str, why: str,
                     evidence: List[str], ctx: _Ctx) -> Tuple[float, str, str, float]:
    rel = d.subject.entity
    value = d.bad if isinstance(d.bad, dict) else (d.good if isinstance(d.good, dict) else {})
    dist = str(value.get("dist") or "")
    factor = 1.0
    if rule.pattern == "integrity.*" and canonical_name(dist) in knowledge.HOT_PATH_PACKAGES:
        prior, component, why = 0.6, KERNELS, f"an edited file of {dist}, which runs on the hot path"
    if dist:
        why += f" ({dist})"
    state = value.get("state", "modified")
    if state == "rewritten":
        factor *= 0.3
        why = f"console-script wrapper rewritten by the installer ({dist}): rarely matters"
    elif state == "modified" and value.get("recorded_sha256"):
        evidence.append(f"pip RECORD sha256 {str(value.get('recorded_sha256'))[:12]}, on disk "
                        f"{str(value.get('actual_sha256'))[:12]}")
    if rel.endswith("sglang/srt/entrypoints/engine.py"):
        names = [n for n in knowledge.ENGINE_SET_ENV
                 if "workers" in ctx.by_var.get(n, {}) or "nccl" in ctx.by_var.get(n, {})]
        if names:
            factor *= 1.3
            evidence.append(f"the workers' {', '.join(names)} changed, and engine.py's _set_envs_and_config "
                            "sets these for the workers (sglang 0.5.5 srt/entrypoints/engine.py:676, 0.5.23 "
                            "srt/entrypoints/engine.py:1878): the likely mechanism")
    for dirty in ctx.dirty:
        if dirty.subject.item == rel or dirty.subject.item.endswith("/" + rel):
            evidence.append(f"the same file is modified in a checkout ({dirty.key}): who edited it")
            break
    return prior, component, why, factor


def _score_startup(d: diff_mod.Difference, prior: float, why: str, evidence: List[str], ctx: _Ctx
                   ) -> Tuple[float, float, str]:
    mentions: Set[str] = set()
    touches = False
    for value in (d.good, d.bad):
        if isinstance(value, dict):
            mentions.update(str(m) for m in value.get("env_mentions") or [])
            touches = touches or bool(value.get("touches_env"))
    factor = 1.0
    changed = sorted(mentions & set(ctx.by_var))
    relevant = sorted(m for m in mentions if knowledge.is_performance_variable(m))
    if changed:
        factor *= 1.6
        evidence.append(f"mentions {', '.join(changed)}, which differ(s) between good and bad")
    if relevant:
        prior = max(prior, 0.8 * max(knowledge.rule_for(f"env.{m}").weight for m in relevant))
        why += f"; it mentions {', '.join(relevant)}"
    if touches:
        evidence.append("sets os.environ at start-up: invisible in /proc/PID/environ, only the probe sees it")
    return prior, factor, why


def _score_git(d: diff_mod.Difference, why: str, evidence: List[str], ctx: _Ctx) -> Tuple[float, str]:
    repo = d.subject.entity
    factor = 1.0
    roles: Set[str] = set()
    for view in (ctx.comp.good, ctx.comp.bad):
        roles.update(str(r) for r in view.values["git"].get(f"git.{repo}.roles") or [])
    editable = sorted(r.split(":", 1)[1] for r in roles if r.startswith("editable:"))
    hot = [e for e in editable if canonical_name(e) in knowledge.HOT_PATH_PACKAGES]
    if hot:
        factor *= 2.0
        evidence.append(f"this checkout is the installed {hot[0]} (editable): its changes run")
    elif editable:
        factor *= 1.3
        evidence.append(f"this checkout is the installed {editable[0]} (editable)")
    elif roles:
        factor *= 0.8
        evidence.append(f"this checkout is not what runs (roles: {', '.join(sorted(roles))})")
    if d.subject.aspect == "dirty":
        rel = d.subject.item
        for irel in ctx.integrity:
            if rel.endswith(irel):
                evidence.append(f"the installed copy is edited too (integrity.{irel})")
                break
    return factor, why


def rank_causes(comp: diff_mod.Comparison, verdict: Dict[str, Any]) -> List[Dict[str, Any]]:
    # Node by node (one part for single-node snapshots): the domain rules read the views of the node a
    # difference was found on. A difference merged over several nodes keeps its best-supported score.
    best: Dict[int, Tuple[float, diff_mod.Difference, str, str, List[str]]] = {}
    for part in comp.node_parts():
        ctx = _Ctx(part, verdict)
        for d in ctx.diffs:
            raw, component, why, evidence = _score(d, ctx)
            if id(d) not in best or raw > best[id(d)][0]:
                best[id(d)] = (raw, d, component, why, evidence)
    scored = list(best.values())
    scored.sort(key=lambda t: (-round(t[0], 9), t[1].key))
    causes = []
    for index, (raw, d, component, why, evidence) in enumerate(scored, 1):
        causes.append({"rank": index, "key": d.key, "category": d.category, "component": component,
                       "score": round(1.0 - math.exp(-SCORE_SCALE * raw), 3),
                       "good": diff_mod.display(d.subject, d.good), "bad": diff_mod.display(d.subject, d.bad),
                       "change": d.change, "absent": d.absent, "why": why, "evidence": evidence,
                       **d.subject.to_json()})
    return causes
