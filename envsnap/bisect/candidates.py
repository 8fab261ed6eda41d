"""Bisect's file candidates: what each snapshot section says about a file that differs.

Per section (git working trees, installed files failing RECORD, start-up hooks, --watch files),
each side of a differing file is described before any byte is looked for: absent, held (a
sha256, and the snapshot's text when captured), clean at a git commit, as installed (RECORD's
hash), or unknown (with why). files.py turns these into versions against this machine.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from envsnap.bisect.sources import sha256_hex
from envsnap.model import snapshot as snapshot_mod
from envsnap.model.snapshot import as_dict

_WHY_NO_TEXT = {
    "truncated": "held as truncated text (over the capture's per-file bound)",
    "binary": "held only as a hash (binary)",
    "too_large": "held only as a hash (over the capture's per-file bound)",
    "over_budget": "held only as a hash (over the capture's total bound)",
}


# ---------------------------------------------------------------------------------------
# One side, before its bytes are looked for
# ---------------------------------------------------------------------------------------

@dataclass
class Side:
    kind: str  # absent | held (content record and/or hash) | clean (git HEAD blob) | pristine (wheel) | unknown
    sha256: Optional[str] = None
    record: Optional[Mapping[str, Any]] = None
    label: str = ""  # how the snapshot lists it ("M", "untracked", "clean", "edited", "as installed")
    why: str = ""
    commit: Optional[str] = None
    dist: Optional[Tuple[str, str, str]] = None  # (name, version, RECORD path)


def held(entry: Mapping[str, Any], label: str, sha_key: str = "sha256") -> Side:
    record = entry.get("content")
    sha = entry.get(sha_key)
    if isinstance(record, dict) and isinstance(record.get("sha256"), str):
        sha = sha if isinstance(sha, str) else record["sha256"]
    if not isinstance(sha, str):
        why = entry.get("skipped") or entry.get("error") or "no sha256 recorded"
        return Side("unknown", label=label, why=f"not hashed at capture: {why}")
    return Side("held", sha256=sha, record=record if isinstance(record, dict) else None, label=label)


def text_of(side: Side) -> Tuple[Optional[bytes], str]:
    """The file's bytes from its content record, or (None, why not)."""
    record = side.record
    if record is None:
        return None, "held only as a hash (the snapshot has no text of it)"
    status = record.get("status")
    if status == "unreadable":
        return None, f"unreadable at capture ({record.get('error') or 'no reason recorded'})"
    if status != "text" or not isinstance(record.get("text"), str):
        return None, _WHY_NO_TEXT.get(str(status), f"held only as a hash ({status})")
    if record.get("redacted"):
        return None, "held redacted (a secret was in it): the text is not the file's bytes"
    data = record["text"].encode("utf-8", "surrogateescape")
    if sha256_hex(data) != side.sha256 or record.get("sha256") != side.sha256:
        return None, "the snapshot's text does not hash to the recorded sha256 (not the file's bytes)"
    return data, ""


# ---------------------------------------------------------------------------------------
# Candidates from each section
# ---------------------------------------------------------------------------------------

@dataclass
class Candidate:
    path: str
    source: str
    where: str
    good: Side
    bad: Side
    repo: Optional[str] = None
    rel: Optional[str] = None
    why: str = ""  # not applicable whatever the versions
    root: str = ""  # the directory the file belongs under (checkout, site dir, watched root): must exist here


def _git_sides(repo: Mapping[str, Any]) -> Dict[str, Side]:
    sides: Dict[str, Side] = {}
    for rel, entry in as_dict(repo.get("dirty")).items():
        entry = as_dict(entry)
        status = str(entry.get("status") or "?")
        if isinstance(entry.get("from"), str) and entry["from"] not in sides:
            sides[entry["from"]] = Side("absent", label=f"renamed to {rel}")
        if entry.get("submodule"):
            sides[rel] = Side("unknown", label=status, why="a submodule (switch its commit by hand)")
        elif "link" in entry or entry.get("type"):
            sides[rel] = Side("unknown", label=status, why="not a regular file (a link or directory)")
        elif status == "D":
            sides[rel] = Side("absent", label="D")
        else:
            sides[rel] = held(entry, status)
    for rel, entry in as_dict(repo.get("untracked")).items():
        entry = as_dict(entry)
        if "link" in entry or entry.get("type"):
            sides[rel] = Side("unknown", label="untracked", why="not a regular file (a link or directory)")
        else:
            sides[rel] = held(entry, "untracked")
    return sides


def git_candidates(good: Mapping[str, Any], bad: Mapping[str, Any], notes: List[str]) -> List[Candidate]:
    g_repos = as_dict(snapshot_mod.section_data(good, "git").get("repos"))
    b_repos = as_dict(snapshot_mod.section_data(bad, "git").get("repos"))
    out = []
    for top in sorted(set(g_repos) | set(b_repos)):
        if top not in g_repos or top not in b_repos:
            which = "GOOD" if top in g_repos else "BAD"
            notes.append(f"git checkout {top} was captured in {which} only: its files are not compared")
            continue
        g, b = as_dict(g_repos[top]), as_dict(b_repos[top])
        if g.get("head") != b.get("head"):
            notes.append(f"git checkout {top}: HEAD differs ({str(g.get('head'))[:7]} -> {str(b.get('head'))[:7]}): "
                         "commits are not switched; each side's files are taken against its own HEAD")
        if as_dict(g.get("stash")) != as_dict(b.get("stash")):
            notes.append(f"git checkout {top}: stash entries differ; a stash is not in the working tree (the files "
                         "a `git stash` moved show up as working-tree files)")
        g_sides, b_sides = _git_sides(g), _git_sides(b)
        for rel in sorted(set(g_sides) | set(b_sides)):
            gs = g_sides.get(rel) or Side("clean", label="clean", commit=g.get("head"))
            bs = b_sides.get(rel) or Side("clean", label="clean", commit=b.get("head"))
            if gs.kind == bs.kind == "absent" or (gs.kind == bs.kind == "held" and gs.sha256 == bs.sha256):
                continue
            why = ""
            if "\ufffd" in rel:
                why = "its name is not valid UTF-8 in the snapshot"
            out.append(Candidate(os.path.join(top, rel), "git", f"git {top}: {rel} ({gs.label} -> {bs.label})",
                                  gs, bs, repo=top, rel=rel, why=why, root=top))
    return out


def installed_candidates(good: Mapping[str, Any], bad: Mapping[str, Any], notes: List[str]) -> List[Candidate]:
    g_pkgs, b_pkgs = snapshot_mod.section_data(good, "packages"), snapshot_mod.section_data(bad, "packages")
    g_int, b_int = as_dict(g_pkgs.get("integrity")), as_dict(b_pkgs.get("integrity"))
    g_mod, b_mod = as_dict(g_int.get("modified")), as_dict(b_int.get("modified"))
    g_dists, b_dists = as_dict(g_pkgs.get("dists")), as_dict(b_pkgs.get("dists"))
    out = []
    for key in sorted(set(g_mod) | set(b_mod)):
        ge, be = as_dict(g_mod.get(key)), as_dict(b_mod.get(key))
        if ge and be and ge.get("actual_sha256") == be.get("actual_sha256"):
            continue
        dist = str((be or ge).get("dist") or "")
        gd, bd = as_dict(g_dists.get(dist)), as_dict(b_dists.get(dist))
        rel = str((be or ge).get("rel") or key)
        if rel.endswith(f" [{dist}]") and "rel" not in (be or ge):
            rel = rel[:-len(f" [{dist}]")]
        location = bd.get("location") or gd.get("location")
        if not isinstance(location, str) or not gd or not bd:
            notes.append(f"installed file {key} ({dist}): the distribution is not in both snapshots")
            continue
        path = os.path.normpath(os.path.join(location, rel))
        where = f"installed {dist} {bd.get('version')}: {rel}"
        why = ""
        if gd.get("version") != bd.get("version"):
            why = (f"{dist} is {gd.get('version')} in GOOD and {bd.get('version')} in BAD: a different release, "
                   "not an edit (reinstall to switch it)")
        elif gd.get("location") != bd.get("location"):
            why = f"{dist} is installed in different places ({gd.get('location')} vs {bd.get('location')})"
        recorded = (be or ge).get("recorded_sha256")
        sides = []
        for entry, integrity in ((ge, g_int), (be, b_int)):
            if entry:
                sides.append(held(entry, "edited", "actual_sha256"))
            elif _checked(integrity, dist, key):
                sides.append(Side("pristine", sha256=recorded if isinstance(recorded, str) else None,
                                   label="as installed", dist=(dist, str(bd.get("version")), rel)))
            else:
                sides.append(Side("unknown", label="not checked",
                                   why="that snapshot did not check this file against RECORD"))
        out.append(Candidate(path, "installed", f"{where} ({sides[0].label} -> {sides[1].label})",
                              sides[0], sides[1], why=why, root=location))
    return out


def _checked(integrity: Mapping[str, Any], dist: str, key: str) -> bool:
    """The snapshot checked this file against RECORD (and did not find it missing or unreadable)."""
    if not integrity or "modified" not in integrity:
        return False
    if dist in as_dict(as_dict(integrity.get("not_checked")).get("by_dist")):
        return False
    return key not in as_dict(integrity.get("missing")) and key not in as_dict(integrity.get("errors"))


def startup_candidates(good: Mapping[str, Any], bad: Mapping[str, Any], notes: List[str]) -> List[Candidate]:
    g_py, b_py = snapshot_mod.section_data(good, "python"), snapshot_mod.section_data(bad, "python")
    g_hooks, b_hooks = as_dict(g_py.get("startup_hooks")), as_dict(b_py.get("startup_hooks"))
    # Each side lists every hook file in the interpreter's directories: a file it does not list
    # did not exist, provided both looked at the same interpreter.
    same_python = bool(g_py) and g_py.get("prefix") == b_py.get("prefix") and g_py.get("executable") == b_py.get("executable")
    out = []
    for path in sorted(set(g_hooks) | set(b_hooks)):
        sides = []
        for hooks in (g_hooks, b_hooks):
            hook = as_dict(hooks.get(path))
            if hook.get("error"):
                sides.append(Side("unknown", label="unreadable", why=f"unreadable at capture ({hook['error']})"))
            elif hook:
                sides.append(held(hook, "present"))
            elif same_python:
                sides.append(Side("absent", label="absent"))
            else:
                sides.append(Side("unknown", label="not listed", why="the snapshots looked at different interpreters"))
        if sides[0].kind == "held" and sides[1].kind == "held" and sides[0].sha256 == sides[1].sha256:
            continue
        kind = as_dict(g_hooks.get(path) or b_hooks.get(path)).get("kind") or "hook"
        out.append(Candidate(os.path.normpath(path), "startup", f"start-up hook ({kind}) {path} "
                              f"({sides[0].label} -> {sides[1].label})", sides[0], sides[1],
                              root=os.path.dirname(os.path.normpath(path))))
    return out


def watched_candidates(good: Mapping[str, Any], bad: Mapping[str, Any], notes: List[str]) -> List[Candidate]:
    g_files, b_files = snapshot_mod.section_data(good, "files"), snapshot_mod.section_data(bad, "files")
    g_entries, b_entries = as_dict(g_files.get("entries")), as_dict(b_files.get("entries"))
    out = []
    for path in sorted(set(g_entries) | set(b_entries)):
        sides = []
        for data, entries in ((g_files, g_entries), (b_files, b_entries)):
            entry = entries.get(path)
            if isinstance(entry, dict) and ("link" in entry or entry.get("type")):
                sides.append(Side("unknown", label="not a file", why="not a regular file (a link or special file)"))
            elif isinstance(entry, dict) and entry.get("error"):
                absent = entry["error"] == "does not exist"
                sides.append(Side("absent", label="absent") if absent else
                             Side("unknown", label="unreadable", why=f"unreadable at capture ({entry['error']})"))
            elif isinstance(entry, dict):
                sides.append(held(entry, "watched"))
            elif _under_walked_root(data, path):
                sides.append(Side("absent", label="absent"))
            else:
                sides.append(Side("unknown", label="not watched", why="not watched in that snapshot"))
        if sides[0].kind == sides[1].kind == "held" and sides[0].sha256 == sides[1].sha256:
            continue
        if sides[0].kind == sides[1].kind == "absent":
            continue
        out.append(Candidate(os.path.normpath(path), "watched",
                              f"watched file {path} ({sides[0].label} -> {sides[1].label})", sides[0], sides[1],
                              root=_watched_root(g_files, b_files, path)))
    return out


def _watched_root(g_files: Mapping[str, Any], b_files: Mapping[str, Any], path: str) -> str:
    """The --watch root a path was found under (the deepest), or its directory."""
    best = ""
    for data in (g_files, b_files):
        roots = data.get("roots")
        for root in roots if isinstance(roots, list) else []:
            if isinstance(root, str) and path.startswith(root.rstrip("/") + "/") and len(root) > len(best):
                best = root
    return best or os.path.dirname(path)


def _under_walked_root(data: Mapping[str, Any], path: str) -> bool:
    errors = as_dict(data.get("errors"))
    roots = data.get("roots")
    for root in roots if isinstance(roots, list) else []:
        if not isinstance(root, str):
            continue
        if root == path and errors.get(root) == "does not exist":
            return True
        if path.startswith(root.rstrip("/") + "/") and root not in errors:
            return True
    return False
