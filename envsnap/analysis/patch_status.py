"""Recorded patches (`--patch`) side by side: which hunks are in the code on GOOD and on BAD (pure).

Each snapshot's patches section (capture/collectors/patches.py) gives every hunk of every patch file a
status there (applied, not applied, conflict...). Here:
- the view keys (views.py calls `put_view`): `patches.<name>` per patch file (a presence key),
  `patches.<name>.file` (its bytes) and `patches.<name>.hunk.<n>` per hunk, valued by its status, so a
  hunk applied on one side only is a difference of its own; <name> is the file's base name (the same
  patch kept elsewhere on the other machine compares), its path where two patch files of one snapshot
  share a name;
- the scoring of such a difference (`score_hunk`, called by causes.py): the patches rule's prior, raised to
  the rule of the installed file it edits; whether the file it edits changed with it (its sha256, which
  the capture records per target file) or only the patch did; whether that file is code that runs (the
  described interpreter's site-packages, an editable checkout) or a checkout nothing runs; what kind of
  file it is. The cause of the same file found by its hash (an installed file failing RECORD, a dirty
  file in the checkout) then gets `shown_by_hunk`: the hunk says more precisely what changed;
- the table of every patch and hunk per side (`table`: result["patch_status"]), each hunk with its
  text quoted from the patch kept in the snapshot, and the hunk patches that analysis/patches.py lists
  (`hunk_patches`), linked to their causes like any patch.
"""
from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.factors import HOT_PATH_EDIT_PRIOR, Score
from envsnap.analysis.knowledge import KERNELS
from envsnap.model.names import canonical_name
from envsnap.model.snapshot import section_data

if TYPE_CHECKING:
    from envsnap.analysis.diff import Comparison, Difference
    from envsnap.analysis.views import View

CATEGORY = "patches"
# Hunk statuses in the order a side-by-side table reads best; "applied" is what "in the code" means.
APPLIED = "applied"


def _dict(value: Any) -> Dict[str, Any]:
    return value if isinstance(value, dict) else {}


def hunk_order(key: str) -> Tuple[int, str]:
    return (int(key), key) if key.isdigit() else (1 << 30, key)


def patch_files(snap: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """{path: entry} of a snapshot's recorded patches (none when the section is not ok)."""
    section = _dict(_dict(snap.get("sections")).get("patches"))
    if section.get("status") != "ok":
        return {}
    return {str(p): e for p, e in _dict(section_data(snap, "patches").get("patches")).items() if isinstance(e, dict)}


def names(paths: Sequence[str]) -> Dict[str, str]:
    """{path: name in keys}: the base name, or the path where two patch files share a base name."""
    counts: Dict[str, int] = {}
    for path in paths:
        counts[os.path.basename(path)] = counts.get(os.path.basename(path), 0) + 1
    return {path: os.path.basename(path) if counts[os.path.basename(path)] == 1 else path for path in paths}


def hunk_key(name: str, number: str) -> str:
    return f"{CATEGORY}.{name}.hunk.{number}"


def put_view(view: "View", data: Dict[str, Any]) -> None:
    """The view keys of one snapshot's patches section (see the module docstring)."""
    from envsnap.analysis.views import Subject

    entries = {str(p): e for p, e in _dict(data.get("patches")).items() if isinstance(e, dict)}
    for path, name in names(sorted(entries)).items():
        entry = entries[path]
        flat = f"patches.patches.{path}"
        view.put(CATEGORY, f"{CATEGORY}.{name}", {"name": name}, (flat,), Subject(CATEGORY, name), presence=True)
        # The patch file's own bytes (a presence key on both sides is never a difference itself).
        value: Dict[str, Any] = {"sha256": entry.get("sha256")}
        if not isinstance(entry.get("hunks"), dict):  # never parsed (too large, unreadable): its status is all
            value["status"] = entry.get("status")
        view.put(CATEGORY, f"{CATEGORY}.{name}.file", value, (f"{flat}.sha256",), Subject(CATEGORY, name, "file"))
        for number, hunk in _dict(entry.get("hunks")).items():
            if not isinstance(hunk, dict):
                continue
            key = hunk_key(name, str(number))
            view.put(CATEGORY, key, hunk.get("status"), (f"{flat}.hunks.{number}.status",),
                     Subject(CATEGORY, name, "hunk", item=str(number)))
            view.patch_info[key] = {"path": path, "name": name, "number": str(number), "hunk": hunk, "patch": entry}


# ---------------------------------------------------------------- ranking a hunk whose status differs

def _target_sha(info: Optional[Dict[str, Any]]) -> Optional[str]:
    if not info:
        return None
    state = _dict(_dict(info["patch"].get("targets")).get(str(info["hunk"].get("file"))))
    return str(state["sha256"]) if state.get("sha256") else ("absent" if state.get("missing") else None)


def describe(info: Dict[str, Any]) -> str:
    """'hunk 2 of eagle3.patch (topk.py @@ -19,7 +19,7 @@ def renormalize)'"""
    hunk = info["hunk"]
    where = " ".join(str(x) for x in (hunk.get("file"), hunk.get("header") or hunk.get("unit")) if x)
    return f"hunk {info['number']} of {info['name']} ({where})"


def _status_text(value: Any, present: bool) -> str:
    return str(value) if present and value is not None else "not in the patch"


def score_hunk(d: "Difference", comp: "Comparison", component: str, why: str, score: Score,
               notes: List[str]) -> Tuple[str, str]:
    """(component, why) of a patches difference; its factors applied to `score`."""
    from envsnap.analysis import domain
    from envsnap.analysis.priors import rule_source

    good = comp.good.patch_info.get(d.base_key)
    bad = comp.bad.patch_info.get(d.base_key)
    if d.subject.aspect != "hunk" or (good is None and bad is None):
        gv, bv = _dict(d.good), _dict(d.bad)
        if d.change == "changed" and gv.get("sha256") != bv.get("sha256"):
            why = f"the patch file {d.subject.entity} itself changed (its hunks' statuses are their own differences)"
        return component, why
    info = bad or good
    assert info is not None
    hunk, target = info["hunk"], _dict(info["patch"].get("target"))
    rel, kind = str(hunk.get("file") or ""), str(target.get("kind") or "")
    why = (f"{describe(info)}: {_status_text(d.good, good is not None)} on GOOD, "
           f"{_status_text(d.bad, bad is not None)} on BAD")
    dist = str(target.get("dist") or "")
    if kind == "site-packages":
        # The installed file it edits: the rule an edit of that file found by RECORD would take.
        file_rule = knowledge.rule_for(f"integrity.{rel}")
        if file_rule.pattern == "integrity.*" and canonical_name(dist) in knowledge.HOT_PATH_PACKAGES:
            if HOT_PATH_EDIT_PRIOR > score.prior:
                score.set_prior(HOT_PATH_EDIT_PRIOR, f"it edits a file of the hot-path package {dist} "
                                                     f"({rule_source(file_rule)}, raised)")
                component = KERNELS
        elif file_rule.pattern != "integrity.*" and file_rule.weight > score.prior:
            score.set_prior(file_rule.weight, f"{rule_source(file_rule)}: the installed file it edits")
            component = file_rule.component
    gsha, bsha = _target_sha(good), _target_sha(bad)
    if gsha and bsha and gsha != bsha:
        shown = " \u2192 ".join(s if s == "absent" else f"sha256 {s[:12]}" for s in (gsha, bsha))
        score.apply("hunk_code_changed", f"{rel} itself differs between GOOD and BAD ({shown}): the edit is in the "
                                         "code on one side only")
    elif gsha and bsha:
        score.apply("hunk_code_same", f"{rel} is the same on both sides (sha256 {gsha[:12]}): the patch file "
                                      "differs, not the code")
    else:
        notes.append(f"whether {rel} itself changed is not known (not hashed on both sides)")
    _runs_here(d, comp, kind, dist, rel, target, score, notes)
    found = domain.file_kind(rel)
    if found is not None and found[1] != 1.0:
        score.apply("file_kind", f"a {found[0]} file", value=found[1])
    return component, why


def _runs_here(d: "Difference", comp: "Comparison", kind: str, dist: str, rel: str, target: Dict[str, Any],
               score: Score, notes: List[str]) -> None:
    """Whether the file the hunk edits is code the measured interpreter runs (what the capture found)."""
    root = str(target.get("root") or "")
    if kind == "site-packages":
        owner = f" ({dist} {target.get('version') or ''}".rstrip() + ")" if dist else ""
        score.apply("patch_target_installed", f"{rel} is installed in the described interpreter's site-packages "
                                              f"{root}{owner}: the code that runs")
        return
    roles: List[str] = []
    for view in (comp.good, comp.bad):
        roles.extend(str(r) for r in view.values.get("git", {}).get(f"git.{root}.roles") or [])
    editable = sorted({r.split(":", 1)[1] for r in roles if r.startswith("editable:")})
    if kind == "editable" and not editable:
        editable = ["(an editable install)"]
    hot = [e for e in editable if canonical_name(e) in knowledge.HOT_PATH_PACKAGES]
    if hot:
        score.apply("editable_hot_path", f"{root} is the installed {hot[0]} (editable): its changes run")
    elif editable:
        score.apply("editable", f"{root} is the installed {editable[0]} (editable): its changes run")
    elif kind == "checkout":
        score.apply("checkout_not_running", f"{root} is not what runs (no editable install of it was seen)")
    else:
        notes.append(f"whether {root} is code that runs is not known")


def twins(comp: "Comparison", diffs: Sequence["Difference"]) -> Dict[Tuple[str, ...], str]:
    """The files whose change a hunk difference shows: ("integrity", rel) for an installed file,
    ("git", repo, rel) for a checkout's file, each to that hunk's key (a hunk whose file changed)."""
    found: Dict[Tuple[str, ...], str] = {}
    for d in diffs:
        if d.where != CATEGORY or d.subject.aspect != "hunk":
            continue
        good, bad = comp.good.patch_info.get(d.base_key), comp.bad.patch_info.get(d.base_key)
        gsha, bsha = _target_sha(good), _target_sha(bad)
        info = bad or good
        if info is None or not (gsha and bsha and gsha != bsha):
            continue
        target = _dict(info["patch"].get("target"))
        rel, root = str(info["hunk"].get("file") or ""), str(target.get("root") or "")
        key = ("integrity", rel) if target.get("kind") == "site-packages" else ("git", root, rel)
        found.setdefault(key, d.key)
    return found


# ---------------------------------------------------------------- the table, and each hunk's text

def _units_text(entry: Dict[str, Any]) -> Dict[str, str]:
    """{hunk number: its text} from the patch text the snapshot holds; a unit whose place in the text
    is not where the capture found it (redaction, a cut) gets none."""
    from envsnap.model import hunks as hunks_mod  # here: only snapshots captured with --patch need it

    record = _dict(entry.get("content"))
    if record.get("status") not in ("text", "truncated") or not isinstance(record.get("text"), str):
        return {}
    recorded = _dict(entry.get("hunks"))
    out: Dict[str, str] = {}
    number = 0
    for fp in hunks_mod.parse(record["text"]):
        units: List[Optional[hunks_mod.Hunk]] = list(fp.hunks) or [None]  # a file part without hunks: one unit
        for hunk in units:
            number += 1
            expected = _dict(recorded.get(str(number))).get("line")
            line = hunk.line if hunk is not None else fp.line
            if expected != line or (hunk is not None and not hunk.complete):
                continue
            head = "".join(fp.header)
            out[str(number)] = head + (hunks_mod.hunk_text(hunk) if hunk is not None else "")
    return out


def _side(entry: Optional[Dict[str, Any]], path: Optional[str]) -> Optional[Dict[str, Any]]:
    if entry is None:
        return None
    return {"path": path, "status": entry.get("status"), "sha256": entry.get("sha256"),
            "target": dict(_dict(entry.get("target"))), "error": entry.get("error"), "note": entry.get("note")}


def _dirty_edits(snap: Dict[str, Any]) -> Dict[str, List[str]]:
    """{hunk identity: [git.<repo>.dirty.<file> keys]} of a snapshot's dirty checkout files."""
    section = _dict(_dict(snap.get("sections")).get("git"))
    found: Dict[str, List[str]] = {}
    if section.get("status") != "ok":
        return found
    for repo, info in sorted(_dict(section_data(snap, "git").get("repos")).items()):
        for rel, entry in sorted(_dict(_dict(info).get("dirty")).items()):
            for edit in _dict(entry).get("hunks") or []:
                found.setdefault(str(edit), []).append(f"git.{repo}.dirty.{rel}")
    return found


def table(good: Dict[str, Any], bad: Dict[str, Any], ranks: Optional[Dict[str, int]] = None) -> List[Dict[str, Any]]:
    """Every recorded patch with its hunks' status on each side, in name order (result["patch_status"]).
    A hunk whose edit is also a hunk of a dirty checkout file's own diff says where ("also_in")."""
    ranks = ranks or {}
    sides = {}
    dirty = {"good": _dirty_edits(good), "bad": _dirty_edits(bad)}
    for label, snap in (("good", good), ("bad", bad)):
        files = patch_files(snap)
        sides[label] = {name: (path, files[path]) for path, name in names(sorted(files)).items()}
    out = []
    for name in sorted(set(sides["good"]) | set(sides["bad"])):
        gpath, gentry = sides["good"].get(name, (None, None))
        bpath, bentry = sides["bad"].get(name, (None, None))
        ghunks, bhunks = _dict(_dict(gentry).get("hunks")), _dict(_dict(bentry).get("hunks"))
        texts = {"good": _units_text(gentry) if gentry else {}, "bad": _units_text(bentry) if bentry else {}}
        rows = []
        for number in sorted(set(ghunks) | set(bhunks), key=hunk_order):
            gh, bh = _dict(ghunks.get(number)), _dict(bhunks.get(number))
            shown = bh or gh
            gstatus = gh.get("status") if number in ghunks else None
            bstatus = bh.get("status") if number in bhunks else None
            key = hunk_key(name, number)
            changed = gentry is not None and bentry is not None and gstatus != bstatus
            target = {s: _target_sha({"patch": e, "hunk": shown}) if e is not None else None
                      for s, e in (("good", gentry), ("bad", bentry))}
            row = {"n": number, "key": key, "file": shown.get("file"), "header": shown.get("header") or shown.get("unit"),
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


def hunk_patches(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """(kind, key, title, diff) of each hunk whose status differs, for analysis/patches.py's list."""
    found = []
    for patch in rows:
        for row in patch["hunks"]:
            if not row["changed"]:
                continue
            title = f"{patch['name']} hunk {row['n']} ({row['file']})"
            shas = row.get("file_sha256") or {}
            found.append({"key": row["key"], "title": title, "diff": row.get("text"),
                          "good_sha256": shas.get("good"), "bad_sha256": shas.get("bad"),
                          "where": {"patch": patch["name"], "hunk": row["n"], "path": row["file"]},
                          "basis": f"hunk {row['n']} of {patch['name']}: {row['good']} on GOOD, {row['bad']} on BAD",
                          "note": None if row.get("text") else "its text is not in the snapshots (not kept, or "
                                                               "redaction moved it)"})
    return found
