"""Patches: each changed file's diff (or whole text), linked to and from the causes it supports; and the
recorded patches (--patch), hunk by hunk, with their status on each side."""
from __future__ import annotations

from typing import Any, Dict, List

from envsnap.model.result_types import DiffResult
from envsnap.render.report.common import PATCH_ID, ROWS_MORE, fmt_value, short_hash

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


def patches_view(result: DiffResult, causes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The Patches section: each changed file's diff, linked to and from the causes it supports
    (`causes`: those the report shows, with their anchors; one it does not show is named, unlinked)."""
    ranks = {c["key"]: c["rank"] for c in result["causes"]}
    anchors = {c["key"]: c["anchor"] for c in causes if c["anchor"]}
    patches = []
    for raw in result["patches"]:
        if not PATCH_ID.fullmatch(raw["id"]):  # ids become anchors: only envsnap's own form is used
            continue
        supports = []
        for key in raw["causes"]:
            shown = fmt_value(key, 200)
            supports.append({"key": shown, "anchor": anchors.get(shown, ""), "rank": ranks.get(key)})
        diff, content = raw["diff"], raw["content"]
        content_lines = content.rstrip("\n").split("\n") if content is not None else []
        patches.append({
            "id": raw["id"], "kind": fmt_value(raw["kind"], 20), "title": fmt_value(raw["title"], 300),
            "basis": fmt_value(raw["basis"], 600), "note": fmt_value(raw["note"], 600) if raw["note"] else "",
            "good_sha": short_hash(raw["good_sha256"]) if raw["good_sha256"] else "—",
            "bad_sha": short_hash(raw["bad_sha256"]) if raw["bad_sha256"] else "—",
            "counts": f"−{raw['removed']} +{raw['added']}" if diff else fmt_value(raw["shows"], 120),
            "truncated": raw["truncated"], "redacted": raw["redacted"],
            "hunks": _hunks(diff) if diff else [],
            "content": content_lines[:CONTENT_SHOWN], "content_total": len(content_lines),
            "supports": supports,
        })
    return {"patches": patches, "total": len(patches)}


def patch_status_view(result: DiffResult, causes: List[Dict[str, Any]]) -> Dict[str, Any]:
    """The recorded patches (--patch): each patch's hunks with their status on GOOD and BAD; a hunk
    whose status differs is marked, linked to its cause (`causes`: those the report shows, with their
    anchors), and shows its text."""
    anchors = {c["key"]: c["anchor"] for c in causes if c["anchor"]}
    patches = []
    for raw in result.get("patch_status", [])[:ROWS_MORE]:
        sides = {}
        for side, info in (("good", raw["good"]), ("bad", raw["bad"])):
            where, note = "", ""
            if info is not None:
                target = info["target"]
                if target.get("root"):
                    owner = f" {target.get('dist')} {target.get('version') or ''}".rstrip() if target.get("dist") else ""
                    where = f"{target['root']} ({target.get('kind')}{owner}, -p{target.get('strip')})"
                note = fmt_value(info["error"] or info["note"], 400) if (info["error"] or info["note"]) else ""
            sides[side] = {"given": info is not None,
                           "status": fmt_value(info["status"], 60) if info is not None else "not given",
                           "where": fmt_value(where, 300), "note": note}
        rows = []
        for hunk in raw["hunks"][:ROWS_MORE]:
            text = hunk["text"] if hunk["changed"] else None
            rows.append({"n": fmt_value(hunk["n"], 10), "file": fmt_value(hunk["file"], 300),
                         "header": fmt_value(hunk["header"], 200), "changed": hunk["changed"],
                         "good": fmt_value(hunk["good"], 40) if hunk["good"] is not None else "—",
                         "bad": fmt_value(hunk["bad"], 40) if hunk["bad"] is not None else "—",
                         "rank": hunk.get("rank"),
                         "anchor": anchors.get(fmt_value(hunk["key"], 200), ""),
                         "why": "; ".join(f"{s}: {fmt_value(w, 200)}" for s, w in sorted(hunk["why"].items())),
                         "hunks": _hunks(text) if text else []})
        if sides["good"]["where"] == sides["bad"]["where"] and not sides["good"]["note"]:
            sides["good"]["where"] = ""  # one target line for both sides
        patches.append({"name": fmt_value(raw["name"], 300), "good": sides["good"], "bad": sides["bad"],
                        "rows": rows, "changed": sum(1 for r in rows if r["changed"])})
    return {"patches": patches, "total": len(patches)}
