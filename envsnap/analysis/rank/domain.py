"""Domain knowledge about the inference stack, as factors (factors.py) and reasons of a cause.

Environment: a variable the server's parent set after its TP workers started (so they never saw it)
ranks first; the workers' own environment outranks the capturing shell's; NCCL's log corroborates (a
missing log line is never read as "unset"); SGLang's custom all-reduce makes NCCL tuning matter less.
Code: an edited engine.py explains worker environment changes; edits and versions on the decode hot path
outrank others; start-up hooks that mention a changed variable rank higher; a checkout runs when it is an
editable install or a measured process ran its code (running.py), and does not when the measured processes
are known to have run elsewhere.

Every function takes the difference, the shared `Facts` and the cause's `Score` (factors applied there,
each with its evidence) and `notes` (evidence lines that move nothing), and returns the cause's reason.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Set, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import diff as diff_mod, patch_status
from envsnap.analysis.knowledge import COMMUNICATION, KERNELS
from envsnap.analysis.rank import evidence as evidence_mod, hook_effects as hook_effects_mod, hunks, running as running_mod
from envsnap.analysis.rank.checkouts import checkout_roles, file_kind, score_checkout
from envsnap.analysis.rank.factors import HOT_PATH_EDIT_PRIOR, HOT_PATH_PACKAGE_PRIOR, STARTUP_MENTION_SHARE, Score
from envsnap.analysis.rank.priors import rule_source
from envsnap.model import keys
from envsnap.model.names import canonical_name, is_compiled_file

ENGINE_PY = "sglang/srt/entrypoints/engine.py"


class Facts:
    """What the domain rules look at across all differences of one comparison."""

    def __init__(self, comp: diff_mod.Comparison, diffs: List[diff_mod.Difference],
                 running: Optional[running_mod.Running] = None) -> None:
        self.comp = comp
        self.running = running or running_mod.Running()
        # Variables the observations rule out (reach tier "cannot" on every key: causes.py sets it after a first
        # pass), and a test of whether a variable's part of the stack is out of play (context.py): a start-up
        # hook's mentions count only for variables in play.
        self.ruled_out: Set[str] = set()
        self.out_of_play: Callable[[str], bool] = lambda name: False
        self.by_var: Dict[str, Dict[str, diff_mod.Difference]] = {}
        for d in diffs:
            if d.variable is not None:
                self.by_var.setdefault(d.variable, {})[d.where] = d
        self.workers_both = bool(comp.good.workers) and bool(comp.bad.workers)
        self.car, self.car_note = custom_allreduce(comp)
        self.integrity = {d.subject.entity: d for d in diffs if d.where == "integrity"}
        self.dirty = [d for d in diffs if d.where == "git" and d.subject.aspect == "dirty"]
        # Files whose change a recorded patch's hunk shows (rank/hunks.twins): their own causes defer to it.
        self.hunk_twins = hunks.twins(comp, diffs) if any(d.where == patch_status.CATEGORY for d in diffs) else {}
        # Variables a changed start-up hook sets (it mentions them and writes os.environ): the hook is their cause.
        # Where the snapshot holds the hook's text, what its code assigns (hook_effects.py); else every name it
        # mentions, when it writes os.environ at all.
        self.hook_sets: Dict[str, str] = {}
        for d in diffs:
            if d.category != "startup":
                continue
            for value, view in ((d.good, comp.good), (d.bad, comp.bad)):
                if not isinstance(value, dict):
                    continue
                found = hook_effects_mod.hook_effects(view.source, d.subject.entity)
                names = found.sets if found is not None else (
                    _mentions(value) if value.get("touches_env") else [])
                for name in names:
                    self.hook_sets.setdefault(str(name), d.subject.entity)
        self.worker_nccl_vars = sorted(n for n, places in self.by_var.items()
                                       if n.startswith("NCCL_") and "workers" in places)
        self.nccl_effects = [f"{d.subject.entity} {diff_mod.display(d.subject, d.good)} \u2192 "
                             f"{diff_mod.display(d.subject, d.bad)}"
                             for d in diffs if d.where == "nccl" and d.variable is None
                             and (d.subject.entity in ("algorithms", "protocols")
                                  or d.subject.entity.startswith(("transports", "channel_counts.nvls")))]

    def edited_engine(self) -> Optional[str]:
        return next((rel for rel in self.integrity if rel.endswith(ENGINE_PY)), None)


def custom_allreduce(comp: diff_mod.Comparison) -> Tuple[Optional[str], str]:
    """'on' / 'off' / None: does SGLang's custom all-reduce carry decode all-reduces (bad side)?"""
    states: List[Optional[str]] = []
    for view in (comp.good, comp.bad):
        disabled = view.values["sglang"].get(keys.sglang_arg_key("disable_custom_all_reduce"))
        tp = view.values["sglang"].get(keys.sglang_arg_key("tp_size"))
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


def change_text(d: diff_mod.Difference) -> str:
    return f"good {d.side_text('good')} \u2192 bad {d.side_text('bad')}"


# ---------------------------------------------------------------- environment variables

def score_variable(d: diff_mod.Difference, component: str, why: str, facts: Facts, score: Score,
                   notes: List[str]) -> str:
    name = d.variable or ""
    places = facts.by_var.get(name, {})
    where = d.where
    hook = facts.hook_sets.get(name)
    if hook is not None and where in ("env", "workers", "in_process"):
        score.apply("set_by_changed_hook", f"the start-up hook {hook}, itself changed, names it and writes "
                                           "os.environ: the hook's difference ranks it")
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


def _workers(d: diff_mod.Difference, name: str, why: str, places: Dict[str, diff_mod.Difference], facts: Facts,
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
            score.apply("nccl_log_confirms", f"NCCL's own log confirms it ({change_text(logged)})")
        else:  # one side has no "set by environment" line: consistent, not proof
            score.apply("nccl_log_confirms", f"NCCL's own log agrees ({change_text(logged)}; a missing line is "
                                             "not proof it was unset)")
    if name.startswith("NCCL_") and facts.nccl_effects:
        notes.append("NCCL's log shows the effect: " + "; ".join(facts.nccl_effects))
    if "env" in places:
        notes.append(f"also changed in the capturing shell ({change_text(places['env'])})")
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


def _in_process(d: diff_mod.Difference, name: str, why: str, places: Dict[str, diff_mod.Difference], score: Score,
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


def _nccl_conf(d: diff_mod.Difference, name: str, why: str, places: Dict[str, diff_mod.Difference], score: Score,
               notes: List[str]) -> str:
    """A setting from NCCL's own config files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf): NCCL applies
    it at its first parameter read unless the environment sets the variable (NVIDIA/nccl
    src/misc/param.cc: setenv(name, value, 0)), and no environment, /proc or probe record shows it."""
    files = sorted({str(v["file"]) for v in (d.good, d.bad) if isinstance(v, dict) and v.get("file")})
    why += f" — set by NCCL's config file {' / '.join(files)}: invisible in every environment"
    notes.append("NCCL reads NCCL_CONF_FILE (else ~/.nccl.conf), then /etc/nccl.conf; a variable in the "
                 "environment overrides the file (NCCL src/misc/param.cc)")
    if "nccl" in places:
        score.apply("nccl_log_confirms", f"NCCL's own log confirms it ({change_text(places['nccl'])})")
    for other in ("workers", "env"):
        if other in places:
            notes.append(f"the environment's {name} changed too ({places[other].key}): where it is set, it wins")
            break
    return why


def server_parent_only(d: diff_mod.Difference) -> bool:
    """Is this workers.parent_only.X about the server's own parent process (not the capturing shell)?"""
    return any(isinstance(v, dict) and v.get("in") == "server" for v in (d.good, d.bad))


def _server_parent_only(d: diff_mod.Difference, name: str, facts: Facts, score: Score, notes: List[str]) -> str:
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


# ---------------------------------------------------------------- code

def score_integrity(d: diff_mod.Difference, rule: knowledge.FieldRule, component: str, why: str, facts: Facts,
                    score: Score, notes: List[str]) -> Tuple[str, str]:
    """(component, why) of an installed file that differs from pip's RECORD."""
    rel = d.subject.entity
    value = d.bad if isinstance(d.bad, dict) else (d.good if isinstance(d.good, dict) else {})
    dist = str(value.get("dist") or "")
    if rule.pattern == keys.INTEGRITY_ANY and canonical_name(dist) in knowledge.HOT_PATH_PACKAGES:
        score.set_prior(HOT_PATH_EDIT_PRIOR, f"an edited file of a hot-path package ({rule_source(rule)}, raised)")
        component, why = KERNELS, f"an edited file of {dist}, which runs on the hot path"
    if dist:
        why += f" ({dist})"
    state = value.get("state", "modified")
    if state == "rewritten":
        score.apply("rewritten_script")
        why = f"console-script wrapper rewritten by the installer ({dist}): rarely matters"
    elif is_compiled_file(rel) and state in ("missing", "modified"):
        component, why = _compiled_file(rel, dist, state, rule, component, why, score)
        notes.extend(_build_lists(facts, dist, rel))
    else:
        found = file_kind(rel)
        if found is not None and found[1] != 1.0:
            score.apply("file_kind", f"a {found[0]} file", value=found[1])
    if state == "modified" and value.get("recorded_sha256"):
        notes.append(f"pip RECORD sha256 {str(value.get('recorded_sha256'))[:12]}, on disk "
                     f"{str(value.get('actual_sha256'))[:12]}")
    if rel.endswith(ENGINE_PY):
        names = [n for n in knowledge.ENGINE_SET_ENV
                 if "workers" in facts.by_var.get(n, {}) or "nccl" in facts.by_var.get(n, {})]
        if names:
            score.apply("engine_sets_changed_env",
                        f"the workers' {', '.join(names)} changed, and engine.py's _set_envs_and_config sets these "
                        "for the workers (sglang 0.5.5 srt/entrypoints/engine.py:676, 0.5.23 "
                        "srt/entrypoints/engine.py:1878): the likely mechanism")
    for dirty in facts.dirty:
        if dirty.subject.item == rel or dirty.subject.item.endswith("/" + rel):
            notes.append(f"the same file is modified in a checkout ({dirty.key}): who edited it")
            break
    hunk = facts.hunk_twins.get(("integrity", rel))
    if hunk:
        score.apply("shown_by_hunk", f"{hunk} shows this edit hunk by hunk, and ranks it")
    return component, why


def _compiled_file(rel: str, dist: str, state: str, rule: knowledge.FieldRule, component: str, why: str,
                   score: Score) -> Tuple[str, str]:
    """A compiled file (extension module, shared library) RECORD lists that is gone or replaced: the
    knowledge table's prior for that (knowledge.MISSING_COMPILED / REPLACED_COMPILED) where no rule about the
    file's own place says more, and what it does to the program."""
    missing = state == "missing"
    loss = knowledge.MISSING_COMPILED if missing else knowledge.REPLACED_COMPILED
    if loss.prior > score.prior:
        table = "knowledge.MISSING_COMPILED" if missing else "knowledge.REPLACED_COMPILED"
        score.set_prior(loss.prior, f"a compiled file {'gone' if missing else 'replaced'} ({table})")
    if rule.pattern == keys.INTEGRITY_ANY and component != KERNELS and loss.component:
        component = loss.component  # no rule places the file: its fallback runs where the loss says
    return component, f"{loss.why} ({dist or rel})"


def _build_lists(facts: Facts, dist: str, rel: str) -> List[str]:
    """What the distribution's build record (same version on both sides) says of a compiled file."""
    builds = [(view.values["packages"].get(keys.package_key(canonical_name(dist))) or {}).get("build")
              for view in (facts.comp.good, facts.comp.bad)]
    build = builds[0]
    if not isinstance(build, dict) or build != builds[1]:
        return []
    if rel in (build.get("compiled_files") or []):
        return [f"{dist}'s build ({knowledge.build_summary(build)}) lists it, the same build on both sides: "
                "the install lost it"]
    return []


def score_package(d: diff_mod.Difference, rule: knowledge.FieldRule, component: str, why: str,
                  score: Score, notes: List[str]) -> Tuple[str, str]:
    name = d.subject.entity
    if rule.pattern == keys.package_key("*") and name in knowledge.HOT_PATH_PACKAGES:
        score.set_prior(HOT_PATH_PACKAGE_PRIOR, f"a hot-path package ({rule_source(rule)}, raised)")
        component, why = KERNELS, f"{name} runs on the decode hot path"
    good = d.good if isinstance(d.good, dict) else {}
    bad = d.bad if isinstance(d.bad, dict) else {}
    if d.change != "changed" or good.get("version") != bad.get("version"):
        return component, why
    found = knowledge.build_change(good.get("build"), bad.get("build"))
    if found is None:
        score.apply("same_version_other_origin")
        return component, why + " (same version, different origin)"
    # Another build of the same version (views.comparable_builds): the knowledge table's prior for that
    # kind of change, unless the package's own rule says more.
    change = found.change
    if change.prior > score.prior:
        score.set_prior(change.prior, f"same version, another build: {change.label} (knowledge.BUILD_CHANGES)")
    if change.component and component != KERNELS:
        component = change.component
    notes.extend(found.evidence)
    if good.get("origin") != bad.get("origin"):
        notes.append("installed from another origin too (the build says what changed)")
    return component, f"same version, another build: {found.text} — {change.why}"


def _mentions(hook: Dict[str, diff_mod.ViewValue]) -> List[str]:
    """The variable names a start-up hook's record says its text mentions (a list in a well-formed snapshot)."""
    found = hook.get("env_mentions")
    return [str(name) for name in found] if isinstance(found, list) else []


def score_startup(d: diff_mod.Difference, component: str, why: str, facts: Facts, score: Score,
                  notes: List[str]) -> Tuple[str, str]:
    mentions: Set[str] = set()
    touches = False
    for value in (d.good, d.bad):
        if isinstance(value, dict):
            mentions.update(_mentions(value))
            touches = touches or bool(value.get("touches_env"))
    changed = sorted((mentions & set(facts.by_var)) - facts.ruled_out)
    relevant = sorted(m for m in mentions if knowledge.is_performance_variable(m) and m not in facts.ruled_out
                      and not facts.out_of_play(m))
    idle = sorted(m for m in mentions if (m in facts.by_var or knowledge.is_performance_variable(m))
                  and (m in facts.ruled_out or facts.out_of_play(m)))
    if idle:
        notes.append(f"it mentions {', '.join(idle)}, which the observations rule out here: not counted")
    if changed:
        score.apply("startup_mentions_changed", f"mentions {', '.join(changed)}, which differ(s) between good and bad")
    if relevant:
        strongest = max(relevant, key=lambda m: knowledge.rule_for_variable(m).weight)
        mentioned = STARTUP_MENTION_SHARE * knowledge.rule_for_variable(strongest).weight
        if mentioned > score.prior:
            score.set_prior(mentioned, f"{STARTUP_MENTION_SHARE:g} x the {strongest} rule it mentions")
        why += f"; it mentions {', '.join(relevant)}"
    if touches:
        notes.append("sets os.environ at start-up: invisible in /proc/PID/environ, only the probe sees it")
        if changed:
            # It acts through the variables it sets: their part of the system is where it acts.
            strongest = max(changed, key=lambda m: knowledge.rule_for_variable(m).weight)
            component = knowledge.rule_for_variable(strongest).component
    return component, why


def score_git(d: diff_mod.Difference, facts: Facts, score: Score, notes: List[str]) -> None:
    repo = d.subject.entity
    score_checkout(repo, checkout_roles(facts.comp, repo), facts.running, score, notes)
    if d.subject.aspect == "dirty":
        rel = d.subject.item
        for irel in facts.integrity:
            if rel.endswith(irel):
                notes.append(f"the installed copy is edited too ({keys.integrity_key(irel)})")
                break
        hunk = facts.hunk_twins.get(("git", repo, rel))
        if hunk:
            score.apply("shown_by_hunk", f"{hunk} shows this edit hunk by hunk, and ranks it")


def shadowed_why(d: diff_mod.Difference, why: str) -> str:
    """What the probe's module list showed: which process loaded which file in place of the library."""
    name = keys.aspect_parts(d.subject.aspect)[1]
    sides = [(side, value) for side, value in (("GOOD", d.good), ("BAD", d.bad)) if isinstance(value, dict)]
    if not sides:
        return why
    side, value = sides[-1]
    library = "standard library's" if value.get("kind") == "stdlib" else "installed"
    where = "on both sides" if len(sides) == 2 else f"on {side} only"
    return (f"{d.subject.entity} imported {name} from {value.get('file')} instead of the {library} "
            f"{value.get('instead_of')} ({where}, the probe's module list): that file ran in the library's place")


def library_why(d: diff_mod.Difference, why: str, score: Score) -> str:
    """What the maps showed: which process mapped which file for the object, on each side."""
    process, name = d.subject.entity, d.subject.aspect
    if keys.run_process_name(process) is not None and (d.good is None or d.bad is None):
        score.apply("maps_sampled", "the benchmark command's processes were read while they ran: an object "
                                    "mapped after the last read is not seen")
    who = keys.run_process_words(process)
    good, bad = diff_mod.display(d.subject, d.good), diff_mod.display(d.subject, d.bad)
    if d.good is None:
        return f"{who} maps {name} from {bad} on BAD, not on GOOD: {why}"
    if d.bad is None:
        return f"{who} maps {name} from {good} on GOOD, not on BAD: {why}"
    return f"{who} maps {name} from {bad} on BAD instead of {good}: {why}"
