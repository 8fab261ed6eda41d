"""Reach: did a difference act on the measured processes, could it have, or do the observations rule it out?

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

import os
from typing import AbstractSet, Any, Dict, Iterable, List, Mapping, NamedTuple, Optional, Sequence, Set, Tuple

from envsnap.analysis.compare import libraries as libraries_mod, neighbours, patch_status
from envsnap.analysis.compare.diff import Comparison, Difference
from envsnap.analysis.rank import hook_effects
from envsnap.model import keys
from envsnap.model.snapshot import as_dict, section_data

ACTED, COULD_ACT, CANNOT = "acted", "could_act", "cannot"
TIERS = (ACTED, COULD_ACT, CANNOT)  # best first
TIER_ORDER = {ACTED: 2, COULD_ACT: 1, CANNOT: 0}

# Factors that are observations of the difference acting (factors.py): each names what was seen.
ACTED_FACTORS = ("read_by_process", "on_command_line", "nccl_log_confirms", "nccl_logged_alone",
                 "nccl_log_corroborates_parent", "series_moved", "checkout_runs", "server_parent_explains")
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

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"tier": self.tier, "basis": self.basis, "observation": self.observation,
                               "decided": self.decided, "line": self.line()}
        if self.would_decide:
            out["would_decide"] = self.would_decide
        return out


# The score a cause shows is its evidence score placed in its tier's band, so that the number agrees with the
# order (an acted cause never shows less than a could-act one) and says what the tier says: acted causes read as
# more likely than not, ruled-out ones as unlikely whatever their names.
TIER_BANDS = {ACTED: (0.5, 1.0), COULD_ACT: (0.1, 0.5), CANNOT: (0.0, 0.1)}


def banded(tier: str, evidence_score: float) -> float:
    """A cause's shown score: its evidence score (0..1) within its tier's band."""
    low, high = TIER_BANDS[tier]
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


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip("/")
    return bool(directory) and (path == directory or path.startswith(directory + "/"))


def _who(processes: Iterable[str]) -> str:
    names = sorted(set(processes))
    return ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")


def _entries(value: Any) -> List[str]:
    if not isinstance(value, str):
        return []
    separator = ":" if ":" in value or " " not in value else " "  # LD_PRELOAD also takes spaces
    return [e for e in value.split(separator) if e]


def _changed_entries(d: Difference) -> List[Tuple[str, str]]:
    """(entry, side holding it) of the entries of a path-valued variable found on one side only."""
    good, bad = _entries(d.good), _entries(d.bad)
    return ([(e, "BAD") for e in bad if e not in good] + [(e, "GOOD") for e in good if e not in bad])


def _path_variable(d: Difference, sides: Mapping[str, Seen]) -> Optional[Reach]:
    """A search-path variable, entry by entry: what the measured processes loaded through each changed entry."""
    name = d.variable or ""
    library = name in LIBRARY_PATH_VARIABLES
    if not library and name not in MODULE_PATH_VARIABLES:
        return None
    changed = _changed_entries(d)
    if not changed:
        return None  # the same entries, reordered: the order decides; left to the other evidence
    through: List[str] = []
    unknown: List[str] = []
    for entry, side in changed:
        view = sides[side]
        if library and not view.maps_known:
            unknown.append(side)
            continue
        if not library and not view.modules_known:
            unknown.append(side)
            continue
        files = view.mapped if library else view.elsewhere
        found = sorted(path for path in files if _under(path, entry) or path == entry)
        if found:
            who = _who(p for path in found for p in files[path])
            through.append(f"{os.path.basename(found[0])}{f' and {len(found) - 1} more' if len(found) > 1 else ''} "
                           f"{'mapped' if library else 'imported'} from {entry} on {side} ({who})")
    if through:
        return Reach(ACTED, "search path", "; ".join(through))
    if unknown:
        what = "maps" if library else "module lists (the probe, or `envsnap run`)"
        return Reach(COULD_ACT, "search path", "", False, f"the measured processes' {what} on {', '.join(sorted(set(unknown)))} "
                                           "would show whether anything was loaded through the changed entries")
    shown = ", ".join(entry for entry, _ in changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    what = "object the measured processes mapped" if library else "module the measured processes imported"
    return Reach(CANNOT, "search path", f"no {what} came from the changed entr{'ies' if len(changed) > 1 else 'y'} {shown}")


def _top_module(rel: str) -> str:
    """The top-level module an installed file belongs to ("pkg/sub/x.py" -> "pkg", "mod.py" -> "mod")."""
    first = rel.split("/", 1)[0]
    if "/" in rel:
        return first
    return first.split(".", 1)[0]


def _installed_file(d: Difference, sides: Mapping[str, Seen]) -> Optional[Reach]:
    """An installed file that differs from RECORD: mapped (a compiled file), or in a package a measured
    process imported; ruled out when every side's module lists and maps are known and none shows it."""
    rel = d.subject.entity
    if not rel or rel.endswith((".dist-info/RECORD", "/RECORD")):
        return None
    for side, view in sides.items():
        mapped = sorted(path for path in view.mapped if path.endswith("/" + rel))
        if mapped:
            return Reach(ACTED, "maps", f"mapped by {_who(view.mapped[mapped[0]])} on {side}")
    top = _top_module(rel)
    for side, view in sides.items():
        if top in view.imported:
            return Reach(ACTED, "modules", f"its package {top} was imported by {_who(view.imported[top])} on {side}")
    if rel.endswith((".py", ".so", ".pyc")) and all(v.modules_known for v in sides.values()):
        return Reach(CANNOT, "modules", f"no measured process imported {top} (their module lists are known on both sides)")
    if rel.endswith((".py", ".so")):
        return Reach(COULD_ACT, "modules", "", False, "the measured processes' module lists (the probe, or `envsnap run`) "
                                           f"would show whether {top} was imported")
    return None


def _package(d: Difference, sides: Mapping[str, Seen]) -> Optional[Reach]:
    """A distribution whose version or build changed: imported (by a top-level name equal to its name)."""
    name = d.subject.entity.replace("-", "_").lower()
    for side, view in sides.items():
        for module, who in view.imported.items():
            if module.lower() == name:
                return Reach(ACTED, "modules", f"{module} was imported by {_who(who)} on {side}")
    return None


def _library(d: Difference) -> Reach:
    """An object a measured process mapped, another file or build under one name, or on one side only."""
    who = keys.run_process_words(d.subject.entity)
    if d.good is not None and d.bad is not None:
        return Reach(ACTED, "maps", f"{who} mapped {d.subject.aspect} on both sides, another file or build on BAD")
    return Reach(ACTED, "maps", f"{who} mapped {d.subject.aspect} on {'BAD' if d.good is None else 'GOOD'} only")


def _startup(d: Difference, comp: Comparison, sides: Mapping[str, Seen], ruled_out: AbstractSet[str]) -> Optional[Reach]:
    """A start-up hook runs in every Python process of its interpreter. One whose code does nothing but set
    variables (hook_effects.py) acts only through them: ruled out when all of them are; else acted where Python
    processes were measured (their module lists were recorded)."""
    texts = [(side, hook_effects.hook_effects(view.source, d.subject.entity))
             for side, view, value in (("GOOD", comp.good, d.good), ("BAD", comp.bad, d.bad)) if value is not None]
    found = [effects for _, effects in texts if effects is not None]
    if found and len(found) == len(texts) and all(e.only_settings for e in found):
        names = sorted(set().union(*(e.sets for e in found)))
        if not names:
            return Reach(CANNOT, "hook text", "its code sets nothing and runs nothing else (its text)")
        if all(name in ruled_out for name in names):
            return Reach(CANNOT, "hook text", f"its code only sets {', '.join(names)}, which the observations rule "
                                              "out (its text)")
        return Reach(COULD_ACT, "hook text", f"its code only sets {', '.join(names)} (its text): it acts through them")
    if any(view.modules_known for view in sides.values()):
        return Reach(ACTED, "modules", "it runs at start-up in every Python process of its interpreter, and the measured "
                            "processes are Python processes (their module lists were recorded)")
    return None


def _hunk(d: Difference, comp: Comparison, sides: Mapping[str, Seen]) -> Optional[Reach]:
    """A recorded patch's hunk whose status changed: acted when a measured process imported the file it edits
    (installed: its package; a checkout: the file itself), ruled out as an installed file is."""
    info = comp.bad.patch_info.get(d.base_key) or comp.good.patch_info.get(d.base_key)
    if not info or d.subject.aspect != "hunk":
        return None
    rel = str(as_dict(info.get("hunk")).get("file") or "")
    target = as_dict(as_dict(info.get("patch")).get("target"))
    if not rel:
        return None
    if target.get("kind") == "site-packages":
        return _installed_file(_as_file(d, rel), sides)
    root = str(target.get("root") or "")
    path = f"{root.rstrip('/')}/{rel}" if root else rel
    for side, view in sides.items():
        if path in view.elsewhere:
            return Reach(ACTED, "modules", f"{_who(view.elsewhere[path])} imported {path} on {side}")
    return None


def _as_file(d: Difference, rel: str) -> Difference:
    """The same difference seen as the installed file `rel` it edits (for _installed_file)."""
    return Difference(key=d.key, category=d.category, change=d.change, good=d.good, bad=d.bad, volatile=d.volatile,
                      flat_keys=d.flat_keys, subject=d.subject._replace(entity=rel), absent=d.absent,
                      base_key=d.base_key)


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


def _checkout_file(d: Difference, sides: Mapping[str, Seen]) -> Optional[Reach]:
    """A changed file of a checkout: acted when a measured process imported it, or a package of the checkout whose
    directory holds it (the module lists name top-level modules: a package's __init__.py)."""
    if d.subject.aspect not in ("dirty", "untracked") or not d.subject.item:
        return None
    path = f"{d.subject.entity.rstrip('/')}/{d.subject.item}"
    for side, view in sides.items():
        for module_file, who in view.elsewhere.items():
            package = module_file[: -len("/__init__.py")] if module_file.endswith("/__init__.py") else None
            if module_file == path or (package and _under(path, package)):
                what = "it" if module_file == path else f"its package {(package or '').rsplit('/', 1)[-1]}"
                return Reach(ACTED, "modules", f"{_who(who)} imported {what} from the checkout on {side}")
    return None


def _neighbour(d: Difference, sides: Mapping[str, Seen], loss: Optional[float]) -> Optional[Reach]:
    """A neighbour rules itself out when it took less from BAD than from GOOD, or when nothing was measured
    that it could have delayed (no run, no measured process on either side); one that took a smaller share of
    the machine than the runs lost cannot account for the loss, so it cannot lead (could act, by its size)."""
    good: Optional[Dict[str, Any]] = d.good if isinstance(d.good, dict) else None
    bad: Optional[Dict[str, Any]] = d.bad if isinstance(d.bad, dict) else None
    row: Dict[str, Any] = {"kind": d.subject.aspect, "good": good, "bad": bad}
    if row["kind"] in ("cpu", "steal", "gpu") and not neighbours.more_on_bad(row):
        return Reach(CANNOT, "took less on BAD", "it took less from BAD than from GOOD: it cannot have slowed BAD down")
    if not any(view.measured for view in sides.values()):
        return Reach(CANNOT, "nothing measured", "no run and no measured process on either side: there was no "
                                                 "work for it to delay")
    share = neighbours.share_taken(d.subject.aspect, good, bad)
    if loss is not None and share is not None and share < loss:
        return Reach(COULD_ACT, "size", f"it took {share:.0%} of the machine on BAD beyond GOOD, less than the "
                                        f"{loss:.0%} of BAD's time the runs lost: it cannot account for the loss")
    return None


def reach_of(d: Difference, steps: Sequence[Tuple[str, str]], comp: Comparison,
             sides: Optional[Mapping[str, Seen]] = None, ruled_out_variables: AbstractSet[str] = frozenset(),
             loss: Optional[float] = None) -> Reach:
    """The tier of one difference, from the observation factors its score carries ((name, why) in order) and
    the snapshots."""
    sides = sides if sides is not None else {"GOOD": seen(comp.good.source), "BAD": seen(comp.bad.source)}
    why = dict(reversed(list(steps)))  # the first step of each name
    names = [name for name, _ in steps]
    ruled_out = [n for n in names if n in CANNOT_FACTORS]
    judged: Optional[Reach] = None
    if d.variable is not None:
        judged = _path_variable(d, sides)
    elif d.where == "integrity":
        judged = _installed_file(d, sides)
    elif d.where == "packages":
        judged = _package(d, sides)
    elif d.where == "library":
        judged = _library(d)
    elif d.where == "process" and keys.aspect_kind(d.subject.aspect) == keys.SHADOWED:
        judged = Reach(ACTED, "modules", f"{d.subject.entity} imported it from another file (its module list)")
    elif d.category == "startup":
        judged = _startup(d, comp, sides, ruled_out_variables)
    elif d.where == "neighbour":
        judged = _neighbour(d, sides, loss)
    elif d.where == "git":
        judged = _checkout_file(d, sides)
    elif d.where == patch_status.CATEGORY:
        judged = _hunk(d, comp, sides)
    if judged is not None and (judged.tier != COULD_ACT or judged.basis == "size"):
        if judged.tier == ACTED and ruled_out:
            # Met by a measured process, yet an observation rules it out (the part it acts on was not in play,
            # only the shell had it, the code it edits is the same on both sides).
            return Reach(CANNOT, ruled_out[0], f"{why[ruled_out[0]]} (though {judged.observation})")
        return judged
    acted = [n for n in names if n in ACTED_FACTORS]
    if d.where == "neighbour" and "neighbour_measured" in names and "mechanism_matches" in names:
        acted.append("mechanism_matches")
    if ruled_out:
        return Reach(CANNOT, ruled_out[0], why[ruled_out[0]])
    if acted:
        return Reach(ACTED, acted[0], why[acted[0]])
    if judged is not None:
        return judged
    if d.variable is not None:
        how = ("the probe (--probe-dir, or `envsnap run`) would show which variables the measured processes' Python "
               "code read; NCCL_DEBUG=INFO logs what NCCL read")
        if "readable_by_loaded_code" in names:
            return Reach(COULD_ACT, "readable_by_loaded_code", why["readable_by_loaded_code"], False, how)
        return Reach(COULD_ACT, "name", "", False, how)
    if d.where == "neighbour":
        return Reach(COULD_ACT, "neighbour_measured" if "neighbour_measured" in names else "name",
                     why.get("neighbour_measured", ""), False,
                     "the runs' run-queue wait and lost CPU would show whether it took the work's CPU")
    return Reach(COULD_ACT, "name", "", False, "")
