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

import json
import math
from typing import Any, Dict, List, Optional, Sequence, Set, Tuple

from envsnap import diff as diff_mod
from envsnap import knowledge, metrics, stats
from envsnap.distributions import canonical_name
from envsnap.errors import EnvsnapError
from envsnap.knowledge import COMMUNICATION, CPU_HOST, DRAFTER, GRAPHS, KERNELS, MEMORY, NONE

SCHEMA_VERSION = 1
SCORE_SCALE = 2.3
# Relative change below which accept length "holds" / cycle time "holds" (benchmark noise).
HOLD_PCT = 5.0

# EAGLE-3: which components explain a slower verify step vs a worse drafter.
SIDE_WEIGHTS = {
    "verify": {COMMUNICATION: 1.0, KERNELS: 1.0, GRAPHS: 1.0, MEMORY: 0.6, CPU_HOST: 0.6, DRAFTER: 0.35, NONE: 0.5},
    "drafter": {DRAFTER: 1.0, KERNELS: 0.55, GRAPHS: 0.5, COMMUNICATION: 0.5, MEMORY: 0.5, CPU_HOST: 0.5, NONE: 0.5},
}
SIDE_COMPONENTS = {
    "verify": "communication, attention/kernels, CUDA graphs, driver/clocks",
    "drafter": "draft model, speculative_* args, model files, hidden-state capture patches",
}


# ---------------------------------------------------------------- runs and verdict

def run_values(snap: Dict[str, Any]) -> Dict[str, List[float]]:
    """Metric name -> values of the successful runs (failed runs are never measurements)."""
    out: Dict[str, List[float]] = {}
    for run in snap.get("runs") or []:
        if not isinstance(run, dict) or run.get("ok") is False:
            continue
        for name, value in (run.get("metrics") or {}).items():
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                out.setdefault(str(name), []).append(float(value))
    return out


def choose_metric(available: Sequence[Dict[str, List[float]]], requested: Optional[str],
                  labels: Sequence[str]) -> Optional[str]:
    """--metric, else the throughput-role metric present everywhere, else the first common one."""
    common = sorted(set.intersection(*(set(a) for a in available))) if available else []
    if requested:
        missing = [label for label, a in zip(labels, available) if requested not in a]
        if missing:
            have = ", ".join(sorted(set().union(*(set(a) for a in available)))) or "none"
            raise EnvsnapError(f"metric {requested!r} is not in the runs of {', '.join(missing)} "
                               f"(metrics found: {have})")
        return requested
    for name in common:
        if metrics.role(name) == "throughput":
            return name
    for name in common:  # names like "gen_throughput_tok_s" that role() does not list
        if "throughput" in name.lower():
            return name
    return common[0] if common else None


def _metric_entry(name: str, a: List[float], b: List[float], overrides: Optional[Dict[str, str]] = None,
                  bootstrap: bool = True) -> Dict[str, Any]:
    cmp = stats.compare(a, b, bootstrap=bootstrap)
    return {"direction": metrics.direction(name, overrides), "good": cmp["good"], "bad": cmp["bad"],
            "change_pct": cmp["change_pct"], "significant": cmp["significant"], "p_value": cmp["p_value"],
            "method": cmp["method"], "_beyond_noise": cmp["beyond_noise"]}


def unit(name: str) -> str:
    lowered = name.lower()
    if "throughput" in lowered or lowered.endswith(("tok_s", "tokens_per_s")):
        return " tok/s"
    if lowered.endswith(("per_s", "per_sec", "_per_second")):
        return "/s"
    if lowered.endswith("_ms") or lowered in ("itl", "tpot", "ttft"):
        return " ms"
    if lowered.endswith(("_s", "_sec", "_seconds")):
        return " s"
    return ""


def fmt_num(value: Optional[float]) -> str:
    if value is None:
        return "?"
    if abs(value) >= 1000:
        return f"{value:.0f}"
    return f"{value:.3g}"


def fmt_pct(change: Optional[float]) -> str:
    if change is None:
        return "n/a"
    sign = "\u2212" if change < 0 else "+"
    magnitude = abs(change)
    return f"{sign}{magnitude:.1f}%" if magnitude < 1 else f"{sign}{magnitude:.0f}%"


def _first_with_role(names: Sequence[str], role: str, order: Sequence[str]) -> Optional[str]:
    candidates = [n for n in names if metrics.role(n) == role]
    rank = {n: i for i, n in enumerate(order)}
    candidates.sort(key=lambda n: (rank.get(n.lower(), len(rank)), n))
    return candidates[0] if candidates else None


def decompose(entries: Dict[str, Dict[str, Any]], main: Optional[str]) -> Tuple[Optional[Dict[str, Any]], str]:
    """EAGLE-3: throughput ~ accept length / cycle time. Returns (decomposition, short text)."""
    names = sorted(entries)
    acc = _first_with_role(names, "accept_length", metrics.ACCEPT_LENGTH_NAMES)
    cyc = _first_with_role(names, "cycle_time", metrics.CYCLE_TIME_NAMES)
    if acc is None and cyc is None:
        return None, ""

    def part(name: Optional[str]) -> Optional[Dict[str, Any]]:
        if name is None:
            return None
        e = entries[name]
        change = e["change_pct"]
        return {"metric": name, "good": e["good"]["median"], "bad": e["bad"]["median"], "change_pct": change,
                "holds": change is not None and abs(change) < HOLD_PCT}

    a, c = part(acc), part(cyc)
    acc_falls = a is not None and a["change_pct"] is not None and a["change_pct"] <= -HOLD_PCT
    acc_holds = a is not None and a["holds"]
    cyc_grows = c is not None and c["change_pct"] is not None and c["change_pct"] >= HOLD_PCT
    main_worse = False
    if main and main in entries and entries[main]["change_pct"] is not None:
        change = entries[main]["change_pct"]
        main_worse = change < 0 if entries[main]["direction"] == metrics.HIGHER else change > 0
    bits = []
    if a is not None:
        verb = "holds" if acc_holds else ("falls" if acc_falls else "rises")
        bits.append(f"accept length {verb} ({fmt_num(a['good'])} \u2192 {fmt_num(a['bad'])})")
    if c is not None:
        cname = "verify" if "verify" in c["metric"] else "cycle"
        bits.append(f"{cname} {fmt_num(c['good'])} \u2192 {fmt_num(c['bad'])}{unit(c['metric'])}")
    if a is not None and c is not None:
        side = ("verify" if acc_holds and cyc_grows else "drafter" if acc_falls and not cyc_grows
                else "both" if acc_falls and cyc_grows else "unclear")
    elif a is not None:
        side = "drafter" if acc_falls else ("verify" if acc_holds and main_worse else "unclear")
    else:
        side = "verify" if cyc_grows and "verify" in c["metric"] else "unclear"
    if side == "verify":
        explanation = ("accepted tokens per cycle held while each cycle got slower: the verify step (target "
                       f"model forward) is where time went; weighting {SIDE_COMPONENTS['verify']}")
    elif side == "drafter":
        explanation = ("fewer draft tokens are accepted per cycle: the drafter side changed; weighting "
                       f"{SIDE_COMPONENTS['drafter']}")
    elif side == "both":
        explanation = "accept length fell and cycles got slower: both the drafter and the verify step changed"
    else:
        explanation = "accept length and cycle time do not single out the drafter or the verify step"
    short = ", ".join(bits) + (f": {side} side" if side in ("verify", "drafter") else
                               (": both sides" if side == "both" else ""))
    return {"accept_length": a, "cycle_time": c, "side": side, "explanation": explanation}, short


def build_verdict(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str] = None
                  ) -> Tuple[Dict[str, Any], List[str]]:
    gv, bv = run_values(good), run_values(bad)
    warnings: List[str] = []
    for side, snap in (("good", good), ("bad", bad)):
        runs = [r for r in snap.get("runs") or [] if isinstance(r, dict)]
        failed = [r for r in runs if r.get("ok") is False]
        if failed:
            warnings.append(f"{len(failed)} of {len(runs)} runs failed in {side}; failed runs are not counted")
    if metric is None and (not gv or not bv):
        empty = stats.describe([])
        missing = " and ".join(s for s, v in (("good", gv), ("bad", bv)) if not v)
        warnings.append(f"no successful runs in {missing}: causes are ranked by prior knowledge only "
                        "(measure with `envsnap run`)")
        return ({"metric": None, "direction": metrics.HIGHER, "good": empty, "bad": empty, "change_pct": None,
                 "significant": False, "p_value": None, "method": "no data",
                 "summary": f"NO RUNS in {missing}: differences ranked by prior knowledge only",
                 "metrics": {}, "decomposition": None}, warnings)
    main = choose_metric([gv, bv], metric, ["good", "bad"])
    common = sorted(set(gv) & set(bv))
    # `envsnap run/attach --direction NAME=higher|lower` stores overrides in the snapshot.
    overrides: Dict[str, str] = {}
    for snap in (good, bad):
        stored = snap.get("metric_directions")
        if isinstance(stored, dict):
            overrides.update({str(k): v for k, v in stored.items() if v in (metrics.HIGHER, metrics.LOWER)})
    # The bootstrap interval (the costly part) for the metrics the verdict line is made of.
    key_metrics = {main, _first_with_role(common, "accept_length", metrics.ACCEPT_LENGTH_NAMES),
                   _first_with_role(common, "cycle_time", metrics.CYCLE_TIME_NAMES)}
    entries = {name: _metric_entry(name, gv[name], bv[name], overrides, bootstrap=name in key_metrics)
               for name in common}
    if main is None:
        empty = stats.describe([])
        warnings.append("good and bad have no metric in common: the regression cannot be quantified")
        return ({"metric": None, "direction": metrics.HIGHER, "good": empty, "bad": empty, "change_pct": None,
                 "significant": False, "p_value": None, "method": "no data",
                 "summary": "NO COMMON METRIC: differences ranked by prior knowledge only",
                 "metrics": {n: _public(e) for n, e in entries.items()}, "decomposition": None}, warnings)
    decomposition, short = decompose(entries, main)
    e = entries[main]
    summary = _summary(main, e, short)
    if decomposition is not None and decomposition["accept_length"] is not None:
        acc = decomposition["accept_length"]["metric"]
        parsers = {p for snap in (good, bad) for r in snap.get("runs") or [] if isinstance(r, dict)
                   for p in (r.get("parsers") or [])}
        if any("bench_serving" in str(p) for p in parsers):
            warnings.append(f"{acc} from bench_serving is the server's running average since start, not this "
                            "run's alone: restart the server between measurements for a clean number")
    verdict = {"metric": main, "direction": e["direction"], "good": e["good"], "bad": e["bad"],
               "change_pct": e["change_pct"], "significant": e["significant"], "p_value": e["p_value"],
               "method": e["method"], "summary": summary,
               "metrics": {n: _public(x) for n, x in entries.items()}, "decomposition": decomposition}
    return verdict, warnings


def _public(entry: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in entry.items() if not k.startswith("_")}


def _worse(entry: Dict[str, Any]) -> bool:
    change = entry.get("change_pct")
    if change is None:
        return False
    return change < 0 if entry.get("direction") == metrics.HIGHER else change > 0


def _summary(name: str, e: Dict[str, Any], short: str) -> str:
    worse = _worse(e)
    if e["significant"]:
        kind = "REGRESSION" if worse else "IMPROVEMENT"
    elif e["_beyond_noise"]:
        kind = "POSSIBLE REGRESSION" if worse else "POSSIBLE IMPROVEMENT"
    else:
        kind = "NO SIGNIFICANT CHANGE"
    g, b = e["good"], e["bad"]
    noise = "beyond noise" if e["_beyond_noise"] else "within noise"
    text = (f"{kind} {name} {fmt_num(g['median'])} \u2192 {fmt_num(b['median'])}{unit(name)} "
            f"({fmt_pct(e['change_pct'])}, {stats.format_p(e['p_value'])}, {noise}")
    if not e["significant"] and stats.min_achievable_p(g["n"], b["n"]) >= 0.05:
        text += f"; n={g['n']} vs {b['n']}: too few runs for a test"
    text += ")"
    if short:
        text += "; " + short
    return text


# ---------------------------------------------------------------- causes

class _Ctx:
    """What the domain rules look at across all differences."""

    def __init__(self, comp: diff_mod.Comparison, verdict: Dict[str, Any]) -> None:
        self.comp = comp
        self.diffs = [d for d in comp.differences if not d.volatile]
        self.by_var: Dict[str, Dict[str, diff_mod.Difference]] = {}
        for d in self.diffs:
            found = diff_mod.var_name(d.key)
            if found:
                self.by_var.setdefault(found[1], {})[found[0]] = d
        self.workers_both = bool(comp.good.workers) and bool(comp.bad.workers)
        decomposition = verdict.get("decomposition") or {}
        self.side = decomposition.get("side")
        self.evidence_factor = _evidence_factor(verdict)
        self.car, self.car_note = _custom_allreduce(comp)
        self.repos = sorted({k[4:] for v in (comp.good, comp.bad) for k in v.presence if k.startswith("git.")},
                            key=len, reverse=True)
        self.integrity = {d.key[len("integrity."):]: d for d in self.diffs if d.category == "integrity"}
        self.dirty = [d for d in self.diffs if d.category == "git" and ".dirty." in d.key]
        self.worker_nccl_vars = sorted(n for n, places in self.by_var.items()
                                       if n.startswith("NCCL_") and "workers" in places)
        self.nccl_effects = [f"{d.key[5:]} {diff_mod.display(d.key, d.good)} \u2192 {diff_mod.display(d.key, d.bad)}"
                             for d in self.diffs if d.key in ("nccl.algorithms", "nccl.protocols")
                             or d.key.startswith(("nccl.transports", "nccl.channel_counts.nvls"))]


def _evidence_factor(verdict: Dict[str, Any]) -> float:
    """How much the runs say 'something got worse' (scales every cause alike)."""
    if not verdict.get("metric"):
        return 0.8
    entry = {"change_pct": verdict.get("change_pct"), "direction": verdict.get("direction")}
    if not _worse(entry):
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
    g, b = diff_mod.display(d.key, d.good), diff_mod.display(d.key, d.bad)
    absent = {"integrity": "as installed", "git": "clean", "startup": "absent",
              "nccl": "not logged"}.get(d.category, "unset")  # no log line is no proof of "unset"
    if ".parent_only." in d.key:
        absent = "none"
    return f"good {absent if g is None else g} \u2192 bad {absent if b is None else b}"


def _score(d: diff_mod.Difference, ctx: _Ctx) -> Tuple[float, str, str, List[str]]:
    """(raw score, component, why, evidence) of one difference."""
    rule = knowledge.rule_for(d.key)
    prior, component = rule.weight, rule.component
    why = rule.why or f"{d.key} changed"
    evidence: List[str] = [_change_text(d)]
    factor = 1.0
    var = diff_mod.var_name(d.key)
    if var:
        factor, why = _score_var(d, var[0], var[1], why, evidence, ctx)
        nccl_var = var[1].startswith(("NCCL_", "TORCH_NCCL_"))
        if nccl_var and ctx.car == "on":
            factor *= 0.6
            why += "; but custom all-reduce is on, so NCCL tuning matters less"
            evidence.append(ctx.car_note)
        elif nccl_var and ctx.car == "off" and component == COMMUNICATION:
            factor *= 1.1
            evidence.append(ctx.car_note)
    elif d.category == "integrity":
        prior, component, why, factor = _score_integrity(d, rule, prior, component, why, evidence, ctx)
    elif d.category == "packages" and d.key.startswith("packages."):
        name = d.key[len("packages."):]
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
    elif d.category == "gpu" and ".*." in d.key:
        evidence.append("the same change on every GPU")
    elif d.key.endswith(".status"):
        why = "a section was captured on one side only: what it holds cannot be compared"
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
        if ".disagree." in d.key:
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
    evidence.extend(diff_mod.parent_only_evidence(fview, name, flagged))
    evidence.append(diff_mod.worker_sightings(oview, name, other))
    nccl_line = diff_mod.nccl_sightings(name, [(flagged, fview), (other, oview)])
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
    rel = d.key[len("integrity."):]
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
                            "sets these for the workers (sglang 0.5.5 entrypoints/engine.py:676): the likely "
                            "mechanism")
    for dirty in ctx.dirty:
        if dirty.key.endswith("/" + rel) or dirty.key.endswith("." + rel):
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
    relevant = sorted(m for m in mentions if diff_mod._relevant_var(m))
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
    repo = next((r for r in ctx.repos if d.key.startswith(f"git.{r}.") or d.key == f"git.{r}"), None)
    factor = 1.0
    if repo is None:
        return factor, why
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
    if ".dirty." in d.key:
        rel = d.key.split(".dirty.", 1)[1]
        for irel in ctx.integrity:
            if rel.endswith(irel):
                evidence.append(f"the installed copy is edited too (integrity.{irel})")
                break
    return factor, why


def rank_causes(comp: diff_mod.Comparison, verdict: Dict[str, Any]) -> List[Dict[str, Any]]:
    ctx = _Ctx(comp, verdict)
    scored = []
    for d in ctx.diffs:
        raw, component, why, evidence = _score(d, ctx)
        scored.append((raw, d, component, why, evidence))
    scored.sort(key=lambda t: (-round(t[0], 9), t[1].key))
    causes = []
    for index, (raw, d, component, why, evidence) in enumerate(scored, 1):
        causes.append({"rank": index, "key": d.key, "category": d.category, "component": component,
                       "score": round(1.0 - math.exp(-SCORE_SCALE * raw), 3),
                       "good": diff_mod.display(d.key, d.good), "bad": diff_mod.display(d.key, d.bad),
                       "why": why, "evidence": evidence})
    return causes


# ---------------------------------------------------------------- the whole analysis

def _meta(snap: Dict[str, Any], path: Optional[str]) -> Dict[str, Any]:
    return {"label": snap.get("label"), "host": snap.get("host"), "created": snap.get("created"),
            "file": path, "provenance": snap.get("provenance")}


def analyze(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str] = None, include_volatile: bool = False,
            good_file: Optional[str] = None, bad_file: Optional[str] = None,
            top: Optional[int] = None) -> Dict[str, Any]:
    """The diff/rank result (the shape `envsnap diff --format json` prints)."""
    verdict, run_warnings = build_verdict(good, bad, metric)
    comp = diff_mod.compare(good, bad)
    causes = rank_causes(comp, verdict)
    if top is not None:
        causes = causes[:max(0, top)]
    differences = [d.to_json() for d in comp.differences if include_volatile or not d.volatile]
    warnings = list(comp.warnings) + run_warnings
    for side, snap in (("good", good), ("bad", bad)):
        prov = snap.get("provenance")
        if isinstance(prov, dict) and prov.get("kind") == "illustrative":
            warnings.append(f"{side} is illustrative: {prov.get('note', 'not a measurement')}")
    return {"schema_version": SCHEMA_VERSION, "good": _meta(good, good_file), "bad": _meta(bad, bad_file),
            "verdict": verdict, "causes": causes, "differences": differences,
            "warnings": _dedupe(warnings)}


def build_result(good: Dict[str, Any], bad: Dict[str, Any], *, good_file: Optional[str] = None,
                 bad_file: Optional[str] = None, metric: Optional[str] = None, include_volatile: bool = False,
                 top: Optional[int] = None) -> Dict[str, Any]:
    """Keyword-only alias of analyze() (the name envsnap.report calls)."""
    return analyze(good, bad, metric=metric, include_volatile=include_volatile, good_file=good_file,
                   bad_file=bad_file, top=top)


def _dedupe(items: List[str]) -> List[str]:
    seen: Set[str] = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def count_hidden(result: Dict[str, Any]) -> int:
    return sum(1 for d in result["differences"] if d.get("volatile"))


# ---------------------------------------------------------------- N snapshots: association

def associate(snaps: Sequence[Dict[str, Any]], files: Sequence[str], metric: Optional[str] = None
              ) -> Dict[str, Any]:
    """Rank every key that varies across N >= 3 snapshots by its association with the metric."""
    if len(snaps) < 3:
        raise EnvsnapError(f"rank needs at least 3 snapshots with runs, got {len(snaps)} "
                           "(use `envsnap diff GOOD BAD` for two)")
    values = [run_values(s) for s in snaps]
    empty = [f for f, v in zip(files, values) if not v]
    if empty:
        raise EnvsnapError(f"no successful runs in {', '.join(empty)}: rank needs measured snapshots "
                           "(`envsnap run` or `envsnap attach`)")
    name = choose_metric(values, metric, list(files))
    if name is None:
        raise EnvsnapError("the snapshots have no metric in common; name one with --metric")
    overrides: Dict[str, str] = {}
    for s in snaps:
        stored = s.get("metric_directions")
        if isinstance(stored, dict):
            overrides.update({str(k): v for k, v in stored.items() if v in (metrics.HIGHER, metrics.LOWER)})
    medians = [stats.median(v[name]) for v in values]
    usable = diff_mod.usable_sections(list(snaps))
    views = [diff_mod.build_view(s, usable) for s in snaps]
    keys: Dict[str, str] = {}
    for view in views:
        for category, key in diff_mod.iter_keys(view):
            keys.setdefault(key, category)
    items = []
    for key in sorted(keys):
        raw = [_lookup(view, keys[key], key) for view in views]
        labels = [json.dumps(v, sort_keys=True, default=str) for v in raw]
        if len(set(labels)) < 2:
            continue  # constant everywhere: says nothing
        flats = sorted({f for view in views for f in view.flats.get(key, ())})
        if knowledge.is_volatile(key) or (flats and all(knowledge.is_volatile(f) for f in flats)):
            continue
        eta2, p, method = stats.permutation_association(labels, medians)
        groups: Dict[str, List[float]] = {}
        shown: Dict[str, Any] = {}
        for label, value, m in zip(labels, raw, medians):
            groups.setdefault(label, []).append(m)
            shown[label] = diff_mod.display(key, value)
        overall = stats.median(medians)
        group_medians = {label: stats.median(ms) for label, ms in groups.items()}
        spread = max(group_medians.values()) - min(group_medians.values())
        effect_pct = round(spread / abs(overall) * 100.0, 2) if overall else None
        ordered = sorted(group_medians.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [f"{'unset' if shown[l] is None else shown[l]}: {fmt_num(m)}{unit(name)} (n={len(groups[l])})"
                 for l, m in ordered[:4]]
        rule = knowledge.rule_for(key)
        items.append({"key": key, "category": keys[key], "component": rule.component,
                      "score": round(eta2, 3), "effect_pct": effect_pct, "p_value": round(p, 4), "method": method,
                      "values": [diff_mod.display(key, v) for v in raw],
                      "why": f"{name} median by value \u2014 " + "; ".join(parts),
                      "_sort": (-round(eta2, 6), p, -rule.weight, key)})
    items.sort(key=lambda it: it["_sort"])
    for index, item in enumerate(items, 1):
        item.pop("_sort")
        item["rank"] = index
    snapshots = [{"file": f, "label": s.get("label"), "host": s.get("host"), "created": s.get("created"),
                  "median": stats._r(m), "n": len(v[name])} for f, s, v, m in zip(files, snaps, values, medians)]
    warnings = []
    floor = min((it["p_value"] for it in items), default=1.0)
    if len(snaps) < 5:
        warnings.append(f"{len(snaps)} snapshots: the smallest possible permutation p-value is large "
                        f"(best here {floor:.2g}); treat the order as a hint, not proof")
    return {"schema_version": SCHEMA_VERSION, "metric": name, "direction": metrics.direction(name, overrides),
            "snapshots": snapshots, "associations": items, "warnings": warnings}


def _lookup(view: diff_mod.View, category: str, key: str) -> Any:
    return view.values[category].get(key)
