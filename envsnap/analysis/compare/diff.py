"""Semantic differences between two snapshots (pure: returns data, never prints).

Two views (views.py) are compared category by category: identical categories cost one dict
equality, the keys whose values differ are found with a cheap per-key check, and the changed
leaves inside each value are named the way DeepDiff's tree view names them: by a plain walk
when the values are dicts, scalars and lists of scalars (scalar_lists.py reproduces DeepDiff's
ordered-list matching for those), by DeepDiff itself when a list of objects changed. DeepDiff is
imported only then: it pulls in asyncio, and numpy, pandas or pydantic where installed, more than
the rest of `envsnap diff` takes. Sections that are usable on one side only
are reported (and not compared), since half a comparison would mislead.

Merged multi-node snapshots are compared node by node (analysis/compare/nodes.py pairs the nodes by host
name and qualifies every key by its node, "node-a/workers.env.NCCL_ALGO"); the same change on
several nodes reads as one difference ("*/workers.env.NCCL_ALGO" when it is on every node).

Over 400 lines on purpose: the Difference type, how two views compare, how the per-node
comparisons combine and how a Difference displays are one contract that every renderer reads.
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, NamedTuple, Optional, Set, Tuple

from envsnap import format as fmt
from envsnap.analysis import knowledge
from envsnap.analysis.compare import flags as flags_mod, neighbours, nodes as nodes_mod
from envsnap.analysis.compare.scalar_lists import changed_indices
from envsnap.analysis.compare.views import (
    _MISSING,
    View,
    _leaves,
    build_view,
    categories,
    category_key,
    comparable_builds,
    drop_unstable,
    modified_entries_differing,
    usable_sections,
)
from envsnap.model import keys
from envsnap.model.keys import Subject

# How a value missing on one side reads, per category. NCCL logs a variable only when it reads
# it, so no line is "not logged", never "unset"; a file absent from a checkout's dirty list is clean.
ABSENT_WORDS = {"integrity": "as installed", "git": "clean", "startup": "absent", "nccl": "not logged",
                "patches": "not in the patch", "neighbour": "not seen", "packages": "not installed"}
# git status letters of a dirty file (git-status(1), porcelain v2), as words.
GIT_STATUS_WORDS = {"M": "modified", "T": "type changed", "A": "added", "D": "deleted", "R": "renamed",
                    "C": "copied", "U": "unmerged"}
# A whole entity (a repository, a process, a GPU, a section) that one snapshot does not hold was not
# captured there: that says nothing about its state, so it is never "clean" or "unset".
NOT_CAPTURED = "not captured"


def absent_wording(subject: Subject, entity: bool = False) -> str:
    """The words for the side of a difference where its key is missing."""
    if entity:
        return NOT_CAPTURED
    if subject.where == "parent_only":
        return "not flagged"
    if subject.where == "in_process":
        return "not changed in-process"
    if subject.where == "process" and subject.aspect.startswith("shadowed."):
        return "not shadowed"
    if subject.where == "library":
        return "not mapped"
    if subject.where == "process" and subject.aspect.startswith("module."):
        return "not loaded from elsewhere"
    if subject.where in ("process", "command") and subject.aspect.startswith(("flag.", "arg.")):
        return "not given"  # a flag or positional the command line does not have
    if subject.where == "git" and subject.aspect == "untracked":
        return "absent"  # not among the untracked files: not there (or ignored), never "clean"
    return ABSENT_WORDS.get(subject.where, "unset")


def parent_only_absent(subject: Subject, view: View) -> str:
    """What a side without a workers.parent_only.NAME key had: the shell's and the workers' values, which
    agree there (or, for the server's parent, the TP workers' value), in the words the other side's value
    uses ("shell 1, workers 0"), never "none"."""
    name = subject.variable or subject.entity
    if not view.workers:
        return "no workers captured"
    workers = view.values["workers"]
    seen = "mixed" if keys.worker_env_key(name, disagree=True) in workers else workers.get(keys.worker_env_key(name))
    seen_text = "unset" if seen is None else str(seen)
    if subject.aspect == "server":
        return f"TP workers {seen_text}"
    shell = view.parent_env.get(name)
    return f"shell {'unset' if shell is None else shell}, workers {seen_text}"


@dataclass
class Difference:
    key: str  # the readable key ("workers.env.NCCL_PROTO", "node-a/workers.env.NCCL_PROTO"): for people, never parsed
    category: str
    change: str  # changed | added | removed
    good: Any  # raw view value (None when absent)
    bad: Any
    volatile: bool
    flat_keys: List[str]
    subject: Subject  # what the key is about, as fields
    absent: str = "unset"  # how the missing side reads (absent_wording)
    base_key: str = ""  # the key without its node qualifier: what the knowledge rules match (default: key)

    def __post_init__(self) -> None:
        if not self.base_key:
            self.base_key = self.key

    @property
    def variable(self) -> Optional[str]:
        return self.subject.variable

    @property
    def where(self) -> str:
        return self.subject.where

    def to_json(self) -> Dict[str, Any]:
        out = {"key": self.key, "category": self.category, "change": self.change,
               "good": display(self.subject, self.good), "bad": display(self.subject, self.bad),
               "absent": self.absent, "volatile": self.volatile, "flat_keys": self.flat_keys}
        out.update(self.subject.to_json())
        return out

    def side_text(self, side: str) -> str:
        """One side's value as text: the absent wording where the key is missing, "none" for a null value."""
        return value_text(self.change, side, display(self.subject, getattr(self, side)), self.absent)


def value_text(change: str, side: str, shown: Any, absent: str) -> str:
    """A displayed value of one side of a difference as text (shared by every renderer of a result)."""
    if shown is None:
        missing = change == ("added" if side == "good" else "removed")
        return absent if missing else "none"
    if isinstance(shown, bool):
        return "true" if shown else "false"
    return str(shown)


@dataclass
class Comparison:
    """Differences and warnings between two snapshots, with the views they were found in.

    For merged multi-node snapshots, `parts` holds one Comparison per node compared on both sides
    (its own views, and the differences that concern that node: a difference merged over several
    nodes is in each of their parts), plus one with empty views for the nodes on one side only;
    `good`/`bad` are empty: use node_parts()."""
    differences: List[Difference]
    warnings: List[str]
    good: View
    bad: View
    usable: Set[str]
    parts: List[Comparison] = field(default_factory=list)
    pairing: Optional[nodes_mod.Pairing] = None
    node: Optional[str] = None
    # views.modified_entries_differing of the two snapshots compared (None for a multi-node whole)
    modified_differing: Optional[Set[str]] = None
    # The shell-vs-workers warnings among `warnings`, as data (result.py points them at an edited file that sets
    # the variable in-process, once the patches are known)
    shell_traps: List["ShellTrap"] = field(default_factory=list)

    def node_parts(self) -> List[Comparison]:
        """Each node's comparison; the comparison itself for single-node snapshots (or when no node pairs)."""
        return self.parts or [self]


# ---------------------------------------------------------------- comparing views

def compare(good: Dict[str, Any], bad: Dict[str, Any]) -> Comparison:
    """All differences (volatile ones flagged) and warnings between good and bad, node by node."""
    pairing = nodes_mod.pair_nodes(good, bad)
    if pairing.mode == "single":
        comp = _compare_one(good, bad, None)
        comp.pairing = pairing
        return comp
    parts = [_compare_one(p.good, p.bad, p.name) for p in pairing.pairs if p.good is not None and p.bad is not None]
    diffs = _merge_nodes(parts, pairing.compared)
    one_sided = [_node_presence(p) for p in pairing.pairs if p.good is None or p.bad is None]
    diffs.extend(one_sided)
    diffs.sort(key=lambda d: (category_key(d.category), d.key))
    warnings = list(pairing.notes) + _node_warnings(parts, pairing.compared)
    usable: Set[str] = set().union(*(p.usable for p in parts)) if parts else set()
    if one_sided:
        parts.append(Comparison(one_sided, [], View(), View(), set()))
    return Comparison(diffs, warnings, View(), View(), usable, parts=parts, pairing=pairing)


def _compare_one(good: Dict[str, Any], bad: Dict[str, Any], node: Optional[str]) -> Comparison:
    """Two single-node snapshots (or two nodes' own): keys qualified by `node` when given."""
    usable = usable_sections([good, bad])
    differing = modified_entries_differing(good, bad)
    builds = comparable_builds([good, bad])
    hint = flags_mod.hints(good, bad)  # a flag standing without a value on either side is a boolean on both
    va = build_view(good, usable, node, differing, builds, hint)
    vb = build_view(bad, usable, node, differing, builds, hint)
    drop_unstable((va, vb))
    diffs: List[Difference] = []
    for category in categories(va, vb):
        a, b = va.values.get(category, {}), vb.values.get(category, {})
        if a == b:  # the cheap check: most categories are identical
            continue
        diffs.extend(_diff_category(category, a, b, va, vb))
    diffs.extend(_section_differences(good, bad))
    diffs.extend(neighbour_differences(good, bad, use_runs=node is None))
    diffs = _merge_instances(diffs, va, vb)
    diffs.sort(key=lambda d: (category_key(d.category), d.key))
    if node is not None:
        diffs = [replace(d, key=keys.qualify(node, d.key), subject=d.subject._replace(node=node)) for d in diffs]
    traps: List[ShellTrap] = []
    warnings = _warnings(good, bad, va, vb, compare_hosts=node is None, traps=traps)
    return Comparison(diffs, warnings, va, vb, usable, node=node, modified_differing=differing, shell_traps=traps)


def _merge_nodes(parts: List[Comparison], everyone: List[str]) -> List[Difference]:
    """The same change on several nodes is one difference ("*/env.NCCL_ALGO" on every node compared,
    "node-a,node-c/env.NCCL_ALGO" on some); each part then holds the merged differences of its node."""
    groups: Dict[Tuple[Any, ...], List[Difference]] = {}
    for part in parts:
        for d in part.differences:
            sig = (d.base_key, d.category, d.change, _canon(d.good), _canon(d.bad), d.volatile, d.absent)
            groups.setdefault(sig, []).append(d)
    merged_of: Dict[int, Difference] = {}
    out: List[Difference] = []
    for members in groups.values():
        merged = members[0]
        if len(members) > 1:
            label = nodes_mod.label([str(m.subject.node) for m in members], everyone)
            merged = replace(merged, key=keys.qualify(label, merged.base_key),
                             flat_keys=sorted({f for m in members for f in m.flat_keys}),
                             subject=merged.subject._replace(node=label))
        for member in members:
            merged_of[id(member)] = merged
        out.append(merged)
    for part in parts:
        seen: Set[int] = set()
        mine = []
        for d in part.differences:
            merged = merged_of[id(d)]
            if id(merged) not in seen:
                seen.add(id(merged))
                mine.append(merged)
        part.differences = mine
    return out


def _node_presence(pair: nodes_mod.NodePair) -> Difference:
    """A node in one snapshot only: a difference of its own (its sections are not compared)."""
    snap = pair.good if pair.good is not None else pair.bad
    sections = (snap or {}).get("sections") or {}
    ok = sum(1 for section in sections.values() if isinstance(section, dict) and section.get("status") == "ok")
    value = f"{ok}/{len(sections)} sections captured"
    name = str(pair.name)
    good, bad, change = (value, None, "removed") if pair.bad is None else (None, value, "added")
    subject = Subject("node", name, node=name)
    key = keys.view_key(subject)
    return Difference(keys.qualify(name, key), "sections", change, good, bad, False, [keys.flat_key("nodes", name)],
                      subject, NOT_CAPTURED, base_key=key)


def _node_warnings(parts: List[Comparison], everyone: List[str]) -> List[str]:
    """Each node's warnings, named by node; one line for a warning every node compared has."""
    found: Dict[str, List[str]] = {}
    for part in parts:
        for warning in part.warnings:
            found.setdefault(warning, []).append(str(part.node))
    out = []
    for warning, names in found.items():
        label = nodes_mod.label(names, everyone)
        where = ("every node" if label == nodes_mod.EVERY_NODE
                 else f"node{'s' if len(names) > 1 else ''} {label}")
        out.append(f"{where}: {warning}")
    return out


def _diff_category(category: str, a: Dict[str, Any], b: Dict[str, Any], va: View, vb: View) -> List[Difference]:
    get_b = b.get
    changed = [k for k, v in a.items() if get_b(k, _MISSING) != v]
    changed.extend(b.keys() - a.keys())
    presence = va.presence | vb.presence
    # A presence key on both sides whose value moved (a repository's head, a process's title) is the same
    # entity: its own keys (commit, dirty files, fields) say what changed, and must not be hidden by it.
    changed = [k for k in changed if not (k in presence and k in a and k in b)]
    gone = sorted(k for k in changed if k in presence)  # whole entities added/removed
    if gone:
        prefixes = tuple(k + "." for k in gone)
        changed = [k for k in changed if k in presence or not k.startswith(prefixes)]
    leaf_paths: Dict[str, Set[Tuple[str, ...]]] = {k: set() for k in changed}
    with_lists = []
    for key in changed:
        if key not in a or key not in b:
            _whole(a[key] if key in a else b[key], (), leaf_paths[key])
        elif not _changed_leaves(a[key], b[key], (), leaf_paths[key]):
            leaf_paths[key] = set()
            with_lists.append(key)
    if with_lists:
        _deepdiff_leaves({k: a[k] for k in with_lists}, {k: b[k] for k in with_lists}, leaf_paths)
    out = []
    for key in changed:
        in_a, in_b = key in a, key in b
        flats = va.flat_of(key) or vb.flat_of(key)
        if key in va.aggregate or key in vb.aggregate:
            leaf_flats = sorted(set(va.flat_of(key)) | set(vb.flat_of(key)))
        else:
            subs = leaf_paths.get(key) or {()}
            leaf_flats = sorted({(f + "." + ".".join(s)) if s else f for f in flats for s in subs
                                 if not (s and s[-1] == "state" and category == "integrity")} or set(flats))
        volatile_flags = [knowledge.is_volatile(f) for f in leaf_flats]
        volatile = knowledge.is_volatile(key) or (bool(volatile_flags) and all(volatile_flags))
        if not volatile:
            leaf_flats = [f for f, v in zip(leaf_flats, volatile_flags) if not v] or leaf_flats
        change = "changed" if in_a and in_b else ("added" if in_b else "removed")
        subject = va.subject_of(key) or vb.subject_of(key) or Subject(category, key)
        absent = absent_wording(subject, key in presence)
        if subject.where == "parent_only" and not (in_a and in_b):
            absent = parent_only_absent(subject, vb if in_a else va)
        out.append(Difference(key, category, change, a.get(key), b.get(key), volatile, leaf_flats, subject,
                              absent))
    return out


_PLAIN = (dict, str, int, float, bool, type(None))


def _whole(value: Any, sub: Tuple[str, ...], out: Set[Tuple[str, ...]]) -> None:
    """An added, removed or retyped value: its own path and, for a dict, every leaf in it."""
    if isinstance(value, dict):
        out.update(sub + p for p, _ in _leaves(value))
    out.add(sub)


def _changed_leaves(a: Any, b: Any, sub: Tuple[str, ...], out: Set[Tuple[str, ...]]) -> bool:
    """Add to `out` the paths where a and b differ as DeepDiff (tree view, dicts item by item)
    reports them: a key on one side only, a type change or a changed value, each at its own
    path. Returns False, leaving the rest undone, when both sides hold a list at some path."""
    kind_a, kind_b = type(a), type(b)
    if kind_a is dict and kind_b is dict:
        for key, value in a.items():
            path = sub + (str(key),)
            if key not in b:
                _whole(value, path, out)
            elif not _changed_leaves(value, b[key], path, out):
                return False
        for key, value in b.items():
            if key not in a:
                _whole(value, sub + (str(key),), out)
        return True
    if kind_a not in _PLAIN or kind_b not in _PLAIN:
        # Lists (and anything else): equal ones report nothing; differing ones need DeepDiff's
        # ordered-list matching, which names changed items by index: reproduced for lists of scalars
        # (scalar_lists.py), DeepDiff's own for the rest.
        if kind_a is kind_b and kind_a in (list, tuple) and a == b:
            return True
        indices = changed_indices(a, b)
        if indices is None:
            return False
        out.update(sub + (str(i),) for i in indices)
        return True
    if kind_a is not kind_b:  # DeepDiff's type_changes (1 vs 1.0 and 1 vs True included)
        _whole(a, sub, out)
        _whole(b, sub, out)
    elif a != b:
        out.add(sub)
    return True


def _deepdiff_leaves(sub_a: Dict[str, Any], sub_b: Dict[str, Any], leaf_paths: Dict[str, Set[Tuple[str, ...]]]) -> None:
    """The changed leaves of values holding lists, from DeepDiff's tree view."""
    from deepdiff import DeepDiff

    options: Dict[str, Any] = {"view": "tree", "cache_size": 0}
    if "threshold_to_diff_deeper" in inspect.signature(DeepDiff.__init__).parameters:
        # DeepDiff >= 8 reports a whole dict as replaced when few keys are shared; we want items.
        options["threshold_to_diff_deeper"] = 0
    tree = DeepDiff(sub_a, sub_b, **options)
    for report_type, levels in tree.items():
        for level in levels:
            path = [str(p) for p in level.path(output_format="list")]
            if not path:
                continue
            key, sub = path[0], tuple(path[1:])
            if key not in leaf_paths:
                continue
            if report_type in ("dictionary_item_added", "iterable_item_added", "dictionary_item_removed",
                               "iterable_item_removed", "type_changes", "values_changed"):
                for t in (level.t1, level.t2):
                    if isinstance(t, dict):
                        leaf_paths[key].update(sub + p for p, _ in _leaves(t))
                leaf_paths[key].add(sub)
            else:
                leaf_paths[key].add(sub)


def _section_differences(good: Dict[str, Any], bad: Dict[str, Any]) -> List[Difference]:
    out = []
    ga, ba = good.get("sections") or {}, bad.get("sections") or {}
    for name in sorted(set(ga) | set(ba)):
        sa, sb = ga.get(name) or {}, ba.get(name) or {}
        st_a, st_b = sa.get("status"), sb.get("status")
        if (st_a == "ok") == (st_b == "ok"):
            continue
        category = knowledge.section_category(name)[0]
        change = "changed" if st_a is not None and st_b is not None else ("added" if st_a is None else "removed")
        subject = Subject("section", name, "status")
        out.append(Difference(keys.view_key(subject), category, change, _status_text(sa), _status_text(sb),
                              False, [keys.flat_key(name, "status")], subject, NOT_CAPTURED))
    return out


def neighbour_differences(good: Dict[str, Any], bad: Dict[str, Any], use_runs: bool = True) -> List[Difference]:
    """The other processes (and the hypervisor) on one side only, or using much more there: each a difference
    of its own (compare/neighbours.py says when). A side's value carries what the ranking sizes it by."""
    found = neighbours.compare(good, bad, use_runs)
    out = []
    for row in neighbours.changed_rows(found):
        assert found is not None
        values = []
        for side in ("good", "bad"):
            value = row[side]
            if value is not None:
                value = dict(value, cpus_online=found["cpus_online"], source=found["source"],
                             count=found["count"][side], machine=found["machine"][side])
            values.append(value)
        change = "changed" if all(v is not None for v in values) else ("added" if values[1] is not None else "removed")
        flat = keys.flat_key("runs", "telemetry", "neighbours") if found["source"] == "runs" else "neighbours"
        subject = neighbours.row_subject(row)
        out.append(Difference(keys.view_key(subject), "neighbours", change, values[0], values[1], False, [flat],
                              subject, absent_wording(subject)))
    return out


def _status_text(section: Dict[str, Any]) -> Optional[str]:
    status = section.get("status")
    if status is None:
        return None
    detail = section.get("reason") or section.get("error")
    return f"{status}: {detail}" if detail and status != "ok" else status


def _merge_instances(diffs: List[Difference], va: View, vb: View) -> List[Difference]:
    """The same change on several GPUs/workers is one difference ('gpu.*.power.limit_w')."""
    groups: Dict[Tuple[str, str, str, str, str, bool], List[Difference]] = {}
    rest: List[Difference] = []
    for d in diffs:
        subject = d.subject
        per_instance = ((subject.where == "gpu" and subject.entity.isdigit()) or subject.where == "process") \
            and bool(subject.aspect)
        if not per_instance:
            rest.append(d)
            continue
        sig = (subject.where, subject.aspect, d.change, _canon(d.good), _canon(d.bad), d.volatile)
        groups.setdefault(sig, []).append(d)
    for (where, aspect, _c, _g, _b, _v), members in groups.items():
        if len(members) == 1:
            rest.append(members[0])
            continue
        instances = sorted((m.subject.entity for m in members), key=lambda s: (len(s), s))
        if where == "gpu":  # every GPU either side has (its presence key's subject: where gpu, no aspect)
            everyone = {subject.entity for v in (va, vb) for k in v.presence
                        for subject in [v.subject_of(k)] if subject is not None and subject.where == "gpu"}
        else:
            everyone = set(va.workers) | set(vb.workers)
        label = "*" if set(instances) >= everyone else ",".join(instances)
        first = members[0]
        flats = sorted({f for d in members for f in d.flat_keys})
        rest.append(Difference(keys.instances_key(first.category, label, aspect), first.category, first.change, first.good,
                               first.bad, first.volatile, flats, first.subject._replace(entity=label), first.absent))
    return rest


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


class ShellTrap(NamedTuple):
    """A variable the capturing shell has with a value the workers do not run with (workers.parent_only.NAME,
    the shell's kind): a measurement warning, whose advice depends on what set the workers' value."""
    name: str
    value: str  # the shell's
    where: str  # "good", "bad" or "both snapshots"
    seen: str  # the workers' value ("unset", "mixed")
    side: str  # the side whose workers are described ("bad" when both)

    def warning(self, setter: str = "") -> str:
        """The warning line; `setter`: what sets the workers' value in-process (an edited file's patch and its
        line), which an export in the shell cannot override: the place to change it."""
        head = f"{self.name}={self.value} is set in the shell that captured {self.where}, but the workers see {self.seen}"
        if setter:
            return f"{head}: {setter} sets it in-process, over any export: change it there, not in the shell"
        return f"{head}: setting it in that shell does not reach the running server"


def _warnings(good: Dict[str, Any], bad: Dict[str, Any], va: View, vb: View, compare_hosts: bool = True,
              traps: Optional[List[ShellTrap]] = None) -> List[str]:
    out: List[str] = []
    ga, ba = good.get("sections") or {}, bad.get("sections") or {}
    for name in sorted(set(ga) | set(ba)):
        sa, sb = ga.get(name) or {}, ba.get(name) or {}
        if (sa.get("status") == "ok") == (sb.get("status") == "ok"):
            continue
        side, section = ("bad", sb) if sa.get("status") == "ok" else ("good", sa)
        status = section.get("status") or "absent"
        detail = section.get("reason") or section.get("error")
        out.append(f"{name} {status} in {side}{f' ({detail})' if detail else ''}: "
                   f"can't compare {knowledge.section_compares(name)}")
    for side, view in (("good", va), ("bad", vb)):
        if view.unreadable_workers:
            out.append(f"{side}: environment of {len(view.unreadable_workers)} worker(s) unreadable "
                       f"({', '.join(view.unreadable_workers[:4])}): capture as their user or with the probe")
    # Parent-only variables: a cause candidate and a measurement warning. The server's own parent
    # first: it is the headline ("the parent shows it, the TP workers never saw it").
    server_warnings: List[str] = []
    for name in sorted({subject.entity for v in (va, vb) for k in v.values["workers"]
                        for subject in [v.subject_of(k)] if subject is not None and subject.where == "parent_only"}):
        key = keys.parent_only_key(name)
        sides = [s for s, v in (("good", va), ("bad", vb)) if key in v.values["workers"]]
        view = vb if "bad" in sides else va
        value = view.values["workers"][key]
        seen = "unset" if value["workers"] is None else value["workers"]
        where = "both snapshots" if len(sides) == 2 else sides[0]
        if value.get("in") == "server":
            info = view.parent_only_info.get(name) or {}
            when = ("set it after its TP workers started" if info.get("late")
                    else "has it, yet its TP workers were started without it")
            server_warnings.append(
                f"{name}={value['parent']}: the server's parent process ({info.get('process', '?')}) {when} "
                f"({where}); the TP workers see {seen}: measurements of that server ran without it")
            continue
        trap = ShellTrap(name, str(value["parent"]), where, str(seen), "bad" if "bad" in sides else "good")
        out.append(trap.warning())
        if traps is not None:
            traps.append(trap)
    out[:0] = server_warnings
    for side, view in (("good", va), ("bad", vb)):
        if view.workers and view.worker_env_source == "proc":
            out.append(f"{side}: workers' environments come from /proc/PID/environ (as at exec); changes made "
                       "in-process (engine.py, sitecustomize.py) are invisible without the probe (--probe-dir)")
    if compare_hosts and good.get("host") and bad.get("host") and good.get("host") != bad.get("host"):
        out.append(f"good and bad come from different hosts ({good.get('host')} vs {bad.get('host')})")
    return out


# ---------------------------------------------------------------- display

def setting_value(subject: Subject, value: Any) -> Any:
    """A variable's value itself, where the view keeps more beside it (nccl_conf: its file)."""
    if subject.where == "nccl_conf" and isinstance(value, dict):
        return value.get("value")
    return value


def display(subject: Subject, value: Any) -> Any:
    """A short, readable form of a view value for output (scalars stay scalars)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):
        if all(isinstance(v, (str, int, float, bool)) or v is None for v in value):
            return fmt.clip(" ".join(str(v) for v in value))
        return fmt.clip(json.dumps(value, sort_keys=True, default=str))
    if not isinstance(value, dict):
        return fmt.clip(str(value))
    where, aspect = subject.where, subject.aspect
    if where == "nccl_conf":  # a setting from NCCL's config files, with its file
        return f"{value.get('value')} from {value.get('file')}"
    if where == "neighbour":
        side = "bad"  # describe() reads a row: one side of it is enough to word this value
        return neighbours.describe({"kind": aspect, "gpu": subject.item, side: value}, side,
                                   str(value.get("source") or "runs"))
    if where == "integrity":
        state = value.get("state", "modified")
        if state == "modified":
            sha = value.get("actual_sha256") or ""
            size = value.get("actual_size")
            return f"modified (sha256 {sha[:12]}{f', {size} bytes' if size is not None else ''})"
        return state
    if where == "packages":
        text = str(value.get("version"))
        if isinstance(value.get("build"), dict):  # compared only at one version (views.comparable_builds)
            text += f" [{knowledge.build_summary(value['build'])}]"
        origin = value.get("origin") or {}
        kind = origin.get("kind") if isinstance(origin, dict) else None
        if kind and kind != "index":
            url = origin.get("url") or ""
            commit = origin.get("commit")
            text += f" ({kind}{' ' + url if url else ''}{' @' + str(commit)[:10] if commit else ''})"
        return text
    if where == "startup":
        text = f"{value.get('kind', 'hook')} sha256 {str(value.get('sha256') or '')[:12]}"
        if value.get("env_mentions"):
            text += "; mentions " + ", ".join(map(str, value["env_mentions"]))
        return text
    if where == "parent_only":
        seen = value.get("workers")
        if value.get("in") == "server":
            return f"server parent {value.get('parent')}, TP workers {'unset' if seen is None else seen}"
        return f"shell {value.get('parent')}, workers {'unset' if seen is None else seen}"
    if where == "in_process":
        after = ", then ".join("unset" if v is None else str(v) for v in value.get("after") or []) or "?"
        start = value.get("start")
        return fmt.clip(f"{after} in-process (was {'unset' if start is None else start} at start)")
    if where == "library":  # a mapped shared object: its file, version and identity
        identity = str(value.get("identity") or "")
        shown = identity[:19] if identity.startswith("sha256:") else (f"build-id {identity[:12]}" if identity else "")
        parts = [str(p) for p in (value.get("version"), shown) if p]
        return fmt.clip(f"{value.get('path')} ({', '.join(parts)})" if parts else str(value.get("path")), 300)
    if where == "process" and aspect.startswith("shadowed."):
        return fmt.clip(f"{aspect[len('shadowed.'):]} loaded from {value.get('file')} instead of "
                        f"{value.get('instead_of')}", 300)
    if aspect == "disagree":
        return fmt.instances(value)
    if where == "git" and aspect == "stash":
        if not value:
            return "empty"
        first = value.get("stash@{0}") or value[sorted(value)[0]]
        message = first.get("message") if isinstance(first, dict) else first
        return fmt.clip(f"{len(value)} entr{'y' if len(value) == 1 else 'ies'}: {message}")
    if where == "git" and aspect in ("dirty", "untracked"):
        status = "untracked" if aspect == "untracked" else GIT_STATUS_WORDS.get(str(value.get("status", "M")),
                                                                                 str(value.get("status")))
        sha = str(value.get("sha256") or "")[:12]
        return f"{status} (sha256 {sha})" if sha else status
    if where == "git":
        return f"{value.get('branch')}@{str(value.get('head') or '')[:10]}"
    if where == "patches":  # a recorded patch file (its hunks' values are their statuses)
        if "name" in value:
            return "given"
        sha = str(value.get("sha256") or "")
        return f"sha256 {sha[:12]}" + (f" ({value['status']})" if value.get("status") else "") if sha else \
            str(value.get("status") or "unreadable")
    if where == "files":
        if "error" in value:
            return f"error: {value['error']}"
        return f"sha256 {str(value.get('sha256') or '')[:12]} ({value.get('size')} bytes)"
    return fmt.clip(json.dumps(value, sort_keys=True, default=str))
