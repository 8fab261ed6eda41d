"""Reach, its types: did a difference act on the measured processes, could it have, or do the observations rule it out?

The question a cause must answer first (DESIGN.md "What acted, over names"). Every difference gets one tier,
with the observation that put it there:

  acted      seen in a measured process during the runs: a variable it read (the probe's read counts, NCCL's
             own log), a flag on its command line, an object it mapped or a module it imported that changed
             identity, an edited installed file of a package it imported, a checkout whose code it ran, a
             run counter that moved with the setting, a neighbour the runs lost their CPU to;
  could_act  only its name or text says so (readable by loaded code, a rule, a mention), or nothing captured
             could decide: then `decided` is False and `would_decide` says what would;
  cannot     the observations rule it out: a search-path entry through which nothing was loaded, a setting of
             a part of the stack that is absent or that no measured process used, a name no loaded code
             mentions while the loaded code is known, a variable tracked and not read, a change only in the
             capturing shell, a neighbour that took nothing the work waited for, a run counter it acts
             through that held, code the measured processes are known not to run.

The ranking orders by tier first (causes.py): an acted difference ranks above every could-act one whatever
the names, a cannot one below everything. Most tiers follow from the observation factors the scoring already
applied (factors.py; each one an observation, never a name); the rest are judged here from the snapshots:
path-valued variables entry by entry against what was mapped and imported, installed files and packages
against the modules the measured processes imported, mapped objects and shadowed modules by being there.
"""
from __future__ import annotations

from typing import AbstractSet, Any, Dict, Iterable, Mapping, NamedTuple, Optional, Set, Tuple

from envsnap.analysis.compare import libraries as libraries_mod
from envsnap.analysis.compare.diff import Comparison
from envsnap.model import keys
from envsnap.model.snapshot import as_dict, section_data

ACTED, COULD_ACT, CANNOT = "acted", "could_act", "cannot"
TIERS = (ACTED, COULD_ACT, CANNOT)  # best first
TIER_ORDER = {ACTED: 2, COULD_ACT: 1, CANNOT: 0}

# Factors that are observations of the difference acting (factors.py): each names what was seen.
# (checkout_runs is not among them: a checkout on sys.path, or whose other scripts ran, did not run every file of it;
# the checkout-file kind judges the file itself.)
ACTED_FACTORS = ("read_by_process", "on_command_line", "nccl_log_confirms", "nccl_logged_alone",
                 "nccl_log_corroborates_parent", "series_moved", "server_parent_explains")
# Factors that are observations ruling it out.
CANNOT_FACTORS = ("out_of_context", "not_seen_in_play", "not_in_loaded_code", "not_read", "shell_only",
                  "neighbour_no_effect", "series_held", "checkout_not_running", "checkout_code_elsewhere",
                  "hunk_code_same", "server_parent_trap", "parent_only_shell")
# Variables whose value is a search path: judged entry by entry by what was loaded through each.
LIBRARY_PATH_VARIABLES = ("LD_LIBRARY_PATH", "LD_PRELOAD", "LD_AUDIT")
MODULE_PATH_VARIABLES = ("PYTHONPATH",)


class Reach(NamedTuple):
    tier: str  # ACTED | COULD_ACT | CANNOT
    basis: str  # the kind of observation: a factor's name, or "maps", "modules", "search path", "name"
    observation: str  # what was observed, as a sentence ("" when nothing was observed either way)
    decided: bool = True  # False: nothing captured could decide between acted and cannot
    would_decide: str = ""  # what would decide it, when not decided

    def line(self) -> str:
        """The reach in one line, as every output says it."""
        if self.tier == ACTED:
            return f"acted: {self.observation}"
        if self.tier == CANNOT:
            return f"cannot have acted: {self.observation}"
        said = f"could act: {self.observation}" if self.observation else "could act: only its name or kind says so"
        return said + ("; not decided (see below)" if not self.decided and self.would_decide else "")

    @property
    def order(self) -> int:
        return order_of(self.tier, self.basis)

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"tier": self.tier, "basis": self.basis, "observation": self.observation,
                               "decided": self.decided, "order": self.order, "line": self.line()}
        if self.would_decide:
            out["would_decide"] = self.would_decide
        return out


# Within "could act", a difference whose basis is an observation of the measured processes' own code (its name
# is a string in an object they mapped) comes before one that only a name, a rule or a text says could act: a
# name never lifts a difference over one with a stronger observation.
OBSERVED_COULD_ACT_BASES = ("readable_by_loaded_code",)
# The order a cause sorts by before its score: acted, could act (observed), could act (by name), cannot.
ORDER_ACTED, ORDER_COULD_OBSERVED, ORDER_COULD_NAMED, ORDER_CANNOT = 3, 2, 1, 0

# The score a cause shows is its evidence score placed in its order's band, so that the number agrees with the
# order (an acted cause never shows less than a could-act one) and says what the tier says: acted causes read as
# more likely than not, ruled-out ones as unlikely whatever their names.
ORDER_BANDS = {ORDER_ACTED: (0.5, 1.0), ORDER_COULD_OBSERVED: (0.3, 0.5), ORDER_COULD_NAMED: (0.1, 0.3),
               ORDER_CANNOT: (0.0, 0.1)}
TIER_BANDS = {ACTED: (0.5, 1.0), COULD_ACT: (0.1, 0.5), CANNOT: (0.0, 0.1)}  # each tier's bands together


def order_of(tier: str, basis: str = "") -> int:
    """Where a reach sorts: its tier, and within "could act" whether its basis was observed (see above)."""
    if tier == ACTED:
        return ORDER_ACTED
    if tier == CANNOT:
        return ORDER_CANNOT
    return ORDER_COULD_OBSERVED if basis in OBSERVED_COULD_ACT_BASES else ORDER_COULD_NAMED


def banded(order: int, evidence_score: float) -> float:
    """A cause's shown score: its evidence score (0..1) within its order's band (order_of)."""
    low, high = ORDER_BANDS[order]
    return round(low + (high - low) * min(1.0, max(0.0, evidence_score)), 3)


class Seen(NamedTuple):
    """What the measured processes of one side were observed to load: mapped objects (path -> processes),
    imported installed top-level modules, modules from elsewhere (file -> processes), and whether each list
    was recorded at all."""
    mapped: Dict[str, Set[str]]
    imported: Dict[str, Set[str]]  # installed top-level module name -> processes
    elsewhere: Dict[str, Set[str]]  # module file (outside stdlib and site dirs) -> processes
    maps_known: bool
    modules_known: bool
    measured: bool = False  # any measured process or run recorded (processes, probe records, runs)


def seen(snap: Mapping[str, Any]) -> Seen:
    """What one snapshot's measured processes mapped and imported (libraries section, probe records)."""
    mapped: Dict[str, Set[str]] = {}
    data = section_data(snap, libraries_mod.SECTION) or {}
    entries = libraries_mod.process_entries(data)
    for process, entry in entries.items():
        for path in as_dict(entry.get("objects")).values():
            mapped.setdefault(str(path), set()).add(keys.run_process_name(process) or process)
    imported: Dict[str, Set[str]] = {}
    elsewhere: Dict[str, Set[str]] = {}
    modules_known = False
    probe = section_data(snap, "probe") or {}
    for group in ("records", "command_records", "run_records"):
        for key, record in as_dict(probe.get(group)).items():
            modules = as_dict(as_dict(record).get("modules"))
            if not modules:
                continue
            modules_known = True
            who = str(key) if group == "records" else "the run command"
            for name in modules.get("installed") or []:
                imported.setdefault(str(name), set()).add(who)
            for path in as_dict(modules.get("elsewhere")).values():
                elsewhere.setdefault(str(path), set()).add(who)
            for shadow in as_dict(modules.get("shadowed")).values():
                file = as_dict(shadow).get("file")
                if isinstance(file, str):
                    elsewhere.setdefault(file, set()).add(who)
    processes = as_dict((section_data(snap, "processes") or {}).get("processes"))
    measured = bool(processes) or bool(as_dict(probe.get("records"))) or bool(snap.get("runs"))
    return Seen(mapped, imported, elsewhere, bool(entries), modules_known, measured)


def under(path: str, directory: str) -> bool:
    """Is `path` the directory `directory` or inside it?"""
    directory = directory.rstrip("/")
    return bool(directory) and (path == directory or path.startswith(directory + "/"))


def who(processes: Iterable[str]) -> str:
    """Up to three process names, and how many more."""
    names = sorted(set(processes))
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")




# A cause can lead only when what the runs lost through it accounts for at least this share of the loss: the runs'
# CPU and the share of the machine are measured with noise, so one that took nearly all the loss is not ruled out by
# a hair, and one that took less than half of it cannot be what the user acts on (kinds/neighbour.py, kinds/variable.py).
ACCOUNTS_ENOUGH = 0.5


def cpu_lost(mechanism: Optional[Mapping[str, Any]]) -> Optional[Tuple[float, str]]:
    """(share of their CPU the runs stopped keeping busy, how it was measured) from the mechanism's CPUs kept busy,
    GOOD's against BAD's (analysis/runs/mechanism.py); None when the runs did not record it."""
    factors = (mechanism or {}).get("factors") or {}
    busy = factors.get("busy_cpus") if isinstance(factors, dict) else None
    if not isinstance(busy, dict):
        return None
    g, b = busy.get("good"), busy.get("bad")
    if not isinstance(g, (int, float)) or not isinstance(b, (int, float)) or g <= 0:
        return None
    lost = max(0.0, 1.0 - float(b) / float(g))
    return lost, f"the runs kept {float(g):.2g} \u2192 {float(b):.2g} CPUs busy: they lost {lost:.0%} of their CPU"


def loss_share(verdict: Mapping[str, Any]) -> Optional[float]:
    """The share of BAD's time per unit of work that GOOD did not need (0..1): a throughput 44% of GOOD's is a
    loss of 0.56, a latency 1.5x GOOD's one of 0.33; None when the runs did not get worse or cannot tell."""
    change = verdict.get("change_pct")
    direction = verdict.get("direction")
    if not isinstance(change, (int, float)) or isinstance(change, bool):
        return None
    ratio = 1.0 + float(change) / 100.0
    if direction == "higher" and 0.0 < ratio < 1.0:
        return 1.0 - ratio
    if direction == "lower" and ratio > 1.0:
        return 1.0 - 1.0 / ratio
    return None


class ReachContext(NamedTuple):
    """What a difference kind judges its reach with: the comparison, what each side's measured processes were
    seen loading (BAD first), the variables the observations rule out, and the share of time the runs lost."""
    comp: Comparison
    sides: Mapping[str, Seen]
    ruled_out: AbstractSet[str] = frozenset()
    loss: Optional[float] = None
    mechanism: Optional[Mapping[str, Any]] = None  # the verdict's mechanism: the runs' own counters
    ran: Tuple[str, ...] = ()  # the scripts and programs the measured processes ran (rank/running.py)


# Below this share of the loss unexplained, the line does not say "unexplained" (noise of the measurement).
EXPLAINED_ENOUGH = 0.9


class Size(NamedTuple):
    share: float  # the share of the loss its measured path accounts for (0..1, capped)
    how: str  # what was measured

    def line(self) -> str:
        said = f"size: {self.how}: it accounts for {min(self.share, 1.0):.0%} of the loss"
        if self.share < EXPLAINED_ENOUGH:
            said += f"; unexplained: {1.0 - min(self.share, 1.0):.0%} of the loss"
        return said

    def to_json(self) -> Dict[str, Any]:
        return {"share": round(min(self.share, 1.0), 3), "how": self.how, "line": self.line()}
