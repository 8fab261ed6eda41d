"""N >= 3 measured snapshots: rank every key that varies by how much of the metric's variance its
value explains, with a permutation p-value, and group the keys that cannot be told apart.

The unit of evidence is the run, the unit of independence the snapshot (stats.clustered_association):
eta squared is computed over every run, grouped by its snapshot's value of the key, so the runs'
spread inside a snapshot counts against a key whose snapshot medians happen to differ; the
p-value relabels whole snapshots, because the runs of one snapshot share its environment, machine
state and time and are not independent observations of the key.

A key with a value of its own in every snapshot (a title holding a port, a timestamp) splits the runs by
snapshot: its eta squared is all the variance between snapshots, and no relabelling can test it. It is
flagged (`unique_per_snapshot`, `testable: false`) and ranked after every key that can be tested.

Keys whose values split the snapshots the same way in every snapshot (the same partition, whatever
the values) change together: no set of these snapshots can tell them apart, and they get the same
score and p-value by construction. They are reported as one group ("confounded"), ranked together,
never ordered among themselves by name or prior.

Merged multi-node snapshots are ranked node by node, with node-qualified keys (analysis/compare/nodes.py).
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap import format as fmt
from envsnap.analysis import knowledge
from envsnap.analysis.compare import (
    comparison_warnings,
    diff as diff_mod,
    nodes as nodes_mod,
    view_model,
    views as views_mod,
)
from envsnap.analysis.result import SCHEMA_VERSION
from envsnap.analysis.runs import stats
from envsnap.analysis.runs.verdict import choose_metric, run_values
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics
from envsnap.model.keys import Subject, qualify, view_key
from envsnap.model.merge import node_snapshots

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
            overrides.update({str(k): v for k, v in stored.items() if v in metrics.DIRECTIONS})
    medians = [stats.median(v[name]) for v in values]
    clusters = [v[name] for v in values]
    all_runs = [x for c in clusters for x in c]
    overall = stats.median(all_runs)
    cache: Dict[Tuple[int, ...], Tuple[float, float, str]] = {}
    candidates, node_warnings = _candidates(snaps)
    items = []
    for key, base, node, category, raw, subject in candidates:
        labels = [json.dumps(v, sort_keys=True, default=str) for v in raw]
        partition = _partition(labels)
        if partition not in cache:  # keys that split the snapshots alike share one test
            cache[partition] = stats.clustered_association(labels, clusters)
        eta2, p, method = cache[partition]
        groups: Dict[str, List[float]] = {}
        snaps_per: Dict[str, int] = {}
        shown: Dict[str, Any] = {}
        for label, value, runs_of in zip(labels, raw, clusters):
            groups.setdefault(label, []).extend(runs_of)
            snaps_per[label] = snaps_per.get(label, 0) + 1
            shown[label] = diff_mod.display(subject, value)
        group_medians = {label: stats.median(rs) for label, rs in groups.items()}
        spread = max(group_medians.values()) - min(group_medians.values())
        effect_pct = round(spread / abs(overall) * 100.0, 2) if overall else None
        ordered = sorted(group_medians.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [f"{'unset' if shown[label] is None else shown[label]}: {fmt.num(m)}{fmt.unit(name)} "
                 f"({_count(snaps_per[label], 'snapshot')}, {_count(len(groups[label]), 'run')})"
                 for label, m in ordered[:4]]
        rule = knowledge.rule_for(base)
        # A value of its own in every snapshot: each value stands for one snapshot, so grouping by it is grouping
        # by snapshot (its eta squared is all the variance between snapshots, the largest any key can have) and
        # no relabelling can tell it from chance. Flagged and ranked below every key that can be tested.
        unique = len(set(labels)) == len(labels)
        why = f"{name} median of the runs by value \u2014 " + "; ".join(parts)
        if unique:
            why = (f"a different value in each of the {len(labels)} snapshots (one snapshot per value): grouping "
                   f"by it is grouping by snapshot, so its association with {name} cannot be tested")
        items.append({"key": key, "category": category, "component": rule.component, "node": node,
                      "score": round(eta2, 3), "effect_pct": effect_pct, "p_value": round(p, 4), "method": method,
                      "values": [diff_mod.display(subject, v) for v in raw], "testable": not unique,
                      "unique_per_snapshot": unique, "why": why,
                      "_partition": partition, "_weight": rule.weight, "_eta2": eta2, "_p": p, "_unique": unique})
    items, confounded = _group_and_rank(items)
    snapshots = [{"file": f, "label": s.get("label"), "host": s.get("host"), "created": s.get("created"),
                  "median": stats._r(m), "n": len(v[name])} for f, s, v, m in zip(files, snaps, values, medians)]
    warnings = list(node_warnings)
    floor = min((float(it["p_value"]) for it in items if isinstance(it["p_value"], (int, float))), default=1.0)
    if len(snaps) < 5:
        warnings.append(f"{len(snaps)} snapshots: the smallest possible permutation p-value is large "
                        f"(best here {floor:.2g}); treat the order as a hint, not proof")
    untested = [str(it["key"]) for it in items if it["unique_per_snapshot"]]
    if untested:
        many = len(untested) != 1
        warnings.append(f"{len(untested)} key{'s' if many else ''} differ{'' if many else 's'} in every snapshot "
                        f"({', '.join(untested[:3])}{' ...' if len(untested) > 3 else ''}): one snapshot per value "
                        "cannot be tested, ranked after every key that can")
    if confounded:
        warnings.append(f"{len(confounded)} group{'s' if len(confounded) != 1 else ''} of keys change together in "
                        "every snapshot and cannot be told apart by these snapshots (a snapshot that changes one "
                        "without the others, or `envsnap bisect`, can)")
    return {"schema_version": SCHEMA_VERSION, "metric": name, "direction": metrics.direction(name, overrides),
            "snapshots": snapshots, "associations": items, "confounded": confounded, "warnings": warnings,
            "statistic": ("eta squared over every run grouped by its snapshot's value; p-value from relabelling "
                          "whole snapshots (runs of one snapshot are not independent)")}


def _partition(labels: Sequence[str]) -> Tuple[int, ...]:
    """How a key splits the snapshots, whatever its values: group numbers in order of first appearance."""
    first: Dict[str, int] = {}
    return tuple(first.setdefault(label, len(first)) for label in labels)


def _count(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _group_and_rank(items: List[Dict[str, Any]]) -> Tuple[List[Dict[str, Any]], List[Dict[str, Any]]]:
    """Rank units (a key, or a group of keys with the same partition) by score, then p, then the
    strongest prior in the unit; every key of a group gets the group's rank and the others' names."""
    by_partition: Dict[Tuple[int, ...], List[Dict[str, Any]]] = {}
    for item in items:
        by_partition.setdefault(item["_partition"], []).append(item)
    # Keys that can be tested first (a key unique per snapshot cannot: _unique), then by score, p and prior.
    ordered = sorted(by_partition.values(), key=lambda members: (members[0]["_unique"],
                                                                -round(members[0]["_eta2"], 6), members[0]["_p"],
                                                                -max(i["_weight"] for i in members),
                                                                min(i["key"] for i in members)))
    out: List[Dict[str, Any]] = []
    confounded: List[Dict[str, Any]] = []
    for rank, members in enumerate(ordered, 1):
        keys = sorted(i["key"] for i in members)
        for item in sorted(members, key=lambda i: i["key"]):
            for private in ("_partition", "_weight", "_eta2", "_p", "_unique"):
                item.pop(private)
            item["rank"] = rank
            if len(keys) > 1:
                item["confounded_with"] = [k for k in keys if k != item["key"]]
            out.append(item)
        if len(keys) > 1:
            confounded.append({"rank": rank, "keys": keys, "score": members[0]["score"], "p_value": members[0]["p_value"],
                               "testable": members[0]["testable"]})
    return out, confounded


# (key, base key, node, category, value per snapshot, subject) of a key that varies across the snapshots
_Candidate = Tuple[str, str, Optional[str], str, List[Any], Subject]


def _candidates(snaps: Sequence[Dict[str, Any]]) -> Tuple[List[_Candidate], List[str]]:
    """Every non-volatile key whose value varies across the snapshots, and warnings.

    Merged multi-node snapshots are compared node by node (nodes matched by host name), each key
    qualified by its node as diff does ("node-a/workers.env.NCCL_ALGO"); a key that varies the same way
    on several nodes is one candidate ("*/..." on every node). A node missing from some snapshots is
    not compared: its presence is a candidate of its own ("node-c/node") and a warning says so."""
    if not any(nodes_mod.is_cluster(s) for s in snaps):
        usable = views_mod.usable_sections(list(snaps))
        builds = views_mod.comparable_builds(snaps)
        alone: List[str] = []
        return _varying(None, [views_mod.build_view(s, usable, builds=builds) for s in snaps], alone), alone
    per_snap = [node_snapshots(s) for s in snaps]
    hosts = sorted(set().union(*per_snap))
    everywhere = [h for h in hosts if all(h in nodes for nodes in per_snap)]
    found: List[_Candidate] = []
    warnings: List[str] = []
    for host in hosts:
        if host in everywhere:
            node_snaps = [nodes[host] for nodes in per_snap]
            usable = views_mod.usable_sections(node_snaps)
            builds = views_mod.comparable_builds(node_snaps)
            found.extend(_varying(host, [views_mod.build_view(n, usable, host, builds=builds) for n in node_snaps],
                                 warnings))
            continue
        present = ["captured" if host in nodes else None for nodes in per_snap]
        subject = Subject("node", host, node=host)
        found.append((qualify(host, view_key(subject)), view_key(subject), host, "sections", present, subject))
        warnings.append(f"node {host} is in {sum(1 for p in present if p)} of {len(snaps)} snapshots only: its sections "
                        f"are not compared (its presence is ranked as {qualify(host, view_key(subject))})")
    # The same variation on several nodes is one candidate.
    merged: Dict[Tuple[str, str], List[_Candidate]] = {}
    for cand in found:
        merged.setdefault((cand[1], json.dumps(cand[4], sort_keys=True, default=str)), []).append(cand)
    out = []
    for members in merged.values():
        key, base, node, category, raw, subject = members[0]
        if len(members) > 1:
            node = nodes_mod.label([str(m[2]) for m in members], everywhere)
            key, subject = qualify(node, base), subject._replace(node=node)
        out.append((key, base, node, category, raw, subject))
    return out, warnings


def _varying(node: Optional[str], views: List[view_model.View], warnings: List[str]) -> List[_Candidate]:
    """The keys of one node's (or one single-node snapshot's) views whose value varies, volatile ones aside; a
    warning for each run command's process read in some snapshots only (its keys are left out)."""
    views_mod.drop_unstable(views)
    of_node = f" of node {node}" if node else ""
    unobserved = views_mod.drop_unobserved(views)
    for name in unobserved.processes:
        read = sum(1 for view in views if name in view.command_seen)
        warnings.append(comparison_warnings.partly_observed_warning(name, f"in {read} of {len(views)} snapshots{of_node}"))
    if unobserved.environment:
        read = sum(1 for view in views if not view.environment_unread)
        warnings.append(comparison_warnings.environment_unread_warning(f"in {read} of {len(views)} snapshots{of_node}"))
    keys: Dict[str, str] = {}
    for view in views:
        for category, key in view_model.iter_keys(view):
            keys.setdefault(key, category)
    out: List[_Candidate] = []
    for key in sorted(keys):
        raw = [view.values.get(keys[key], {}).get(key) for view in views]
        if len({json.dumps(v, sort_keys=True, default=str) for v in raw}) < 2:
            continue  # constant everywhere: says nothing
        flats = sorted({f for view in views for f in view.flat_of(key)})
        if knowledge.is_volatile(key) or (flats and all(knowledge.is_volatile(f) for f in flats)):
            continue
        subject = next((v.subject_of(key) for v in views if v.subject_of(key) is not None), None) \
            or Subject(keys[key], key, node=node)
        out.append((qualify(node, key), key, node, keys[key], raw, subject))
    return out
