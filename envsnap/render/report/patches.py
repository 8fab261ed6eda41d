"""Patches: each changed file's diff (or whole text), linked to and from the causes it supports; and the
recorded patches (--patch), hunk by hunk, with their status on each side."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

from envsnap import format as fmt
from envsnap.analysis.compare import patch_status
from envsnap.analysis.compare.patches import counted
from envsnap.model.result_types import DiffResult
from envsnap.render.report.common import PATCH_ID, ROWS_MORE

HUNK_SHOWN = 40  # lines of a hunk shown before the rest folds into a closed <details>
CONTENT_SHOWN = 400  # lines of a file shown whole (no diff) before the rest is counted only


def _diff_line_class(line: str) -> str:
    if line.startswith(("diff --git ", "index ", "--- ", "+++ ", "new file mode", "deleted file mode", "similarity ",
                        "rename ", "old mode", "new mode", "Binary files")):
        return "meta"
    return {"+": "add", "-": "del", "@": "hunk", "\\": "meta"}.get(line[:1], "ctx")


def _hunks(diff: str) -> List[Dict[str, Any]]:
    """A diff as blocks: the file headers, then each hunk; a long hunk's tail folds."""
    blocks: List[Dict[str, Any]] = []
    for line in diff.rstrip("\n").split("\n"):
        cls = _diff_line_class(line)
        if cls == "hunk" or not blocks or (cls == "meta" and line.startswith("diff --git ")):
            blocks.append({"lines": []})
        blocks[-1]["lines"].append({"cls": cls, "text": line})
    for block in blocks:
        lines = block.pop("lines")
        block["shown"], block["folded"] = lines[:HUNK_SHOWN], lines[HUNK_SHOWN:]
    return blocks


def patches_view(result: DiffResult, links: Dict[str, Tuple[int, str]]) -> Dict[str, Any]:
    """The Patches section: each changed file's diff, linked to and from the causes it supports
    (`links`: causes.cause_links; a cause the report does not show is named, unlinked)."""
    patches = []
    kinds = []
    for raw in result["patches"]:
        if not PATCH_ID.fullmatch(raw["id"]):  # ids become anchors: only envsnap's own form is used
            continue
        kinds.append({"kind": raw["kind"]})
        supports = []
        for key in raw["causes"]:
            rank, anchor = links.get(key, (None, ""))
            supports.append({"key": fmt.value(key, 200), "anchor": anchor, "rank": rank})
        diff, content = raw["diff"], raw["content"]
        content_lines = content.rstrip("\n").split("\n") if content is not None else []
        patches.append({
            "id": raw["id"], "kind": fmt.value(raw["kind"], 20), "title": fmt.value(raw["title"], 300),
            "basis": fmt.value(raw["basis"], 600), "note": fmt.value(raw["note"], 600) if raw["note"] else "",
            "good_sha": fmt.short_hash(raw["good_sha256"]) if raw["good_sha256"] else "—",
            "bad_sha": fmt.short_hash(raw["bad_sha256"]) if raw["bad_sha256"] else "—",
            "counts": f"−{raw['removed']} +{raw['added']}" if diff else fmt.value(raw["shows"], 120),
            "truncated": raw["truncated"], "redacted": raw["redacted"],
            "hunks": _hunks(diff) if diff else [],
            "content": content_lines[:CONTENT_SHOWN], "content_total": len(content_lines),
            "supports": supports,
        })
    return {"patches": patches, "total": len(patches), "counted": counted(kinds)}


def patch_status_view(result: DiffResult, links: Dict[str, Tuple[int, str]]) -> Dict[str, Any]:
    """The recorded patches (--patch): each patch's hunks with their status on GOOD and BAD; a hunk
    whose status differs is marked, linked to its cause (`links`: causes.cause_links), and shows its text."""
    patches = []
    for raw in result.get("patch_status", [])[:ROWS_MORE]:
        sides = {}
        for side, info in (("good", raw["good"]), ("bad", raw["bad"])):
            where, note = "", ""
            if info is not None:
                where = patch_status.target_text(info["target"])
                note = fmt.value(info["error"] or info["note"], 400) if (info["error"] or info["note"]) else ""
            sides[side] = {"given": info is not None,
                           "status": fmt.value(info["status"], 60) if info is not None else "not given",
                           "where": fmt.value(where, 300), "note": note}
        rows = []
        for hunk in raw["hunks"][:ROWS_MORE]:
            text = hunk["text"] if hunk["changed"] else None
            rows.append({"n": fmt.value(hunk["n"], 10), "file": fmt.value(hunk["file"], 300),
                         "header": fmt.value(hunk["header"], 200), "changed": hunk["changed"],
                         "good": fmt.value(hunk["good"], 40) if hunk["good"] is not None else "—",
                         "bad": fmt.value(hunk["bad"], 40) if hunk["bad"] is not None else "—",
                         "rank": hunk.get("rank"),
                         "anchor": links.get(hunk["key"], (None, ""))[1],
                         "why": "; ".join(f"{s}: {fmt.value(w, 200)}" for s, w in sorted(hunk["why"].items())),
                         "hunks": _hunks(text) if text else []})
        if sides["good"]["where"] == sides["bad"]["where"] and not sides["good"]["note"]:
            sides["good"]["where"] = ""  # one target line for both sides
        patches.append({"name": fmt.value(raw["name"], 300), "good": sides["good"], "bad": sides["bad"],
                        "rows": rows, "changed": sum(1 for r in rows if r["changed"])})
    return {"patches": patches, "total": len(patches)}
