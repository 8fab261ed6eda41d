"""N >= 3 measured snapshots: rank every key that varies by how much of the metric's variance its
value explains (eta squared) with a permutation p-value."""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Sequence

from envsnap.analysis import diff as diff_mod
from envsnap.analysis import knowledge, stats
from envsnap.analysis import views as views_mod
from envsnap.analysis.result import SCHEMA_VERSION
from envsnap import format as fmt
from envsnap.analysis.verdict import choose_metric, run_values
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics

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
    usable = views_mod.usable_sections(list(snaps))
    views = [views_mod.build_view(s, usable) for s in snaps]
    keys: Dict[str, str] = {}
    for view in views:
        for category, key in views_mod.iter_keys(view):
            keys.setdefault(key, category)
    items = []
    for key in sorted(keys):
        raw = [_lookup(view, keys[key], key) for view in views]
        labels = [json.dumps(v, sort_keys=True, default=str) for v in raw]
        if len(set(labels)) < 2:
            continue  # constant everywhere: says nothing
        flats = sorted({f for view in views for f in view.flats.get(key, ())})
        subject = next((v.subject_of(key) for v in views if v.subject_of(key) is not None), None) \
            or views_mod.Subject(keys[key], key)
        if knowledge.is_volatile(key) or (flats and all(knowledge.is_volatile(f) for f in flats)):
            continue
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
        rule = knowledge.rule_for(key)
        items.append({"key": key, "category": keys[key], "component": rule.component,
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
    warnings = []
    floor = min((it["p_value"] for it in items), default=1.0)
    if len(snaps) < 5:
        warnings.append(f"{len(snaps)} snapshots: the smallest possible permutation p-value is large "
                        f"(best here {floor:.2g}); treat the order as a hint, not proof")
    return {"schema_version": SCHEMA_VERSION, "metric": name, "direction": metrics.direction(name, overrides),
            "snapshots": snapshots, "associations": items, "warnings": warnings}


def _lookup(view: views_mod.View, category: str, key: str) -> Any:
    return view.values[category].get(key)
