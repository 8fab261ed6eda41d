"""The ranked causes: each with its score, evidence and patches, an anchor to link to, and the note of the
group of causes it cannot be told apart from."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from envsnap import format as fmt
from envsnap.model.result_types import DiffResult
from envsnap.render.report.common import PATCH_ID, missing_words
from envsnap.render.text import undecided_hints

MAX_CAUSES_SHOWN = 8
MAX_CAUSES = 100


def _group_notes(result: DiffResult, causes: List[Dict[str, Any]]) -> None:
    """The note of each group of causes that cannot be told apart, on its last cause shown in a list
    (the bisect command on the first group only: it is the same command for every group)."""
    groups = {g["rank"]: g for g in result["groups"]}
    told = False
    for index, cause in enumerate(causes):
        group = groups.get(cause["rank"])
        last = index + 1 == len(causes) or causes[index + 1]["rank"] != cause["rank"]
        if not group or not last:
            continue
        shown = sum(1 for c in causes if c["rank"] == cause["rank"])
        hidden = f", {group['size'] - shown} of them not shown" if shown < group["size"] else ""
        cause["group_note"] = fmt.value(f"{group['line']}{hidden}", 500)
        bisect_line = group.get("bisect_line")
        if bisect_line and not told:
            cause["bisect_line"] = fmt.value(bisect_line, 800)
            told = True


def _anchor_ids(causes: List[Dict[str, Any]]) -> None:
    """Each cause's `anchor`, unique in the report: `cause-N` for the first cause of rank N (so a link
    to a rank lands on it), `cause-N-2`, `cause-N-3`... for the causes tied with it."""
    taken: Dict[str, int] = {}
    for cause in causes:
        base = f"cause-{cause['rank']}"
        taken[base] = taken.get(base, 0) + 1
        cause["anchor"] = base if taken[base] == 1 else f"{base}-{taken[base]}"


def cause_links(result: DiffResult, shown: List[Dict[str, Any]]) -> Dict[str, Tuple[int, str]]:
    """{raw cause key: (rank, anchor)} for the parts of the page that point at causes; the anchor is "" for a
    cause the report does not show (`shown`: the causes_view entries, in the analysis' order)."""
    anchors = {raw["key"]: view["anchor"] for raw, view in zip(result["causes"], shown)}
    return {raw["key"]: (raw["rank"], anchors.get(raw["key"], "")) for raw in result["causes"]}


def causes_view(result: DiffResult) -> Dict[str, Any]:
    causes = []
    for raw in result["causes"][:MAX_CAUSES]:
        score = raw["score"]  # in [0, 1] (analysis/rank/factors.Score)
        causes.append({
            "rank": raw["rank"], "key": fmt.value(raw["key"], 200),
            "category": fmt.value(raw["category"], 40), "component": fmt.value(raw["component"], 40),
            "score": f"{score:.2f}", "score_pct": int(round(score * 100)),
            "good": fmt.value(raw["good"]), "bad": fmt.value(raw["bad"]),
            "good_absent": missing_words(raw, "good"), "bad_absent": missing_words(raw, "bad"),
            "why": fmt.value(raw["why"], 500) if raw["why"] else "",
            "evidence": [fmt.value(e, 500) for e in raw["evidence"][:20]],
            "reach": fmt.value(raw["reach"]["line"], 500), "tier": raw["reach"]["tier"],
            "size": fmt.value(raw["size"]["line"], 300) if raw.get("size") else "",
            "folded": [{"key": fmt.value(f["key"], 200), "relation": fmt.value(f["relation"], 80),
                        "why": fmt.value(f["why"], 300)} for f in (raw.get("folded") or [])[:20]],
            # ids become anchors: only envsnap's own form is linked
            "patches": [p for p in raw["patches"] if PATCH_ID.fullmatch(p)],
            "tied": bool(raw["tied"]), "group_note": "", "bisect_line": "",
        })
    _anchor_ids(causes)
    _group_notes(result, causes[:MAX_CAUSES_SHOWN])
    _group_notes(result, causes[MAX_CAUSES_SHOWN:])
    total = len(result["causes"])
    return {"shown": causes[:MAX_CAUSES_SHOWN], "more": causes[MAX_CAUSES_SHOWN:],
            "hidden": max(0, total - MAX_CAUSES), "total": total, "undecided": undecided_hints(result["causes"])}
