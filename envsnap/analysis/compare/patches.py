"""Patches: what exactly changed in each file whose text the snapshots hold (pure: data in, data out).

For every changed file the two snapshots can show, one patch: a unified diff read good -> bad.
- git checkouts (same repository on both sides): a dirty file whose working copy both sides hold
  is diffed copy against copy; dirty on one side only, at the same HEAD, it is that side's own
  `git diff HEAD` (reversed when good has the edit); an untracked file against nothing; a stash
  entry present on one side only shows its own patch (what `git stash pop` would apply).
- installed files failing their RECORD check: edited on both sides, copy against copy; edited on
  one side, against the pristine file of the installed distribution when the caller found one
  offline (capture/pristine.py: a wheel, sha256 checked against RECORD), otherwise the edited
  text with the distribution and version to compare with.
- start-up hooks and --watch files: the two texts (a missing side is empty);
- a recorded patch's hunk (`--patch`) applied on one side only: that hunk, as the patch file has it.
The file reading and wheel lookup happen below this layer (the CLI passes `pristine` in).

Each patch says which causes it supports (link): the cause of its own key, causes whose
evidence names that key (the ranker's links, e.g. an edited engine.py behind a worker variable),
and causes about a variable that one of its changed lines names. Those causes get an evidence
line pointing at the patch and its `patches` ids.
"""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from envsnap.analysis.compare.views import modified_entries_differing
from envsnap.model import patchtext
from envsnap.model.keys import Subject, integrity_entry_rel, integrity_key, view_key
from envsnap.model.snapshot import as_dict, section_data

TEXT = ("text", "truncated")
# An edited installed file with no pristine copy to diff against: its text is shown whole.
NO_PRISTINE = "no pristine copy found (--wheels DIR to diff against the wheel); content shown"
SETTER_ORDER = {"installed": 0, "startup": 1, "hunk": 2, "git": 3, "untracked": 4, "watched": 5, "stash": 6}
KIND_ORDER = {"hunk": -1, "git": 0, "untracked": 1, "stash": 2, "installed": 3, "startup": 4, "watched": 5}
# What one patch of each kind is, counted in words ("1 changed file, 1 stash entry"): the text and the report
# say what the list holds, not "N changed files" for a stash entry or a recorded patch's hunk.
KIND_WORDS = {"hunk": ("recorded patch hunk", "recorded patch hunks"), "git": ("changed file", "changed files"),
              "untracked": ("untracked file", "untracked files"), "stash": ("stash entry", "stash entries"),
              "installed": ("edited installed file", "edited installed files"),
              "startup": ("start-up hook", "start-up hooks"), "watched": ("watched file", "watched files")}
_EVIDENCE_LINES = 2  # changed lines quoted in a cause's evidence, per direction
_QUOTE_CHARS = 100


def _ok(snap: Dict[str, Any], name: str) -> Dict[str, Any]:
    section = (snap.get("sections") or {}).get(name) or {}
    return section_data(snap, name) if section.get("status") == "ok" else {}


def _text(record: Any) -> Optional[str]:
    record = as_dict(record)
    return record["text"] if record.get("status") in TEXT and isinstance(record.get("text"), str) else None


def _why_no_text(record: Any, side: str, what: str = "file") -> str:
    record = as_dict(record)
    status = record.get("status")
    if not record:
        return f"{side}'s {what} was not captured"
    if status == "unreadable":
        return f"{side}'s {what} could not be read ({record.get('error', '?')})"
    words = {"binary": "is binary: compared by sha256 only",
             "too_large": "is over the per-file bound (--content-max-file): not kept",
             "over_budget": "was over the snapshot's text budget (--content-max-total)"}
    return f"{side}'s {what} {words.get(str(status), 'has no text (' + str(status) + ')')}"


def _held(*entries: Any, keys: Tuple[str, ...] = ("content",)) -> bool:
    """Whether any side recorded anything about the text (snapshots of an envsnap that kept no
    file text give no patch at all, rather than one 'not captured' line per changed file)."""
    return any(isinstance(as_dict(e).get(k), dict) for e in entries for k in keys)


def _flags(*records: Any) -> Tuple[bool, bool]:
    truncated = any(as_dict(r).get("status") == "truncated" for r in records)
    redacted = any(bool(as_dict(r).get("redacted")) for r in records)
    return truncated, redacted


class _Builder:
    def __init__(self, pristine: Dict[str, Dict[str, Any]]) -> None:
        self.pristine = pristine
        self.patches: List[Dict[str, Any]] = []

    def add(self, kind: str, key: str, title: str, where: Dict[str, Any], good_sha: Any, bad_sha: Any,
            basis: str, diff: Optional[str] = None, content: Optional[str] = None, note: Optional[str] = None,
            records: Tuple[Any, ...] = ()) -> Dict[str, Any]:
        truncated, redacted = _flags(*records)
        added, removed, hunks = patchtext.stats(diff) if diff else (0, 0, 0)
        # What the patch shows, in the words every output uses after its title.
        if diff:
            shows = f"-{removed} +{added}"
        elif content is not None:
            shows = NO_PRISTINE
        else:
            shows = "no diff"
        patch = {"kind": kind, "key": key, "title": title, "where": where, "good_sha256": good_sha,
                 "bad_sha256": bad_sha, "basis": basis, "diff": diff or None, "content": content, "note": note,
                 "truncated": truncated, "redacted": redacted, "added": added, "removed": removed, "hunks": hunks,
                 "shows": shows, "causes": []}
        self.patches.append(patch)
        return patch


def _texts_diff(b: _Builder, kind: str, key: str, title: str, where: Dict[str, Any], path: str,
                ge: Optional[Dict[str, Any]], be: Optional[Dict[str, Any]], record_key: str = "content") -> None:
    """A file both or either side holds (absent side: no file): its two texts diffed."""
    if not _held(ge, be, keys=(record_key,)):
        return
    grec = as_dict(ge).get(record_key) if ge is not None else None
    brec = as_dict(be).get(record_key) if be is not None else None
    gtext = "" if ge is None else _text(grec)
    btext = "" if be is None else _text(brec)
    gsha, bsha = as_dict(ge).get("sha256"), as_dict(be).get("sha256")
    if gtext is None or btext is None:
        why = "; ".join(_why_no_text(r, side) for r, side, t in ((grec, "good", gtext), (brec, "bad", btext))
                        if t is None)
        b.add(kind, key, title, where, gsha, bsha, "no diff: " + why, records=(grec, brec))
        return
    diff = patchtext.unified(gtext, btext, f"a/{path}" if ge is not None else "/dev/null",
                             f"b/{path}" if be is not None else "/dev/null")
    basis = {(True, True): "good's and bad's texts", (False, True): "added in bad", (True, False): "removed in bad"}[
        (ge is not None, be is not None)]
    b.add(kind, key, title, where, gsha, bsha, basis, diff=diff, records=(grec, brec))


def _unchanged(ge: Any, be: Any) -> bool:
    ge, be = as_dict(ge), as_dict(be)
    return bool(ge) and bool(be) and ge.get("sha256") == be.get("sha256") and ge.get("status") == be.get("status")


# ---------------------------------------------------------------- git

def _git(b: _Builder, good: Dict[str, Any], bad: Dict[str, Any]) -> None:
    grepos, brepos = as_dict(_ok(good, "git").get("repos")), as_dict(_ok(bad, "git").get("repos"))
    for repo in sorted(set(grepos) & set(brepos)):
        gr, br = as_dict(grepos[repo]), as_dict(brepos[repo])
        same_head = gr.get("head") == br.get("head")
        gd, bd = as_dict(gr.get("dirty")), as_dict(br.get("dirty"))
        for rel in sorted(set(gd) | set(bd)):
            ge, be = gd.get(rel), bd.get(rel)
            if _unchanged(ge, be) or as_dict(ge).get("submodule") or as_dict(be).get("submodule"):
                continue
            _dirty(b, repo, rel, as_dict(ge) if ge is not None else None, as_dict(be) if be is not None else None,
                   same_head, str(gr.get("head") or "")[:10], str(br.get("head") or "")[:10])
        gu, bu = as_dict(gr.get("untracked")), as_dict(br.get("untracked"))
        for rel in sorted(set(gu) | set(bu)):
            if not _unchanged(gu.get(rel), bu.get(rel)):
                _texts_diff(b, "untracked", view_key(Subject("git", repo, "untracked", item=rel)), f"{repo}: {rel} (untracked)",
                            {"repo": repo, "path": rel}, rel, gu.get(rel), bu.get(rel))
        _stash(b, repo, as_dict(gr.get("stash")), as_dict(br.get("stash")))


def hunk_edits(ge: Optional[Dict[str, Any]], be: Optional[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Which hunks of a dirty file's edit against HEAD (the git collector's "hunks": model/hunks.edit_id)
    are the same edit on both sides and which are on one side only; None when a side did not name them."""
    sides = []
    for entry in (ge, be):
        named = as_dict(entry).get("hunks")
        if entry is not None and not isinstance(named, list):
            return None  # that side's snapshot did not name them (an older envsnap): not known
        sides.append([str(x) for x in named] if isinstance(named, list) else [])  # clean: no hunk
    good, bad = sides
    return {"same": [h for h in good if h in bad], "good_only": [h for h in good if h not in bad],
            "bad_only": [h for h in bad if h not in good]}


def _edits_note(edits: Optional[Dict[str, Any]], against: str = "against HEAD") -> Optional[str]:
    if not edits:
        return None
    parts = [f"{len(edits[k])} {words}" for k, words in (("same", "the same edit on both sides"),
                                                          ("good_only", "only in good"), ("bad_only", "only in bad"))
             if edits[k]]
    return f"hunk by hunk {against}: " + ", ".join(parts) if parts else None


def _edits_against(pristine: str, gtext: str, btext: str, rel: str) -> Dict[str, Any]:
    """hunk_edits for an installed file: each side's edit of the pristine text, hunk by hunk (model/hunks.edit_id,
    as the git collector names a checkout's hunks against HEAD)."""
    from envsnap.model import hunks as hunks_mod

    def ids(text: str) -> Any:
        if text == pristine:
            return []
        return [hunks_mod.edit_id(h.lines) for fp in hunks_mod.parse(patchtext.unified(pristine, text, f"a/{rel}",
                                                                                        f"b/{rel}"))
                for h in fp.hunks]

    return as_dict(hunk_edits({"hunks": ids(gtext)}, {"hunks": ids(btext)}))


def _dirty(b: _Builder, repo: str, rel: str, ge: Optional[Dict[str, Any]], be: Optional[Dict[str, Any]],
           same_head: bool, ghead: str, bhead: str) -> None:
    if not _held(ge, be, keys=("content", "patch")):
        return
    edits = hunk_edits(ge, be) if same_head else None  # the same HEAD: each side's hunks are edits of one text
    key, title, where = view_key(Subject("git", repo, "dirty", item=rel)), f"{repo}: {rel}", {"repo": repo, "path": rel}
    gsha, bsha = as_dict(ge).get("sha256"), as_dict(be).get("sha256")
    gtext, btext = _text(as_dict(ge).get("content")), _text(as_dict(be).get("content"))
    deleted = {side: as_dict(e).get("status") == "D" for side, e in (("good", ge), ("bad", be))}
    if ge is not None and be is not None and (gtext is not None or deleted["good"]) \
            and (btext is not None or deleted["bad"]):
        diff = patchtext.unified(gtext or "", btext or "", "/dev/null" if deleted["good"] else f"a/{rel}",
                                 "/dev/null" if deleted["bad"] else f"b/{rel}")
        patch = b.add("git", key, title, where, gsha, bsha, "good's and bad's working copies", diff=diff,
                      records=(ge.get("content"), be.get("content")), note=_edits_note(edits))
        if edits:
            patch["hunk_edits"] = edits
        return
    # One side's own patch against HEAD: exactly good -> bad when the other side is clean at the same HEAD.
    side, entry = ("bad", be) if be is not None else ("good", ge)
    patch = as_dict(as_dict(entry).get("patch"))
    text = _text(patch)
    other_clean = ge is None or be is None
    if text is None:
        b.add("git", key, title, where, gsha, bsha, "no diff: " + _why_no_text(patch, side, "patch against HEAD"),
              records=(patch,))
        return
    head = bhead if side == "bad" else ghead
    other, other_entry = ("good", ge) if side == "bad" else ("bad", be)
    note = None
    if other_clean and same_head:
        basis = (f"bad's `git diff HEAD` (good is clean at the same HEAD {head})" if side == "bad" else
                 f"good's `git diff HEAD`, reversed (bad is clean at the same HEAD {head})")
    else:
        basis = f"{side}'s `git diff HEAD` (against {side}'s HEAD {head}), as recorded"
        if not same_head:
            note = (f"the HEADs differ (good {ghead}, bad {bhead}): this shows {side}'s own edit, not the whole "
                    "change between the two")
        else:
            note = (f"both working copies are edited, and {_why_no_text(as_dict(other_entry).get('content'), other)}: "
                    f"this shows {side}'s own edit against HEAD")
    diff = patchtext.reverse(text) if side == "good" and other_clean and same_head else text
    edits_note = _edits_note(edits) if not other_clean else None
    added = b.add("git", key, title, where, gsha, bsha, basis, diff=diff,
                  note="; ".join(n for n in (note, edits_note) if n) or None, records=(patch,))
    if edits:
        added["hunk_edits"] = edits


def _stash(b: _Builder, repo: str, gstash: Dict[str, Any], bstash: Dict[str, Any]) -> None:
    def by_sha(stash: Dict[str, Any]) -> Dict[str, Tuple[str, Dict[str, Any]]]:
        return {str(as_dict(e).get("sha")): (name, as_dict(e)) for name, e in stash.items() if as_dict(e).get("sha")}

    g, bb = by_sha(gstash), by_sha(bstash)
    for side, mine, other in (("bad", bb, g), ("good", g, bb)):
        for sha in sorted(set(mine) - set(other)):
            name, entry = mine[sha]
            if not _held(entry, keys=("patch",)):
                continue
            patch = as_dict(entry.get("patch"))
            text = _text(patch)
            basis = (f"stash entry only in bad ({name}: {entry.get('message', '')})" if side == "bad" else
                     f"stash entry only in good ({name}: {entry.get('message', '')}): popped or dropped since; "
                     "popped, its changes are in bad's working tree")
            if text is None:
                basis += "; no patch: " + _why_no_text(patch, side, "stash patch")
            b.add("stash", view_key(Subject("git", repo, "stash")), f"{repo}: {name} {sha[:7]}", {"repo": repo, "stash": name,
                  "commit": sha}, sha if side == "good" else None, sha if side == "bad" else None, basis,
                  diff=text, records=(patch,))


# ---------------------------------------------------------------- installed files

def pristine_key(dist: str, version: Any, path: str) -> str:
    return f"{dist}=={version}:{path}"


def _installed_sides(snap: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    pkgs = _ok(snap, "packages")
    return as_dict(as_dict(pkgs.get("integrity")).get("modified")), as_dict(pkgs.get("dists"))


# What the caller does with pristine_needs: the texts found, by pristine_key (capture/pristine.lookup).
PristineFinder = Callable[[List[Dict[str, Any]]], Dict[str, Dict[str, Any]]]


def pristine_needs(good: Dict[str, Any], bad: Dict[str, Any], differing: Optional[Set[str]] = None
                   ) -> List[Dict[str, Any]]:
    """Installed files edited on one side only, whose pristine text would show the edit: one entry
    per file {key, dist, version, path, sha256 (RECORD's), side} for capture/pristine.lookup.
    `differing`: views.modified_entries_differing(good, bad) when the caller has it (a file edited on
    one side only is among them)."""
    (gmod, gdists), (bmod, bdists) = _installed_sides(good), _installed_sides(bad)
    needs = []
    one_side = set(gmod) ^ set(bmod) if differing is None else {k for k in differing if (k in gmod) != (k in bmod)}
    # Edited on both sides, differently, from one installed file (the same RECORD hash): the pristine text tells
    # which hunks are the same edit and which are on one side only.
    both = {k for k in (set(gmod) & set(bmod) if differing is None else set(differing) & set(gmod) & set(bmod))
            if as_dict(gmod[k]).get("actual_sha256") != as_dict(bmod[k]).get("actual_sha256")
            and as_dict(gmod[k]).get("recorded_sha256") == as_dict(bmod[k]).get("recorded_sha256")}
    for key in sorted(one_side | both):
        side, entry, dists = ("bad", as_dict(bmod.get(key)), bdists) if key in bmod else ("good", as_dict(gmod[key]), gdists)
        dist = str(entry.get("dist") or "")
        rel = integrity_entry_rel(key, dist)
        if not dist or rel.startswith("../") or rel.startswith("/") or not entry.get("recorded_sha256"):
            continue  # a script outside site-packages: wheels ship it under .data/, not worth guessing
        version = as_dict(dists.get(dist)).get("version")
        needs.append({"key": pristine_key(dist, version, rel), "dist": dist, "version": version, "path": rel,
                      "sha256": entry.get("recorded_sha256"), "side": side})
    return needs


def _installed(b: _Builder, good: Dict[str, Any], bad: Dict[str, Any], differing: Optional[Set[str]]) -> None:
    (gmod, gdists), (bmod, bdists) = _installed_sides(good), _installed_sides(bad)
    # Thousands of edited files in a broken install, nearly all edited alike on both sides: an entry
    # equal on both sides has the same hash and no patch, so only the others are looked at.
    for key in sorted(modified_entries_differing(good, bad) if differing is None else differing):
        ge, be = as_dict(gmod.get(key)) if key in gmod else None, as_dict(bmod.get(key)) if key in bmod else None
        if (ge is not None and be is not None and ge.get("actual_sha256") == be.get("actual_sha256")) \
                or not _held(ge, be):
            continue
        entry = be if be is not None else ge
        dist = str(as_dict(entry).get("dist") or "")
        rel = integrity_entry_rel(key, dist)
        dists = bdists if be is not None else gdists
        version = as_dict(dists.get(dist)).get("version")
        where = {"dist": dist, "version": version, "path": rel}
        title = f"{dist} {version}: {rel}"
        # The side without the edit has the file as installed: RECORD's hash.
        gsha = ge.get("actual_sha256") if ge is not None else as_dict(be).get("recorded_sha256")
        bsha = be.get("actual_sha256") if be is not None else as_dict(ge).get("recorded_sha256")
        grec, brec = as_dict(ge).get("content"), as_dict(be).get("content")
        if ge is not None and be is not None:
            gtext, btext = _text(grec), _text(brec)
            if gtext is None or btext is None:
                why = "; ".join(_why_no_text(r, s) for r, s, t in ((grec, "good", gtext), (brec, "bad", btext)) if t is None)
                b.add("installed", integrity_key(key), title, where, gsha, bsha, "no diff: " + why, records=(grec, brec))
            else:
                found = as_dict(b.pristine.get(pristine_key(dist, version, rel)))
                pristine = found.get("text") if found.get("status") == "found" else None
                edits = _edits_against(pristine, gtext, btext, rel) if isinstance(pristine, str) else None
                patch = b.add("installed", integrity_key(key), title, where, gsha, bsha,
                              "good's and bad's edited copies", diff=patchtext.unified(gtext, btext, f"a/{rel}",
                                                                                        f"b/{rel}"),
                              records=(grec, brec),
                              note=_edits_note(edits, f"against the pristine file of {dist} {version}"))
                if edits:
                    patch["hunk_edits"] = edits
            continue
        side, rec = ("bad", brec) if be is not None else ("good", grec)
        edited = _text(rec)
        found = as_dict(b.pristine.get(pristine_key(dist, version, rel)))
        pristine = found.get("text") if found.get("status") == "found" else None
        compare = (f"compare with {rel} of {dist} {version} as released: `pip download --no-deps {dist}=={version}"
                   " -d DIR`, then --wheels DIR")
        if edited is None:
            b.add("installed", integrity_key(key), title, where, gsha, bsha,
                  f"edited in {side} only; no diff: " + _why_no_text(rec, side), note=compare, records=(rec,))
        elif pristine is not None:
            old, new = (pristine, edited) if side == "bad" else (edited, pristine)
            edits = _edits_against(pristine, edited if side == "good" else pristine,
                                   edited if side == "bad" else pristine, rel)
            patch = b.add("installed", integrity_key(key), title, where, gsha, bsha,
                          f"edited in {side} only: against the pristine file of {dist} {version} "
                          f"({found.get('source')})",
                          diff=patchtext.unified(old, new, f"a/{rel}", f"b/{rel}"), records=(rec, found))
            if edits:
                patch["hunk_edits"] = edits
        else:
            note = f"{found['why']}; {compare}" if found.get("why") else compare
            b.add("installed", integrity_key(key), title, where, gsha, bsha,
                  f"edited in {side} only; no pristine copy found offline: the edited text is shown",
                  content=edited, note=note, records=(rec,))


# ---------------------------------------------------------------- start-up hooks, watched files

def _hooks_and_files(b: _Builder, good: Dict[str, Any], bad: Dict[str, Any]) -> None:
    for kind, section, field, prefix in (("startup", "python", "startup_hooks", "startup."),
                                         ("watched", "files", "entries", "files.")):
        g, bb = as_dict(_ok(good, section).get(field)), as_dict(_ok(bad, section).get(field))
        for path in sorted(set(g) | set(bb)):
            ge, be = g.get(path), bb.get(path)
            if _unchanged(ge, be) or not ({"sha256"} & (set(as_dict(ge)) | set(as_dict(be)))):
                continue  # same file, or no regular file on either side (links, errors)
            where: Dict[str, Any] = {"path": path}
            if kind == "startup":
                where["hook"] = as_dict(be or ge).get("kind")
            _texts_diff(b, kind, f"{prefix}{path}", path if kind == "watched" else f"{where['hook']}: {path}",
                        where, path.lstrip("/"), as_dict(ge) if ge is not None else None,
                        as_dict(be) if be is not None else None)


# ---------------------------------------------------------------- the whole, and the links to causes

def build(good: Dict[str, Any], bad: Dict[str, Any], pristine: Optional[Dict[str, Dict[str, Any]]] = None,
          modified_differing: Optional[Set[str]] = None, hunks: Sequence[Dict[str, Any]] = ()
          ) -> List[Dict[str, Any]]:
    """Every patch between two snapshots, in a fixed order, with ids patch-1, patch-2, ...
    `modified_differing`: views.modified_entries_differing(good, bad) when the caller has it; `hunks`:
    the recorded patches' hunks applied on one side only (patch_status.hunk_patches), listed first."""
    b = _Builder(pristine or {})
    for hunk in hunks:
        b.add("hunk", hunk["key"], hunk["title"], hunk["where"], hunk.get("good_sha256"), hunk.get("bad_sha256"),
              hunk["basis"], diff=hunk.get("diff"), note=hunk.get("note"))
    _git(b, good, bad)
    _installed(b, good, bad, modified_differing)
    _hooks_and_files(b, good, bad)
    patches = sorted(b.patches, key=lambda p: (KIND_ORDER.get(p["kind"], 9), p["key"], p["title"]))
    for index, patch in enumerate(patches, 1):
        patch["id"] = f"patch-{index}"
    _same_bytes(patches, good, bad)
    return patches


def _same_bytes(patches: List[Dict[str, Any]], good: Dict[str, Any], bad: Dict[str, Any]) -> None:
    """An installed file without a diff whose edited bytes equal a git working copy's: that copy's
    patch against HEAD shows the edit (the same file edited in the checkout and in site-packages)."""
    by_sha: Dict[str, Dict[str, Any]] = {}
    for patch in patches:
        if patch["kind"] == "git" and patch.get("diff"):
            for sha in (patch.get("bad_sha256"), patch.get("good_sha256")):
                if sha:
                    by_sha.setdefault(sha, patch)
    for patch in patches:
        if patch["kind"] != "installed" or patch.get("diff"):
            continue
        twin = by_sha.get(patch.get("bad_sha256") or "") or by_sha.get(patch.get("good_sha256") or "")
        if twin is not None:
            patch["same_as"] = twin["id"]
            patch["note"] = (f"the edited bytes are those of {twin['title']} (same sha256): {twin['id']} shows "
                             "that edit against HEAD" + (f". {patch['note']}" if patch.get("note") else ""))


def counted(patches: Sequence[Mapping[str, object]]) -> str:
    """'2 changed files, 1 stash entry and 1 recorded patch hunk': what a patch list holds, by kind."""
    counts: Dict[str, int] = {}
    for patch in patches:
        counts[str(patch.get("kind"))] = counts.get(str(patch.get("kind")), 0) + 1
    parts = []
    for kind in sorted(counts, key=lambda k: (KIND_ORDER.get(k, 9), k)):
        one, many = KIND_WORDS.get(kind, (f"{kind} patch", f"{kind} patches"))
        parts.append(f"{counts[kind]} {one if counts[kind] == 1 else many}")
    if len(parts) < 2:
        return parts[0] if parts else "no patches"
    return ", ".join(parts[:-1]) + " and " + parts[-1]


def _quote(lines: List[str]) -> str:
    shown = [line.strip() for line in lines if line.strip()][:_EVIDENCE_LINES]
    return ", ".join("`" + (s if len(s) <= _QUOTE_CHARS else s[:_QUOTE_CHARS - 1] + "…") + "`" for s in shown)


def _summary(patch: Dict[str, Any]) -> str:
    if patch["kind"] == "hunk":  # a recorded patch's hunk, read good -> bad (undone where BAD lost it)
        if not patch.get("diff"):
            return f"{patch['id']} ({patch['title']}): {patch['basis']}; {patch.get('note') or 'no text'}"
        lines = patch["diff"].split("\n")
        minus = [line[1:] for line in lines if line.startswith("-") and not line.startswith("--- ")]
        plus = [line[1:] for line in lines if line.startswith("+") and not line.startswith("+++ ")]
        edit = (f"replaces {_quote(minus)} with {_quote(plus)}" if minus and plus else
                f"adds {_quote(plus)}" if plus else f"removes {_quote(minus)}")
        return f"{patch['id']} ({patch['title']}): good \u2192 bad {edit}; {patch['basis']}"
    if not patch.get("diff"):
        twin = f"; same bytes as {patch['same_as']}" if patch.get("same_as") else ""
        return f"{patch['id']} ({patch['title']}): {patch['basis']}{twin}"
    minus = [line[1:] for line in patch["diff"].split("\n") if line.startswith("-") and not line.startswith("--- ")]
    plus = [line[1:] for line in patch["diff"].split("\n") if line.startswith("+") and not line.startswith("+++ ")]
    text = (f"{patch['id']} ({patch['title']}): -{patch['removed']} +{patch['added']} lines in "
            f"{patch['hunks']} hunk{'s' if patch['hunks'] != 1 else ''}")
    if minus:
        text += f"; removes {_quote(minus)}"
    if plus:
        text += f"; adds {_quote(plus)}"
    return text + (" (truncated text)" if patch.get("truncated") else "")


def _names(var: str, changed: str) -> bool:
    """Does `changed` name `var` as a whole word (not inside a longer identifier)?"""
    return re.search(r"(?<![A-Za-z0-9_])" + re.escape(var) + r"(?![A-Za-z0-9_])", changed) is not None


def link(causes: List[Dict[str, Any]], patches: List[Dict[str, Any]]) -> None:
    """Tie patches and the causes they support, both ways, with an evidence line on each cause."""
    for cause in causes:
        cause.setdefault("patches", [])
    # Each cause's evidence as one text (NUL between lines: no key holds one), kept up to date as reasons
    # are added: one substring test per cause and patch instead of one per evidence line.
    evidence_text = {id(c): "\0".join(str(line) for line in c.get("evidence") or []) for c in causes}
    variables = {str(c["variable"]) for c in causes if c.get("variable")}
    for patch in patches:
        # Only changed lines count: a whole file shown (no diff) names many variables it did not change.
        changed = "\n".join(patchtext.changed_lines(patch["diff"])) if patch.get("diff") else ""
        # The causes' variables these changed lines name, once per patch (a regex search per cause and
        # patch cost seconds on a diff with thousands of causes; a substring test rules most out first).
        named = {var for var in variables if changed and var in changed and _names(var, changed)}
        for cause in causes:
            reason = None
            if cause["key"] == patch["key"]:
                reason = _summary(patch)
            elif patch["key"] in evidence_text[id(cause)]:
                reason = f"the edit named above: {_summary(patch)}"
            else:
                var = cause.get("variable")  # the cause's environment variable, as a field
                if var in named:
                    lines = [line for line in changed.split("\n") if var in line]
                    reason = f"{patch['id']} ({patch['title']}) changes lines that name {var}: {_quote(lines)}"
            if reason is None:
                continue
            patch["causes"].append(cause["key"])
            cause["patches"].append(patch["id"])
            cause["evidence"].append(reason)
            evidence_text[id(cause)] += "\0" + reason


def _setting_line(name: str) -> "re.Pattern[str]":
    """A line that sets the variable NAME whatever was exported before: os.environ["NAME"] = ..., os.putenv /
    setenv("NAME", ...), or a shell's NAME=... / export NAME=... (not environ.setdefault: an export wins it)."""
    var = re.escape(name)
    return re.compile(rf"""environ\s*\[\s*['"]{var}['"]\s*\]\s*=(?!=)"""
                      rf"""|\b(?:putenv|setenv)\s*\(\s*['"]{var}['"]"""
                      rf"""|(?:^|[\s;])(?:export\s+)?{var}=""")


def setter(patches: Sequence[Dict[str, Any]], name: str, side: str) -> Optional[Tuple[Dict[str, Any], str]]:
    """The first patch whose `side` text sets the environment variable NAME in-process (its changed lines on
    that side, or the whole text shown for an edited file with no diff), and that line. Files the described
    interpreter runs come first (installed files, start-up hooks): a checkout's copy of an installed file is
    where it was edited, not what ran."""
    pattern = _setting_line(name)
    for patch in sorted(patches, key=lambda p: SETTER_ORDER.get(p.get("kind", ""), len(SETTER_ORDER))):
        if patch.get("diff"):
            mark = "+" if side == "bad" else "-"
            lines = [line[1:] for line in patch["diff"].split("\n")
                     if line.startswith(mark) and not line.startswith(mark * 3 + " ")]
        elif isinstance(patch.get("content"), str) and patch.get("basis", "").startswith(f"edited in {side}"):
            lines = patch["content"].split("\n")
        else:
            continue
        found = next((line.strip() for line in lines if name in line and pattern.search(line)), None)
        if found is not None:
            return patch, found
    return None
