"""The whole good-vs-bad analysis in one result: verdict, ranked causes, differences, warnings
(the shape `envsnap diff --format json` prints and every renderer formats)."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set

from envsnap.analysis import diff as diff_mod
from envsnap.analysis import patches as patches_mod
from envsnap.analysis.causes import rank_causes
from envsnap.analysis.verdict import build_verdict

SCHEMA_VERSION = 1


# ---------------------------------------------------------------- the whole analysis

def _meta(snap: Dict[str, Any], path: Optional[str]) -> Dict[str, Any]:
    return {"label": snap.get("label"), "host": snap.get("host"), "created": snap.get("created"),
            "file": path, "provenance": snap.get("provenance")}


def analyze(good: Dict[str, Any], bad: Dict[str, Any], metric: Optional[str] = None, include_volatile: bool = False,
            good_file: Optional[str] = None, bad_file: Optional[str] = None,
            top: Optional[int] = None, pristine: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """The diff/rank result (the shape `envsnap diff --format json` prints). `pristine`: texts of
    installed files as released, found offline by the caller (capture/pristine.lookup)."""
    verdict, run_warnings = build_verdict(good, bad, metric)
    comp = diff_mod.compare(good, bad)
    causes = rank_causes(comp, verdict)
    patches = patches_mod.build(good, bad, pristine)
    patches_mod.link(causes, patches)
    if top is not None:
        causes = causes[:max(0, top)]
    differences = [d.to_json() for d in comp.differences if include_volatile or not d.volatile]
    warnings = list(comp.warnings) + run_warnings
    for side, snap in (("good", good), ("bad", bad)):
        prov = snap.get("provenance")
        if isinstance(prov, dict) and prov.get("kind") == "illustrative":
            warnings.append(f"{side} is illustrative: {prov.get('note', 'not a measurement')}")
    return {"schema_version": SCHEMA_VERSION, "good": _meta(good, good_file), "bad": _meta(bad, bad_file),
            "verdict": verdict, "causes": causes, "differences": differences, "patches": patches,
            "warnings": _dedupe(warnings)}


def build_result(good: Dict[str, Any], bad: Dict[str, Any], *, good_file: Optional[str] = None,
                 bad_file: Optional[str] = None, metric: Optional[str] = None, include_volatile: bool = False,
                 top: Optional[int] = None, pristine: Optional[Dict[str, Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Keyword-only alias of analyze() (the name envsnap.report calls)."""
    return analyze(good, bad, metric=metric, include_volatile=include_volatile, good_file=good_file,
                   bad_file=bad_file, top=top, pristine=pristine)


def _dedupe(items: List[str]) -> List[str]:
    seen: Set[str] = set()
    out = []
    for item in items:
        if item not in seen:
            seen.add(item)
            out.append(item)
    return out


def count_hidden(result: Dict[str, Any]) -> int:
    return sum(1 for d in result["differences"] if d.get("volatile"))
