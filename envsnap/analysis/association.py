"""N >= 3 measured snapshots: rank every key that varies by how much of the metric's variance its
value explains (eta squared) with a permutation p-value. Merged multi-node snapshots are ranked
node by node, with node-qualified keys (analysis/nodes.py)."""
from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap import format as fmt
from envsnap.analysis import diff as diff_mod
from envsnap.analysis import knowledge, stats
from envsnap.analysis import nodes as nodes_mod
from envsnap.analysis import views as views_mod
from envsnap.analysis.result import SCHEMA_VERSION
from envsnap.analysis.verdict import choose_metric, run_values
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics
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
    candidates, node_warnings = _candidates(snaps)
    items = []
    for key, base, node, category, raw, subject in candidates:
        labels = [json.dumps(v, sort_keys=True, default=str) for v in raw]
        eta2, p, method = stats.permutation_association(labels, medians)
        groups: Dict[str, List[float]] = {}
        shown: Dict[str, Any] = {}
        for label, value, m in zip(labels, raw, medians):
            groups.setdefault(label, []).append(m)
            shown[label] = diff_mod.display(subject, value)
        overall = stats.median(medians)
        group_medians = {label: stats.median(ms) for label, ms in groups.items()}
        spread = max(group_medians.values()) - min(group_medians.values())
        effect_pct = round(spread / abs(overall) * 100.0, 2) if overall else None
        ordered = sorted(group_medians.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [f"{'unset' if shown[l] is None else shown[l]}: {fmt.num(m)}{fmt.unit(name)} (n={len(groups[l])})"
                 for l, m in ordered[:4]]
        rule = knowledge.rule_for(base)
        items.append({"key": key, "category": category, "component": rule.component, "node": node,
                      "score": round(eta2, 3), "effect_pct": effect_pct, "p_value": round(p, 4), "method": method,
                      "values": [diff_mod.display(subject, v) for v in raw],
                      "why": f"{name} median by value \u2014 " + "; ".join(parts),
                      "_sort": (-round(eta2, 6), p, -rule.weight, key)})
    items.sort(key=lambda it: it["_sort"])
    for index, item in enumerate(items, 1):
        item.pop("_sort")
        item["rank"] = index
    snapshots = [{"file": f, "label": s.get("label"), "host": s.get("host"), "created": s.get("created"),
                  "median": stats._r(m), "n": len(v[name])} for f, s, v, m in zip(files, snaps, values, medians)]
    warnings = list(node_warnings)
    floor = min((it["p_value"] for it in items), default=1.0)
    if len(snaps) < 5:
        warnings.append(f"{len(snaps)} snapshots: the smallest possible permutation p-value is large "
                        f"(best here {floor:.2g}); treat the order as a hint, not proof")
    return {"schema_version": SCHEMA_VERSION, "metric": name, "direction": metrics.direction(name, overrides),
            "snapshots": snapshots, "associations": items, "warnings": warnings}


# (key, base key, node, category, value per snapshot, subject) of a key that varies across the snapshots
_Candidate = Tuple[str, str, Optional[str], str, List[Any], views_mod.Subject]


def _candidates(snaps: Sequence[Dict[str, Any]]) -> Tuple[List[_Candidate], List[str]]:
    """Every non-volatile key whose value varies across the snapshots, and warnings.

    Merged multi-node snapshots are compared node by node (nodes matched by host name), each key
    qualified by its node as diff does ("node-a/workers.env.NCCL_ALGO"); a key that varies the same way
    on several nodes is one candidate ("*/..." on every node). A node missing from some snapshots is
    not compared: its presence is a candidate of its own ("node-c/node") and a warning says so."""
    if not any(nodes_mod.is_cluster(s) for s in snaps):
        usable = views_mod.usable_sections(list(snaps))
        return _varying(None, [views_mod.build_view(s, usable) for s in snaps]), []
    per_snap = [node_snapshots(s) for s in snaps]
    hosts = sorted(set().union(*per_snap))
    everywhere = [h for h in hosts if all(h in nodes for nodes in per_snap)]
    found: List[_Candidate] = []
    warnings = []
    for host in hosts:
        if host in everywhere:
            node_snaps = [nodes[host] for nodes in per_snap]
            usable = views_mod.usable_sections(node_snaps)
            found.extend(_varying(host, [views_mod.build_view(n, usable, host) for n in node_snaps]))
            continue
        present = ["captured" if host in nodes else None for nodes in per_snap]
        found.append((nodes_mod.qualify(host, "node"), "node", host, "sections", present,
                      views_mod.Subject("node", host, node=host)))
        warnings.append(f"node {host} is in {sum(1 for p in present if p)} of {len(snaps)} snapshots only: its sections "
                        f"are not compared (its presence is ranked as {nodes_mod.qualify(host, 'node')})")
    # The same variation on several nodes is one candidate.
    merged: Dict[Tuple[str, str], List[_Candidate]] = {}
    for cand in found:
        merged.setdefault((cand[1], json.dumps(cand[4], sort_keys=True, default=str)), []).append(cand)
    out = []
    for members in merged.values():
        key, base, node, category, raw, subject = members[0]
        if len(members) > 1:
            node = nodes_mod.label([str(m[2]) for m in members], everywhere)
            key, subject = nodes_mod.qualify(node, base), replace(subject, node=node)
        out.append((key, base, node, category, raw, subject))
    return out, warnings


def _varying(node: Optional[str], views: List[views_mod.View]) -> List[_Candidate]:
    """The keys of one node's (or one single-node snapshot's) views whose value varies, volatile ones aside."""
    keys: Dict[str, str] = {}
    for view in views:
        for category, key in views_mod.iter_keys(view):
            keys.setdefault(key, category)
    out: List[_Candidate] = []
    for key in sorted(keys):
        raw = [view.values[keys[key]].get(key) for view in views]
        if len({json.dumps(v, sort_keys=True, default=str) for v in raw}) < 2:
            continue  # constant everywhere: says nothing
        flats = sorted({f for view in views for f in view.flats.get(key, ())})
        if knowledge.is_volatile(key) or (flats and all(knowledge.is_volatile(f) for f in flats)):
            continue
        subject = next((v.subject_of(key) for v in views if v.subject_of(key) is not None), None) \
            or views_mod.Subject(keys[key], key, node=node)
        out.append((nodes_mod.qualify(node, key), key, node, keys[key], raw, subject))
    return out
