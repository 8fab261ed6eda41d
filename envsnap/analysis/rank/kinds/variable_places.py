"""Where an environment variable is set and seen, and what that says: the capturing shell, the measured processes'
(the TP workers') own environment, set in-process after start-up, the server's parent only, NCCL's log and its
config files. Each is a place a variable difference has (its `where`); the variable kinds (variable.py,
search_path.py, locale_setting.py) ask here for their evidence (`place_evidence`), their values as set there (`values`, for
the prior) and what they tell the other kinds (`note`).
"""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare.diff import Difference, setting_value
from envsnap.analysis.knowledge import COMMUNICATION
from envsnap.analysis.rank import domain, evidence as evidence_mod
from envsnap.analysis.rank.factors import Score
from envsnap.analysis.rank.priors import VariableValues
from envsnap.model import keys


def note(d: Difference, facts: domain.Facts) -> None:
    """Each variable by where it is set (domain.Facts.by_var): the other places' copies of one change find it."""
    if d.variable is not None:
        facts.by_var.setdefault(d.variable, {})[d.where] = d


def values(d: Difference) -> VariableValues:
    """One value per side as set here, and every value either side shows (priors.variable_prior)."""
    good, bad = _representative(d)
    return VariableValues(good, bad, _every_value(d))


def place_evidence(d: Difference, component: str, why: str, facts: domain.Facts, score: Score,
                   notes: List[str]) -> str:
    """The variable's evidence terms from where it is set and seen, and its reason. A variable a changed start-up hook
    sets is folded under the hook (rank/fold.py): its own score is not lowered for it, so the change ranks by its
    strongest face."""
    name = d.variable or ""
    places = facts.by_var.get(name, {})
    where = d.where
    if where == "workers":
        why = _workers(d, name, why, places, facts, score, notes)
    elif where == "env" and facts.workers_both:
        tp = facts.comp.good.workers_are_tp or facts.comp.bad.workers_are_tp
        own = (f"the workers' own value ({keys.worker_env_key(name)}) is what the server uses" if tp
               else f"the measured processes' own value ({keys.worker_env_key(name)}) is what ran")
        if "workers" in places:
            score.apply("shell_behind_workers", f"the capturing shell's copy: {own}")
            why += f" \u2014 {own}"
        else:
            score.apply("shell_only")
            why = (f"{name} changed only in the capturing shell: the running "
                   f"{'workers' if tp else 'measured processes'} did not see it")
    elif where == "in_process":
        why = _in_process(d, name, why, places, score, notes)
    elif where == "parent_only" and server_parent_only(d):
        why = _server_parent_only(d, name, facts, score, notes)
    elif where == "parent_only":
        value = d.bad if isinstance(d.bad, dict) else (d.good if isinstance(d.good, dict) else {})
        seen = value.get("workers")
        score.apply("parent_only_shell")
        if "workers" in places:
            score.apply("parent_only_shell_and_workers", f"the workers' own {name} change ranks it")
        why = (f"{name}={value.get('parent')} is set in the shell but the workers run with "
               f"{'it unset' if seen is None else seen}: the setting never reached them")
        notes.append("a cause candidate and a measurement trap: the shell's env is not the server's")
    elif where == "nccl_conf":
        why = _nccl_conf(d, name, why, places, score, notes)
    elif where == "nccl":
        if "workers" in places:
            score.apply("nccl_logged_with_workers")
            why = f"NCCL's log confirms the workers' {name} change (the effective setting at communicator init)"
        else:
            score.apply("nccl_logged_alone")
            why += " \u2014 as NCCL itself read it at communicator init"
    if name.startswith(("NCCL_", "TORCH_NCCL_")):
        if facts.car == "on":
            score.apply("custom_allreduce_on", facts.car_note)
            why += "; but custom all-reduce is on, so NCCL tuning matters less"
        elif facts.car == "off" and component == COMMUNICATION:
            score.apply("custom_allreduce_off", facts.car_note)
    return why


def _workers(d: Difference, name: str, why: str, places: Dict[str, Difference], facts: domain.Facts,
             score: Score, notes: List[str]) -> str:
    comp = facts.comp
    source = {"probe": "seen by the in-process probe", "proc": "from /proc/PID/environ",
              "memory": "read from memory at capture"}.get(
        comp.bad.worker_env_source or comp.good.worker_env_source, "")
    tp = comp.good.workers_are_tp or comp.bad.workers_are_tp
    who = "the TP workers'" if tp else "the measured processes'"
    why += f" \u2014 changed in {who} own environment{f' ({source})' if source else ''}"
    if d.subject.aspect == "disagree":
        why += f"; the {'workers' if tp else 'processes'} disagree with each other"
    if "nccl" in places:
        logged = places["nccl"]
        if logged.good is not None and logged.bad is not None:
            score.apply("nccl_log_confirms", f"NCCL's own log confirms it ({domain.change_text(logged)})")
        else:  # one side has no "set by environment" line: consistent, not proof
            score.apply("nccl_log_confirms", f"NCCL's own log agrees ({domain.change_text(logged)}; a missing line is "
                                             "not proof it was unset)")
    if name.startswith("NCCL_") and facts.nccl_effects:
        notes.append("NCCL's log shows the effect: " + "; ".join(facts.nccl_effects))
    if "env" in places:
        notes.append(f"also changed in the capturing shell ({domain.change_text(places['env'])})")
    if "in_process" in places:
        notes.append(f"set in-process, after start-up ({places['in_process'].key})")
    if "parent_only" in places:
        if server_parent_only(places["parent_only"]):
            notes.append(f"the server's parent process had it, the workers never saw it ({keys.parent_only_key(name)})")
        else:
            notes.append(f"the shell's value never reached the workers ({keys.parent_only_key(name)})")
    edited = facts.edited_engine()
    if name in knowledge.ENGINE_SET_ENV and edited:
        notes.append(f"{keys.integrity_key(edited)} is edited, and engine.py's _set_envs_and_config sets {name} "
                     "for the workers")
    return why


def _in_process(d: Difference, name: str, why: str, places: Dict[str, Difference], score: Score,
                notes: List[str]) -> str:
    """A variable a process set in its own os.environ after start-up (seen by the probe: start vs init/exit).

    Where the same change already shows as the workers' own environment or as the server parent's
    late setting, this key names the mechanism (who set it, in-process) and ranks below that key.
    """
    process = d.subject.entity
    who = "every probed process" if process == "*" else process
    why += f" \u2014 set in-process by {who} after start-up (os.environ): /proc/PID/environ never shows it"
    notes.append("the probe saw it change between the process's start and its later records "
                 "(init_process_group / exit)")
    for other, label in (("workers", "the workers' own environment"), ("parent_only", "the server's parent")):
        if other in places:
            score.apply("in_process_shown_elsewhere", f"the same change shows in {label} ({places[other].key}), "
                                                      "which ranks it")
            why += f"; the same change shows in {label} ({places[other].key}), which ranks it"
            break
    return why


def _nccl_conf(d: Difference, name: str, why: str, places: Dict[str, Difference], score: Score,
               notes: List[str]) -> str:
    """A setting from NCCL's own config files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf): NCCL applies
    it at its first parameter read unless the environment sets the variable (NVIDIA/nccl
    src/misc/param.cc: setenv(name, value, 0)), and no environment, /proc or probe record shows it."""
    files = sorted({str(v["file"]) for v in (d.good, d.bad) if isinstance(v, dict) and v.get("file")})
    why += f" — set by NCCL's config file {' / '.join(files)}: invisible in every environment"
    notes.append("NCCL reads NCCL_CONF_FILE (else ~/.nccl.conf), then /etc/nccl.conf; a variable in the "
                 "environment overrides the file (NCCL src/misc/param.cc)")
    if "nccl" in places:
        score.apply("nccl_log_confirms", f"NCCL's own log confirms it ({domain.change_text(places['nccl'])})")
    for other in ("workers", "env"):
        if other in places:
            notes.append(f"the environment's {name} changed too ({places[other].key}): where it is set, it wins")
            break
    return why


def server_parent_only(d: Difference) -> bool:
    """Is this workers.parent_only.X about the server's own parent process (not the capturing shell)?"""
    return any(isinstance(v, dict) and v.get("in") == "server" for v in (d.good, d.bad))


def _server_parent_only(d: Difference, name: str, facts: domain.Facts, score: Score, notes: List[str]) -> str:
    """The headline case: the server's parent set NAME (in-process, after the TP workers started), the
    workers never saw it. When the other side's workers did run with that value, this is the mechanism
    behind the workers' env change, so it ranks above workers.env.NAME itself."""
    comp = facts.comp
    flagged, other = ("bad", "good") if isinstance(d.bad, dict) and d.bad.get("in") == "server" else ("good", "bad")
    fview, oview = (comp.bad, comp.good) if flagged == "bad" else (comp.good, comp.bad)
    value = d.bad if flagged == "bad" else d.good
    parent = value.get("parent") if isinstance(value, dict) else None
    info = fview.parent_only_info.get(name) or {}
    if info.get("late"):
        why = (f"{name}={parent} set in the parent after the workers started: the TP workers never saw it "
               f"(parent: {info.get('process', '?')})")
    else:
        why = (f"{name}={parent} is in the server's parent process ({info.get('process', '?')}), but the TP "
               "workers never saw it: removed before they started")
    notes.extend(evidence_mod.parent_only_evidence(fview, name, flagged))
    notes.append(evidence_mod.worker_sightings(oview, name, other))
    notes.append(evidence_mod.nccl_sightings(name, [(flagged, fview), (other, oview)]))
    other_envs = [env for env, _ in oview.worker_views.values()]
    if other_envs and all(env.get(name) == parent for env in other_envs):
        score.apply("server_parent_explains", f"{other}'s TP workers did run with {name}={parent}: this is what "
                                              "changed for them")
    elif "workers" in facts.by_var.get(name, {}):
        notes.append(f"the workers' {name} differs between good and bad too")
    else:
        score.apply("server_parent_trap")
        why += f"; {other}'s workers did not run with it either, so it is a measurement trap more than the change"
    # NCCL's log corroborates when it read the value on the other side and not on the flagged one.
    franks, oranks = fview.nccl_rank_env or {}, oview.nccl_rank_env or {}
    if oranks and franks and all(env.get(name) == parent for env in oranks.values()) \
            and all(env.get(name) != parent for env in franks.values()):
        score.apply("nccl_log_corroborates_parent", f"NCCL read {name}={parent} on {other} and not on {flagged}")
    edited = facts.edited_engine()
    if (name in knowledge.ENGINE_SET_ENV or info.get("late")) and edited:
        notes.append(f"{keys.integrity_key(edited)} is edited: the launcher's environment handling lives there, "
                     "a likely place for this os.environ change")
    return why


def _representative(d: Difference) -> Tuple[Any, Any]:
    """One value per side of a variable's difference (the value before and after an in-process change, the
    first worker's where the workers disagree)."""
    good, bad = setting_value(d.subject, d.good), setting_value(d.subject, d.bad)
    if d.where == "in_process":
        good = good.get("start") if isinstance(good, dict) else good
        after = (bad or {}).get("after") if isinstance(bad, dict) else None
        bad = after[-1] if after else bad
    elif d.where == "parent_only":
        good = good.get("parent") if isinstance(good, dict) else good
        bad = bad.get("parent") if isinstance(bad, dict) else bad
    if d.subject.aspect == "disagree":
        good, bad = _one_value(good), _one_value(bad)
    return good, bad


def _every_value(d: Difference) -> List[Any]:
    """Every value the difference shows on either side (each worker's, the shell's and the workers', before and
    after an in-process change; None for unset)."""
    out: List[Any] = []
    for side in (d.good, d.bad):
        value = setting_value(d.subject, side)
        if not isinstance(value, dict):
            out.append(value)
        elif d.where == "parent_only":
            out.extend(v for k, v in value.items() if k in ("parent", "workers") and v != "mixed")
        elif d.where == "in_process":
            out.append(value.get("start"))
            out.extend(value.get("after") or [])
        else:  # workers that disagree: {worker: value}
            out.extend(value.values())
    return out



def _one_value(value: Any) -> Any:
    """A representative value of a per-instance dict (workers that disagree): the first set one."""
    if isinstance(value, dict):
        return next((v for _, v in sorted(value.items()) if v is not None), None)
    return value
