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

How a difference reads (its absent side, its values in short) is wording.py's (each kind's own words:
displays/); what a comparison warns about is comparison_warnings.py's. Both are re-exported here, where their
callers have always found them.
"""
from __future__ import annotations

import inspect
import json
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Set, Tuple, Union

from envsnap.analysis import knowledge
from envsnap.analysis.compare import flags as flags_mod, neighbours, nodes as nodes_mod
from envsnap.analysis.compare.comparison_warnings import ShellTrap, comparison_warnings, node_warnings
from envsnap.analysis.compare.scalar_lists import changed_indices
from envsnap.analysis.compare.view_model import (
    MISSING,
    View,
    categories,
    category_key,
    leaves,
)
from envsnap.analysis.compare.views import (
    build_view,
    comparable_builds,
    drop_unobserved,
    drop_unstable,
    modified_entries_differing,
    usable_sections,
)
from envsnap.analysis.compare.wording import (
    GIT_STATUS_WORDS,
    NOT_CAPTURED,
    absent_on,
    absent_wording,
    display,
    parent_only_absent,
    setting_value,
    value_text,
)
from envsnap.model import keys
from envsnap.model.keys import Subject

__all__ = ["GIT_STATUS_WORDS", "NOT_CAPTURED", "Comparison", "Difference", "ShellTrap",
           "absent_wording", "compare", "display", "neighbour_differences", "parent_only_absent", "setting_value",
           "value_text"]


# A value as a view holds it: JSON's values (a snapshot's own), None where the key is absent.
ViewValue = Union[None, bool, int, float, str, List["ViewValue"], Dict[str, "ViewValue"]]


@dataclass
class Difference:
    key: str  # the readable key ("workers.env.NCCL_PROTO", "node-a/workers.env.NCCL_PROTO"): for people, never parsed
    category: str
    change: str  # changed | added | removed
    good: ViewValue  # raw view value (None when absent)
    bad: ViewValue
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
    shell_traps: List[ShellTrap] = field(default_factory=list)

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
    warnings = list(pairing.notes) + node_warnings([(p.node, p.warnings) for p in parts], pairing.compared)
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
    drop_unobserved((va, vb))
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
    warnings = comparison_warnings(good, bad, va, vb, compare_hosts=node is None, traps=traps)
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


def _diff_category(category: str, a: Dict[str, Any], b: Dict[str, Any], va: View, vb: View) -> List[Difference]:
    get_b = b.get
    changed = [k for k, v in a.items() if get_b(k, MISSING) != v]
    changed.extend(b.keys() - a.keys())
    presence = va.presence | vb.presence
    # A presence key on both sides whose value moved (a repository's head, a process's title) is the same
    # entity: its own keys (commit, dirty files, fields) say what changed, and must not be hidden by it.
    changed = [k for k in changed if not (k in presence and k in a and k in b)]
    gone = sorted(k for k in changed if k in presence)  # whole entities added/removed
    if gone:
        inside = keys.within(gone)
        changed = [k for k in changed if k in presence or not inside(k)]
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
            leaf_flats = sorted({keys.flat_key(f, *s) for f in flats for s in subs
                                 if not (s and s[-1] == "state" and category == "integrity")} or set(flats))
        volatile_flags = [knowledge.is_volatile(f) for f in leaf_flats]
        volatile = knowledge.is_volatile(key) or (bool(volatile_flags) and all(volatile_flags))
        if not volatile:
            leaf_flats = [f for f, v in zip(leaf_flats, volatile_flags) if not v] or leaf_flats
        change = "changed" if in_a and in_b else ("added" if in_b else "removed")
        subject = va.subject_of(key) or vb.subject_of(key) or Subject(category, key)
        absent = absent_on(subject, key in presence, vb if in_a else va, not (in_a and in_b))
        out.append(Difference(key, category, change, a.get(key), b.get(key), volatile, leaf_flats, subject,
                              absent))
    return out


_PLAIN = (dict, str, int, float, bool, type(None))


def _whole(value: Any, sub: Tuple[str, ...], out: Set[Tuple[str, ...]]) -> None:
    """An added, removed or retyped value: its own path and, for a dict, every leaf in it."""
    if isinstance(value, dict):
        out.update(sub + p for p, _ in leaves(value))
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
                        leaf_paths[key].update(sub + p for p, _ in leaves(t))
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
        if not keys.is_instance_field(subject):
            rest.append(d)
            continue
        sig = (subject.where, subject.aspect, d.change, _canon(d.good), _canon(d.bad), d.volatile)
        groups.setdefault(sig, []).append(d)
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            rest.append(first)
            continue
        instances = sorted((m.subject.entity for m in members), key=lambda s: (len(s), s))
        if keys.is_gpu(first.subject):  # every GPU either side has (its presence key's subject: a GPU, no aspect)
            everyone = {subject.entity for v in (va, vb) for k in v.presence
                        for subject in [v.subject_of(k)] if subject is not None and keys.is_gpu(subject)}
        else:
            everyone = set(va.workers) | set(vb.workers)
        label = "*" if set(instances) >= everyone else ",".join(instances)
        flats = sorted({f for d in members for f in d.flat_keys})
        merged = first.subject._replace(entity=label)  # "*" or "0,1" where the instance's own name was
        rest.append(Difference(keys.view_key(merged), first.category, first.change, first.good,
                               first.bad, first.volatile, flats, merged, first.absent))
    return rest


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)
