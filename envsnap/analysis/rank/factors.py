"""The knowledge table's named factors: every number that moves a cause's score besides its prior.

A cause's score is 1 - exp(-SCORE_SCALE * prior * f1 * f2 * ...): the prior comes from the field rules
(analysis/knowledge) or, for a difference no rule names, from what it looks like (priors.py); each factor is
one entry below, applied where its evidence holds, and listed in the cause's evidence with its value
("x0.1 out of context: no GPU captured on either side"). No number that moves a score lives anywhere
else: a factor is changed here, with its reason, or not at all.

`Score` accumulates one cause's prior and factors, and says them as evidence lines and JSON.
"""
from __future__ import annotations

import json
import math
import os
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from envsnap.analysis.knowledge import COMMUNICATION, CPU_HOST, DRAFTER, GRAPHS, KERNELS, MEMORY, NONE

# score = 1 - exp(-SCORE_SCALE * raw): 0..1 and monotone; a raw 0.3 scores 0.5, a raw 1.0 scores 0.9.
SCORE_SCALE = 2.3


class Factor(NamedTuple):
    name: str
    value: float
    why: str  # what the evidence is and what it stands on


FACTORS: Dict[str, Factor] = {f.name: f for f in [
    # ---- what the runs say overall (every cause alike: it moves scores, never the order) ----
    Factor("runs_significant", 1.0, "the runs show a significant change of the metric"),
    Factor("runs_beyond_noise", 0.85, "the runs moved the bad way, but no test confirms it"),
    Factor("runs_not_worse", 0.6, "the runs did not get worse: a cause of a regression is less likely"),
    Factor("no_runs", 0.8, "no runs to compare: the ranking rests on the snapshots alone"),

    # ---- context (analysis/rank/context.py): is the part of the stack the rule acts on in play? ----
    # A rule for a part that is not there cannot act (NCCL without a GPU, SGLang where it is not installed).
    Factor("out_of_context", 0.1, "the part of the stack it acts on is absent from both snapshots"),
    # The part could be there but no process was seen using it (GPU present, no process initialised NCCL).
    Factor("not_seen_in_play", 0.25, "no measured process was seen using the part of the stack it acts on"),

    # ---- who read it (views.env_read_evidence: the probe's per-process read counts, NCCL's log lines) ----
    Factor("read_by_process", 2.0, "a measured process read it: the change reached running code"),
    # A flag or argument on a measured process's own command line reaches its code as surely as a variable it read:
    # a program parses its whole command line at start-up (argparse, getopt_long reject what they do not know).
    Factor("on_command_line", 2.0, "a measured process was started with it: programs parse their command line"),
    Factor("not_read", 0.3, "read tracking was on and no measured process read it, and no C library is known "
                            "to read it (knowledge.NATIVE_READERS)"),
    # The code that ran (libraries section: each mapped shared object's strings; start-up hooks' text): a variable
    # whose name is a string in a library the measured processes loaded can be read there with getenv(3).
    Factor("readable_by_loaded_code", 1.5, "its name is a string in a library the measured processes mapped: that "
                                           "code can read it"),
    # Only a start-up hook's text names it: text says it could act, as a rule does; what the hook itself changes is
    # judged as the hook (kinds/startup_hook.py).
    Factor("named_by_startup_hook", 1.5, "its name is in the text of a start-up hook the measured processes ran"),
    # Every mapped object scanned, hooks read, Python reads tracked through the runs, and no one mentions the name:
    # nothing that ran can have read it (unless its name is built at run time, which no string scan sees).
    Factor("not_in_loaded_code", 0.2, "no code the measured processes loaded mentions its name, and their Python "
                                      "reads are known: it cannot have acted"),

    # ---- the mechanism (analysis/runs/mechanism.py: GOOD's and BAD's run telemetry compared) ----
    Factor("mechanism_matches", 1.5, "its component is one the runs' mechanism implicates (mechanism.MECHANISMS)"),
    Factor("mechanism_contradicts", 0.4, "its component is one the runs' mechanism argues against"),
    # ---- neighbours (analysis/compare/neighbours.py): other processes, or other virtual machines, beside the work ----
    # Measured while the benchmark ran (measure/neighbours.py) is an observation of the runs themselves, as
    # strong as a process reading a variable; seen at capture only, it may not have overlapped the runs.
    # Being there is not yet taking anything: whether it took the work's CPU is the mechanism's to say (below).
    Factor("neighbour_measured", 1.5, "the runs measured it beside the benchmark, more on the side that got worse"),
    Factor("neighbour_at_capture", 0.7, "seen at capture only: it may not have been there while the runs ran"),
    # The runs' own counters are what a neighbour acts through: with them all held it took nothing from the work.
    Factor("neighbour_no_effect", 0.3, "it took nothing the work waited for: BAD's machine (or the CPUs the work may "
                                       "use) had CPUs to spare, it ran on other CPUs than the work's, the runs' CPUs "
                                       "kept busy and wall held with a spread smaller than the share it took, or the "
                                       "runs lost no CPU while the mechanism found the time in their own work or waits"),
    # ---- the profiler traces (analysis/runs/trace_diff.py: GOOD's and BAD's traces compared per step) ----
    # A trace names the part of the step that grew (kernels, collectives, copies, launches, CPU ops) directly:
    # stronger than the run counters' mechanism, which infers it.
    Factor("trace_implicates", 1.6, "its component's time per step grew in the profiler traces"),
    Factor("trace_held", 0.5, "the profiler traces measured its component and it held while another grew"),
    # knowledge.SERIES_LINKS: a setting that acts through a run counter (thread pools, CPU sets).
    Factor("series_moved", 1.5, "the run counter it acts through moved the same way between GOOD and BAD"),
    Factor("series_held", 0.2, "the run counter it acts through held between GOOD and BAD: it did not act here"),
    # A thread pool sized by a setting adds or removes that many threads: a peak that moved by far less moved for
    # another reason (observed.py; SERIES_SHORT_SHARE below).
    Factor("series_moved_short", 0.4, "the run counter moved, by much less than this setting would have moved it"),

    # ---- EAGLE-3 decomposition (eagle3.py: throughput ~ accept length / cycle time) ----
    # Which components explain a slower verify step, and which a worse drafter (value per component below).
    Factor("eagle3_side", 1.0, "how well its component fits the side the EAGLE-3 decomposition points at"),

    # ---- the workers' own environment vs the shell's (views.py: worker views, parent-only keys) ----
    # NCCL logs a variable only when it reads it ("X set by environment to Y"): the strongest corroboration.
    Factor("nccl_log_confirms", 1.3, "NCCL's own log shows the workers' value (NCCL env page, NCCL_DEBUG=INFO)"),
    Factor("shell_behind_workers", 0.5, "the capturing shell's copy; the workers' own value is what the server uses"),
    Factor("shell_only", 0.2, "changed only in the capturing shell: the running workers did not see it"),
    # analysis/rank/kinds/command_line.py: SGLang's server flag and the server argument the running server reports are one
    # change; the server argument (sglang.args.X, capture/collectors/sglang.py) ranks it.
    Factor("shown_as_server_arg", 0.4, "the same change shows as SGLang's server argument, which ranks it"),
    Factor("in_process_shown_elsewhere", 0.4, "the same change shows as the workers' own environment, which ranks it"),
    Factor("parent_only_shell", 0.6, "the shell's value is not the one the workers run with: a measurement trap first"),
    Factor("parent_only_shell_and_workers", 0.6, "the workers' own change of the same variable ranks it"),
    Factor("server_parent_explains", 1.2, "the other side's workers ran with the parent's value: this is what "
                                          "changed for them"),
    Factor("server_parent_trap", 0.4, "neither side's workers ran with it: a measurement trap more than the change"),
    Factor("nccl_log_corroborates_parent", 1.3, "NCCL read the parent's value on one side only"),
    Factor("nccl_logged_with_workers", 0.5, "NCCL's log of the workers' change: the workers' key ranks it"),
    Factor("nccl_logged_alone", 1.1, "as NCCL itself read it at communicator init"),
    Factor("nccl_effect", 0.5, "what NCCL logged it did follows from the NCCL settings that changed"),

    # ---- SGLang's custom all-reduce (sglang 0.5.5 distributed/device_communicators/custom_all_reduce.py:55:
    # world sizes 2, 4, 6, 8 on NVLink; it carries the small decode all-reduces, NCCL mostly prefill) ----
    Factor("custom_allreduce_on", 0.6, "SGLang's custom all-reduce is on: NCCL tuning matters less"),
    Factor("custom_allreduce_off", 1.1, "custom all-reduce is off: NCCL carries every decode all-reduce"),

    # ---- code: installed files, packages, checkouts, start-up hooks ----
    Factor("same_version_other_origin", 0.7, "the same version from another origin (a rebuild, another index)"),
    Factor("rewritten_script", 0.3, "a console-script wrapper the installer rewrote: rarely matters"),
    # sglang 0.5.5 srt/entrypoints/engine.py:676 and 0.5.23 engine.py:1878 (_set_envs_and_config) set the
    # workers' NCCL/CUDA variables (knowledge.ENGINE_SET_ENV).
    Factor("engine_sets_changed_env", 1.3, "engine.py sets the workers' variables that changed: the likely mechanism"),
    Factor("startup_mentions_changed", 1.6, "the hook mentions variables that differ between GOOD and BAD"),
    # A variable a changed start-up hook names and sets: that hook's effect. The hook ranks it (it takes the
    # part of the system the variable acts on, and startup_mentions_changed); reverting the hook undoes both.
    # The run command's processes are read while they run (measure/maps_sampling: at first sight, then as they
    # age), so an object a short process maps late can be missing from one side's reads: a library on one side
    # only counts for less there. Another file or build under one name does not depend on when it was read.
    Factor("maps_sampled", 0.5, "mapped on one side only by a benchmark process whose maps were sampled"),
    Factor("editable_hot_path", 2.0, "the checkout is an editable install of a hot-path package: its changes run"),
    Factor("editable", 1.3, "the checkout is an editable install: its changes run in the interpreter"),
    # analysis/rank/running.py: a measured process ran the checkout's code (its main script, an imported module,
    # the run command's program, a sys.path entry), or the measured processes are known and ran elsewhere. A
    # working directory is where a process ran, not its code: it moves the score only by where the code that ran
    # came from (python /elsewhere/bench.py run in a checkout imports nothing from it).
    Factor("checkout_runs", 1.3, "a measured process ran the checkout's code: its changes run"),
    Factor("checkout_code_elsewhere", 0.8, "the measured processes ran in the checkout, but the code they ran "
                                           "(scripts, modules) came from elsewhere"),
    Factor("checkout_not_running", 0.8, "the measured processes ran elsewhere: the checkout is not what runs"),
    # knowledge.FILE_KINDS: what a changed file is (code runs; documentation never does).
    Factor("file_kind", 1.0, "what kind of file changed (knowledge.FILE_KINDS)"),

    # ---- recorded patches (`--patch`, analysis/compare/patch_status.py): a hunk applied on one side only ----
    # The capture hashes each file a patch targets: a hunk whose status changed together with its file's
    # bytes is an edit of the code; one whose file is the same on both sides changed only in the patch.
    Factor("hunk_code_changed", 1.5, "its status changed and the file it edits changed with it"),
    Factor("hunk_code_same", 0.3, "the file it edits is the same on both sides: only the patch file changed"),
    # The capture found the file in the described interpreter's site-packages: what that interpreter imports.
    Factor("patch_target_installed", 1.3, "the file it edits is installed in the described interpreter"),
    # The same change as a whole file (RECORD hash, dirty checkout file) when a hunk of a recorded patch
    # shows it more precisely: the hunk's cause ranks it (like in_process_shown_elsewhere).
    Factor("shown_by_hunk", 0.5, "a recorded patch's hunk shows this change more precisely, and ranks it"),
]}

# The value of "eagle3_side" per side and component (verify: communication, kernels and graphs explain a
# slower cycle; drafter: the draft model and its kernels explain fewer accepted tokens).
SIDE_WEIGHTS: Dict[str, Dict[str, float]] = {
    "verify": {COMMUNICATION: 1.0, KERNELS: 1.0, GRAPHS: 1.0, MEMORY: 0.6, CPU_HOST: 0.6, DRAFTER: 0.35, NONE: 0.5},
    "drafter": {DRAFTER: 1.0, KERNELS: 0.55, GRAPHS: 0.5, COMMUNICATION: 0.5, MEMORY: 0.5, CPU_HOST: 0.5, NONE: 0.5},
}

# The share of a thread-count setting's change that the runs' peak threads must move by for it to be the mover.
SERIES_SHORT_SHARE = 0.5

# Prior overrides for edits and versions of distributions on the decode hot path (knowledge.HOT_PATH_PACKAGES):
# an edited file or another version there runs in every decode step.
HOT_PATH_PACKAGE_PRIOR = 0.5
HOT_PATH_EDIT_PRIOR = 0.6
# A start-up hook that mentions a performance variable is as likely as that variable, a little less.
STARTUP_MENTION_SHARE = 0.8


def _load_weights() -> Dict[str, float]:
    """The fitted weights (weights.json beside this module, written by benchmarks/fit_weights.py from the corpus
    of planted regressions): {factor name or "prior": exponent}. A factor the fit did not weigh keeps 1.0, so
    the score is today's product of prior and factors; a weight of 0 removes the factor's effect."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "weights.json")
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    found = data.get("weights") if isinstance(data, dict) else None
    if not isinstance(found, dict):
        return {}
    return {str(k): float(v) for k, v in found.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and 0.0 <= v <= 5.0}


# The score is log-linear in the evidence: log raw = w_prior * log prior + sum of w_f * log value_f.
WEIGHTS: Dict[str, float] = _load_weights()


def _num(value: float) -> str:
    return f"{value:.2f}" if value >= 0.01 else f"{value:.3f}"


class Score:
    """One cause's prior and the factors applied to it, in order."""

    def __init__(self, prior: float, source: str) -> None:
        self.prior = prior
        self.source = source
        self.steps: List[Dict[str, Any]] = []

    def set_prior(self, prior: float, source: str) -> None:
        self.prior, self.source = prior, source

    def apply(self, name: str, detail: str = "", value: Optional[float] = None) -> None:
        """Apply the named factor (its table value unless `value` says otherwise) because of `detail`."""
        factor = FACTORS[name]
        value = factor.value if value is None else value
        if value == 1.0:
            return
        self.steps.append({"factor": name, "value": value, "why": detail or factor.why})

    @property
    def raw(self) -> float:
        raw = self.prior ** WEIGHTS.get("prior", 1.0) if self.prior > 0 else 0.0
        for step in self.steps:
            value = step["value"]
            raw *= value ** WEIGHTS.get(step["factor"], 1.0) if value > 0 else 0.0
        return raw

    @property
    def score(self) -> float:
        return round(1.0 - math.exp(-SCORE_SCALE * self.raw), 3)

    def lines(self) -> List[str]:
        """'prior 0.80 (NCCL_PROTO rule)', then 'x0.1 out of context: ...' per factor."""
        out = [f"prior {_num(self.prior)} ({self.source})"]
        out.extend(f"x{step['value']:g} {step['why']}" for step in self.steps)
        return out

    def named_steps(self) -> List[Tuple[str, str]]:
        """(factor name, why) of each factor applied, in order."""
        return [(str(step["factor"]), str(step["why"])) for step in self.steps]

    def to_json(self) -> List[Dict[str, Any]]:
        return [{"factor": "prior", "value": self.prior, "why": self.source}] + [dict(s) for s in self.steps]

    def signature(self) -> float:
        """What ties are decided on: the raw score, rounded so equal evidence compares equal."""
        return float(f"{self.raw:.9g}")
