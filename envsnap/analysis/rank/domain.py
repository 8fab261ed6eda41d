"""Domain knowledge about the inference stack, as factors (factors.py) and reasons of a cause.

`Facts`: what the differences of one comparison tell each other (each kind notes its part: kinds.note), and
whether SGLang's custom all-reduce carries the decode all-reduces. A variable's places (the shell, the workers,
in-process, the server's parent, NCCL's log and config files) are its kinds' (kinds/variable_places.py).
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
from envsnap.analysis.compare import diff as diff_mod
from envsnap.analysis.knowledge import KERNELS
from envsnap.analysis.rank import running as running_mod
from envsnap.analysis.rank.checkouts import checkout_roles, file_kind, score_checkout
from envsnap.analysis.rank.factors import HOT_PATH_EDIT_PRIOR, HOT_PATH_PACKAGE_PRIOR, STARTUP_MENTION_SHARE, Score
from envsnap.analysis.rank.priors import rule_source
from envsnap.model import keys
from envsnap.model.names import canonical_name, is_compiled_file

ENGINE_PY = "sglang/srt/entrypoints/engine.py"


class Facts:
    """What the domain rules look at across all differences of one comparison.

    Built empty from the comparison; each difference's kind then notes what it tells the others (kinds.note:
    the variables by where they are set, the edited installed files, the checkouts' dirty files, the files a
    recorded patch's hunk shows, what a changed start-up hook sets, what NCCL's log shows it did)."""

    def __init__(self, comp: diff_mod.Comparison, running: Optional[running_mod.Running] = None) -> None:
        self.comp = comp
        self.running = running or running_mod.Running()
        # Variables the observations rule out (reach tier "cannot" on every key: causes.py sets it after a first
        # pass), and a test of whether a variable's part of the stack is out of play (context.py): a start-up
        # hook's mentions count only for variables in play.
        self.ruled_out: Set[str] = set()
        self.out_of_play: Callable[[str], bool] = lambda name: False
        self.by_var: Dict[str, Dict[str, diff_mod.Difference]] = {}  # {name: {where it is set: difference}}
        self.workers_both = bool(comp.good.workers) and bool(comp.bad.workers)
        self.car, self.car_note = custom_allreduce(comp)
        self.integrity: Dict[str, diff_mod.Difference] = {}  # {installed file: its difference}
        self.dirty: List[diff_mod.Difference] = []  # the checkouts' changed files
        # Files whose change a recorded patch's hunk shows (rank/hunks.twin_of): their own causes defer to it.
        self.hunk_twins: Dict[Tuple[str, ...], str] = {}
        # Variables a changed start-up hook sets (it mentions them and writes os.environ): the hook is their cause.
        self.hook_sets: Dict[str, str] = {}
        self.nccl_effects: List[str] = []  # what NCCL's log shows it did differently, one line each

    @property
    def worker_nccl_vars(self) -> List[str]:
        """The NCCL variables that changed in the workers' own environment."""
        return sorted(n for n, places in self.by_var.items() if n.startswith("NCCL_") and "workers" in places)

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


def hook_mentions(hook: Dict[str, diff_mod.ViewValue]) -> List[str]:
    """The variable names a start-up hook's record says its text mentions (a list in a well-formed snapshot)."""
    found = hook.get("env_mentions")
    return [str(name) for name in found] if isinstance(found, list) else []


def score_startup(d: diff_mod.Difference, component: str, why: str, facts: Facts, score: Score,
                  notes: List[str]) -> Tuple[str, str]:
    mentions: Set[str] = set()
    touches = False
    for value in (d.good, d.bad):
        if isinstance(value, dict):
            mentions.update(hook_mentions(value))
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
