"""Text output of `envsnap diff` and `envsnap rank` (pure: result dict in, string out).

Written for 2 a.m.: the verdict first, then the numbered likely causes with their one-line
reason, then a one-line count of differences per category (the full list with -v/--all).
"""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap.diff import CATEGORY_ORDER

DEFAULT_TOP = 5
# How an absent value reads, per category: NCCL logs a variable only when it reads it, so no line is "not logged", never "unset".
_ABSENT = {"integrity": "as installed", "git": "clean", "startup": "absent", "nccl": "not logged"}


def _value(category: str, value: Any) -> str:
    if value is None:
        return _ABSENT.get(category, "unset")
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _change(item: Dict[str, Any]) -> str:
    return f"{_value(item['category'], item['good'])} \u2192 {_value(item['category'], item['bad'])}"


def _side(meta: Dict[str, Any]) -> str:
    bits = [meta.get("label") or "(no label)"]
    if meta.get("host"):
        bits.append(meta["host"])
    if meta.get("created"):
        bits.append(str(meta["created"])[:19].replace("T", " "))
    return ", ".join(bits)


def render_diff(result: Dict[str, Any], verbose: bool = False, top: int = DEFAULT_TOP) -> str:
    lines: List[str] = []
    verdict = result["verdict"]
    lines.append(verdict["summary"])
    lines.append(f"good: {_side(result['good'])}   bad: {_side(result['bad'])}")
    decomposition = verdict.get("decomposition")
    if decomposition and decomposition.get("side") not in (None, "unclear"):
        lines.append(f"EAGLE-3: {decomposition['explanation']}")
    if result["warnings"]:
        lines.append("")
        lines.append("warnings:")
        lines.extend(f"  ! {w}" for w in result["warnings"])
    causes = result["causes"][:top] if top else result["causes"]
    lines.append("")
    if causes:
        lines.append("likely causes (most likely first):")
        width = len(str(len(causes)))
        for cause in causes:
            lines.append(f"  {cause['rank']:>{width}}. [{cause['score']:.2f}] {cause['key']}  {_change(cause)}"
                         f"  ({cause['component']})")
            lines.append(f"  {'':>{width}}  why: {cause['why']}")
            if verbose:
                for line in cause.get("evidence", [])[1:]:
                    lines.append(f"  {'':>{width}}   - {line}")
        more = len(result["causes"]) - len(causes)
        if more > 0:
            lines.append(f"  … {more} more (--top N, or --format json)")
    else:
        lines.append("no relevant differences: the environments match (volatile fields aside)")
    differences = result["differences"]
    shown = [d for d in differences if not d.get("volatile")]
    hidden = [d for d in differences if d.get("volatile")]
    counts: Dict[str, int] = {}
    for d in differences:
        counts[d["category"]] = counts.get(d["category"], 0) + 1
    order = {c: i for i, c in enumerate(CATEGORY_ORDER)}
    summary = ", ".join(f"{c} {n}" for c, n in sorted(counts.items(), key=lambda kv: (order.get(kv[0], 99), kv[0])))
    lines.append("")
    lines.append(f"differences: {len(differences)}" + (f" ({summary})" if summary else "")
                 + (f"; {len(hidden)} volatile included" if hidden else ""))
    if verbose or hidden:
        current = None
        for d in sorted(differences, key=lambda d: (order.get(d["category"], 99), d["key"])):
            if d["category"] != current:
                current = d["category"]
                lines.append(f"  [{current}]")
            mark = " (volatile)" if d.get("volatile") else ""
            lines.append(f"    {d['change']:<7} {d['key']}  {_change(d)}{mark}")
    elif shown:
        lines.append("  (-v lists them all; --all adds volatile fields)")
    return "\n".join(lines) + "\n"


def render_rank(result: Dict[str, Any], top: int = 0) -> str:
    lines: List[str] = []
    name = result["metric"]
    snaps = result["snapshots"]
    lines.append(f"association with {name} across {len(snaps)} snapshots "
                 f"({result['direction']} is better)")
    for snap in snaps:
        lines.append(f"  {snap['file']}: median {snap['median']:g} (n={snap['n']})  {snap.get('label') or ''}".rstrip())
    for warning in result["warnings"]:
        lines.append(f"  ! {warning}")
    items = result["associations"][:top] if top else result["associations"]
    lines.append("")
    if not items:
        lines.append("no key varies across these snapshots (volatile fields aside)")
    for item in items:
        effect = "n/a" if item["effect_pct"] is None else f"{item['effect_pct']:.0f}%"
        lines.append(f"  {item['rank']}. [{item['score']:.2f}] {item['key']}  effect {effect}, "
                     f"p={item['p_value']:.2g} ({item['component']})")
        lines.append(f"     {item['why']}")
    return "\n".join(lines) + "\n"
