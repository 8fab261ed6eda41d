"""Recorded patches (`--patch`) side by side: which hunks are in the code on GOOD and on BAD (pure).

Each snapshot's patches section (capture/collectors/patches.py) gives every hunk of every patch file a
status there (applied, not applied, conflict...). Here:
- the view keys (views.py calls `put_view`): `patches.<name>` per patch file (a presence key),
  `patches.<name>.file` (its bytes) and `patches.<name>.hunk.<n>` per hunk, valued by its status, so a
  hunk applied on one side only is a difference of its own; <name> is the file's base name (the same
  patch kept elsewhere on the other machine compares), its path where two patch files of one snapshot
  share a name;
- (the scoring of such a difference is analysis/rank/hunks.py's);
- the table of every patch and hunk per side (`table`: result["patch_status"]), each hunk with its
  text quoted from the patch kept in the snapshot, and the hunk patches that analysis/compare/patches.py lists
  (`hunk_patches`), linked to their causes like any patch.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.analysis.compare.view_model import View
from envsnap.model import patchtext
from envsnap.model.keys import Subject, flat_key, view_key
from envsnap.model.result_types import HunkStatus, PatchSide, PatchStatus
from envsnap.model.snapshot import as_dict, section_data

CATEGORY = "patches"
# Hunk statuses in the order a side-by-side table reads best; "applied" is what "in the code" means.
APPLIED = "applied"


def hunk_order(key: str) -> Tuple[int, str]:
    return (int(key), key) if key.isdigit() else (1 << 30, key)


def patch_files(snap: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """{path: entry} of a snapshot's recorded patches (none when the section is not ok)."""
    section = as_dict(as_dict(snap.get("sections")).get("patches"))
    if section.get("status") != "ok":
        return {}
    return {str(p): e for p, e in as_dict(section_data(snap, "patches").get("patches")).items() if isinstance(e, dict)}


def names(paths: Sequence[str]) -> Dict[str, str]:
    """{path: name in keys}: the base name, or the path where two patch files share a base name."""
    counts: Dict[str, int] = {}
    for path in paths:
        counts[os.path.basename(path)] = counts.get(os.path.basename(path), 0) + 1
    return {path: os.path.basename(path) if counts[os.path.basename(path)] == 1 else path for path in paths}


def hunk_subject(name: str, number: str) -> Subject:
    return Subject(CATEGORY, name, "hunk", item=number)


def hunk_key(name: str, number: str) -> str:
    return view_key(hunk_subject(name, number))


def put_view(view: "View", data: Dict[str, Any]) -> None:
    """The view keys of one snapshot's patches section (see the module docstring)."""
    entries = {str(p): e for p, e in as_dict(data.get("patches")).items() if isinstance(e, dict)}
    for path, name in names(sorted(entries)).items():
        entry = entries[path]
        flat = flat_key(CATEGORY, "patches", path)
        view.put(CATEGORY, {"name": name}, (flat,), Subject(CATEGORY, name), presence=True)
        # The patch file's own bytes (a presence key on both sides is never a difference itself).
        value: Dict[str, Any] = {"sha256": entry.get("sha256")}
        if not isinstance(entry.get("hunks"), dict):  # never parsed (too large, unreadable): its status is all
            value["status"] = entry.get("status")
        view.put(CATEGORY, value, (flat_key(flat, "sha256"),), Subject(CATEGORY, name, "file"))
        for number, hunk in as_dict(entry.get("hunks")).items():
            if not isinstance(hunk, dict):
                continue
            key = view.put(CATEGORY, hunk.get("status"), (flat_key(flat, "hunks", str(number), "status"),),
                           hunk_subject(name, str(number)))
            view.patch_info[key] = {"path": path, "name": name, "number": str(number), "hunk": hunk, "patch": entry}


# ---------------------------------------------------------------- ranking a hunk whose status differs

def target_sha(info: Optional[Dict[str, Any]]) -> Optional[str]:
    if not info:
        return None
    state = as_dict(as_dict(info["patch"].get("targets")).get(str(info["hunk"].get("file"))))
    return str(state["sha256"]) if state.get("sha256") else ("absent" if state.get("missing") else None)


def describe(info: Dict[str, Any]) -> str:
    """'hunk 2 of eagle3.patch (topk.py @@ -19,7 +19,7 @@ def renormalize)'"""
    hunk = info["hunk"]
    where = " ".join(str(x) for x in (hunk.get("file"), hunk.get("header") or hunk.get("unit")) if x)
    return f"hunk {info['number']} of {info['name']} ({where})"


def status_text(value: Any, present: bool) -> str:
    return str(value) if present and value is not None else "not in the patch"


# ---------------------------------------------------------------- the table, and each hunk's text

def _units_text(entry: Dict[str, Any]) -> Dict[str, str]:
    """{hunk number: its text} from the patch text the snapshot holds; a unit whose place in the text
    is not where the capture found it (redaction, a cut) gets none."""
    from envsnap.model import hunks as hunks_mod  # here: only snapshots captured with --patch need it

    record = as_dict(entry.get("content"))
    if record.get("status") not in ("text", "truncated") or not isinstance(record.get("text"), str):
        return {}
    recorded = as_dict(entry.get("hunks"))
    out: Dict[str, str] = {}
    number = 0
    for fp in hunks_mod.parse(record["text"]):
        units: List[Optional[hunks_mod.Hunk]] = list(fp.hunks) or [None]  # a file part without hunks: one unit
        for hunk in units:
            number += 1
            expected = as_dict(recorded.get(str(number))).get("line")
            line = hunk.line if hunk is not None else fp.line
            if expected != line or (hunk is not None and not hunk.complete):
                continue
            head = "".join(fp.header)
            out[str(number)] = head + (hunks_mod.hunk_text(hunk) if hunk is not None else "")
    return out


def _side(entry: Optional[Dict[str, Any]], path: Optional[str]) -> Optional[PatchSide]:
    if entry is None:
        return None
    return {"path": path, "status": entry.get("status"), "sha256": entry.get("sha256"),
            "target": dict(as_dict(entry.get("target"))), "error": entry.get("error"), "note": entry.get("note")}


def target_text(target: Dict[str, Any]) -> str:
    """Where a recorded patch was checked, as every output says it: "<root> (<kind> <dist> <version>, -p<n>)";
    "" when it was checked against nothing."""
    if not target.get("root"):
        return ""
    owner = f" {target['dist']} {target.get('version') or ''}".rstrip() if target.get("dist") else ""
    return f"{target['root']} ({target.get('kind')}{owner}, -p{target.get('strip')})"


def _dirty_edits(snap: Dict[str, Any]) -> Dict[str, List[str]]:
    """{hunk identity: [git.<repo>.dirty.<file> keys]} of a snapshot's dirty checkout files."""
    section = as_dict(as_dict(snap.get("sections")).get("git"))
    found: Dict[str, List[str]] = {}
    if section.get("status") != "ok":
        return found
    for repo, info in sorted(as_dict(section_data(snap, "git").get("repos")).items()):
        for rel, entry in sorted(as_dict(as_dict(info).get("dirty")).items()):
            for edit in as_dict(entry).get("hunks") or []:
                found.setdefault(str(edit), []).append(view_key(Subject("git", repo, "dirty", item=rel)))
    return found


def table(good: Dict[str, Any], bad: Dict[str, Any], ranks: Optional[Dict[str, int]] = None) -> List[PatchStatus]:
    """Every recorded patch with its hunks' status on each side, in name order (result["patch_status"]).
    A hunk whose edit is also a hunk of a dirty checkout file's own diff says where ("also_in")."""
    ranks = ranks or {}
    sides = {}
    dirty = {"good": _dirty_edits(good), "bad": _dirty_edits(bad)}
    for label, snap in (("good", good), ("bad", bad)):
        files = patch_files(snap)
        sides[label] = {name: (path, files[path]) for path, name in names(sorted(files)).items()}
    out: List[PatchStatus] = []
    for name in sorted(set(sides["good"]) | set(sides["bad"])):
        gpath, gentry = sides["good"].get(name, (None, None))
        bpath, bentry = sides["bad"].get(name, (None, None))
        ghunks, bhunks = as_dict(as_dict(gentry).get("hunks")), as_dict(as_dict(bentry).get("hunks"))
        texts = {"good": _units_text(gentry) if gentry else {}, "bad": _units_text(bentry) if bentry else {}}
        rows: List[HunkStatus] = []
        for number in sorted(set(ghunks) | set(bhunks), key=hunk_order):
            gh, bh = as_dict(ghunks.get(number)), as_dict(bhunks.get(number))
            shown = bh or gh
            gstatus = gh.get("status") if number in ghunks else None
            bstatus = bh.get("status") if number in bhunks else None
            key = hunk_key(name, number)
            changed = gentry is not None and bentry is not None and gstatus != bstatus
            target = {s: target_sha({"patch": e, "hunk": shown}) if e is not None else None
                      for s, e in (("good", gentry), ("bad", bentry))}
            row: HunkStatus = {
                "n": number, "key": key, "file": shown.get("file"), "header": shown.get("header") or shown.get("unit"),
                "good": gstatus, "bad": bstatus, "changed": changed, "file_sha256": target,
                "why": {s: h.get("why") for s, h in (("good", gh), ("bad", bh)) if h.get("why")},
                "same_edit": bool(gh.get("edit")) and gh.get("edit") == bh.get("edit"),
                "text": texts["bad"].get(number) or texts["good"].get(number)}
            if key in ranks:
                row["rank"] = ranks[key]
            also = {side: dirty[side][str(h.get("edit"))] for side, h in (("good", gh), ("bad", bh))
                    if h.get("edit") and str(h.get("edit")) in dirty[side]}
            if also:
                row["also_in"] = also
            rows.append(row)
        out.append({"name": name, "good": _side(gentry, gpath), "bad": _side(bentry, bpath), "hunks": rows,
                    "changed": sum(1 for r in rows if r["changed"])})
    return out


def hunk_patches(rows: List[PatchStatus]) -> List[Dict[str, Any]]:
    """(kind, key, title, diff) of each hunk whose status differs, for analysis/compare/patches.py's list."""
    found = []
    for patch in rows:
        for row in patch["hunks"]:
            if not row["changed"]:
                continue
            title = f"{patch['name']} hunk {row['n']} ({row['file']})"
            shas = row.get("file_sha256") or {}
            text = row.get("text")
            # Every patch of the list reads good -> bad: a hunk GOOD has applied and BAD has not is BAD
            # without its edit, so its text is shown undone; otherwise as the patch file reads.
            undone = row["good"] == APPLIED and row["bad"] != APPLIED
            direction = ("; shown undone: BAD lacks the edit GOOD has" if undone
                         else "; shown as the patch reads: BAD has the edit GOOD lacks" if row["bad"] == APPLIED
                         else "; shown as the patch reads (applied on neither side)")
            found.append({"key": row["key"], "title": title, "diff": patchtext.reverse(text) if undone and text else text,
                          "good_sha256": shas.get("good"), "bad_sha256": shas.get("bad"),
                          "where": {"patch": patch["name"], "hunk": row["n"], "path": row["file"]},
                          "basis": f"hunk {row['n']} of {patch['name']}: {row['good']} on GOOD, {row['bad']} on BAD"
                                   + direction,
                          "note": None if row.get("text") else "its text is not in the snapshots (not kept, or "
                                                               "redaction moved it)"})
    return found
