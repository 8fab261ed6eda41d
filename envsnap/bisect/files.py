"""Bisect's file deltas: files whose GOOD and BAD versions can both be re-created here.

Where a version comes from, in the order tried (every one verified by sha256):
1. the snapshot's text of the file (the `content` record captured with edited git files,
   small untracked files, installed files failing RECORD, start-up hooks and --watch
   files), when it is the file's bytes (status "text", not redacted);
2. this machine's file, when it holds exactly that version now (its sha256 matches the
   one the snapshot recorded): the usual case for the side captured last;
3. for a git file clean on one side: the blob at that side's HEAD (sources.GitReader);
   for an installed file that matched RECORD on one side: the wheel member with RECORD's
   hash (sources.WheelFinder);
4. "absent", when that side shows the file did not exist (deleted, renamed away,
   untracked on the other side only, a start-up hook or watched file not found).
A version held only as a hash, or as truncated or redacted text, is not applicable (the
delta is listed with why). A file that is a symbolic link, has several hard links, lies
inside `.git`, or whose current content is neither version is never switched: the last is
"refused", one line each.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.bisect.candidates import (
    Candidate,
    Side,
    git_candidates,
    installed_candidates,
    startup_candidates,
    text_of,
    watched_candidates,
)
from envsnap.bisect.sources import GitReader, WheelFinder, sha256_hex

MAX_FILE_BYTES = 64 << 20  # a larger file is not held in memory to be switched
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


# ---------------------------------------------------------------------------------------
# Versions and deltas
# ---------------------------------------------------------------------------------------

@dataclass
class Version:
    """One side's version of a file: absent, or bytes with their sha256 (or why not known)."""

    present: bool
    sha256: Optional[str] = None
    data: Optional[bytes] = None
    origin: str = ""
    mode: Optional[int] = None  # for a file this version creates (git's 100755 -> 0o755)
    why_not: str = ""
    git_blob: Optional[Tuple[str, str, str]] = None  # (repo, commit, rel) when it is that blob

    @property
    def usable(self) -> bool:
        return not self.why_not and (not self.present or self.data is not None)

    def describe(self) -> str:
        if not self.present:
            return "absent"
        text = f"sha256 {self.sha256[:12]}" if self.sha256 else "unknown content"
        if self.data is not None:
            text += f", {len(self.data)} bytes"
        return text + (f" ({self.origin})" if self.origin else "")


@dataclass
class FileDelta:
    """One file whose GOOD and BAD versions differ; its name is its absolute path."""

    name: str
    source: str  # git | installed | startup | watched
    where: str  # what the snapshots say, e.g. "git /src/repo: M python/x.py (clean in GOOD)"
    good: Version
    bad: Version
    applicable: bool = True
    note: str = ""
    current: Optional[str] = None  # which version this machine holds now: "good" | "bad"
    current_mode: Optional[int] = None
    repo: Optional[str] = None
    rel: Optional[str] = None
    also: List[str] = field(default_factory=list)  # other sections that list the same file
    kind: str = "file"

    @property
    def path(self) -> str:
        return self.name

    @property
    def change(self) -> str:
        if not self.good.present:
            return "created"
        if not self.bad.present:
            return "deleted"
        return "modified"

    def public(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"name": self.name, "kind": "file", "source": self.source, "change": self.change,
               "where": self.where, "good": self.good.describe(), "bad": self.bad.describe(),
               "good_sha256": self.good.sha256, "bad_sha256": self.bad.sha256}
        if self.current:
            out["current"] = self.current
        if self.repo:
            out["repo"], out["rel"] = self.repo, self.rel
        if self.also:
            out["also"] = list(self.also)
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class FileDeltaSet:
    applicable: List[FileDelta]
    not_applicable: List[FileDelta]
    refused: List[FileDelta]  # current content is neither version: never touched
    notes: List[str]


# ---------------------------------------------------------------------------------------
# This machine's file
# ---------------------------------------------------------------------------------------

@dataclass
class DiskState:
    kind: str  # absent | file | link | other | large | error
    data: Optional[bytes] = None
    sha256: Optional[str] = None
    mode: Optional[int] = None
    nlink: int = 1
    error: str = ""


def read_disk(path: str, limit: int = MAX_FILE_BYTES) -> DiskState:
    """What is at path now, without following a link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return DiskState("absent")
    except OSError as exc:
        return DiskState("error", error=exc.strerror or str(exc))
    except ValueError:  # a NUL in the name (a damaged snapshot): no file can have it
        return DiskState("error", error="a file name with a NUL byte")
    if stat.S_ISLNK(st.st_mode):
        return DiskState("link")
    if not stat.S_ISREG(st.st_mode):
        return DiskState("other")
    if st.st_size > limit:
        return DiskState("large", mode=stat.S_IMODE(st.st_mode))
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError as exc:
        return DiskState("error", error=exc.strerror or str(exc))
    try:
        chunks = []
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
        data = b"".join(chunks)
        info = os.fstat(fd)
    except OSError as exc:
        return DiskState("error", error=exc.strerror or str(exc))
    finally:
        os.close(fd)
    return DiskState("file", data, sha256_hex(data), stat.S_IMODE(info.st_mode), info.st_nlink)


# ---------------------------------------------------------------------------------------
# Resolving versions
# ---------------------------------------------------------------------------------------

class _Resolver:
    def __init__(self, git: GitReader, wheels: WheelFinder):
        self.git = git
        self.wheels = wheels
        self._trees: Dict[Tuple[str, str], Tuple[Dict[str, Tuple[str, str]], str]] = {}
        self._filters: Dict[str, Dict[str, str]] = {}

    def prepare_git(self, candidates: Sequence[Candidate]) -> None:
        """One ls-tree per (repo, commit) and one check-attr per repo, for every clean side."""
        wanted: Dict[Tuple[str, str], List[str]] = {}
        for cand in candidates:
            for side in (cand.good, cand.bad):
                if side.kind == "clean" and side.commit and cand.repo:
                    wanted.setdefault((cand.repo, side.commit), []).append(cand.rel or "")
        for (top, commit), rels in wanted.items():
            if not self.git.commit_exists(top, commit):
                self._trees[(top, commit)] = ({}, f"commit {commit[:12]} is not in {top} (fetch it to switch "
                                                  "this file)")
                continue
            self._trees[(top, commit)] = self.git.tree_entries(top, commit, rels)
            self._filters.setdefault(top, {}).update(self.git.filter_attributes(top, rels))

    def version(self, cand: Candidate, side: Side, disk: DiskState) -> Version:
        if side.kind == "absent":
            return Version(False, origin="absent")
        if side.kind == "unknown":
            return Version(True, why_not=side.why)
        if side.kind == "clean":
            return self._clean(cand, side)
        if side.kind == "held":
            data, why = text_of(side)
            if data is not None:
                return Version(True, side.sha256, data, "the snapshot's text")
            if disk.kind == "file" and disk.sha256 == side.sha256:
                return Version(True, side.sha256, disk.data, "this machine's file, same sha256")
            return Version(True, side.sha256, why_not=why)
        # pristine: RECORD's hash; this machine's file or the wheel's member
        if not side.sha256 or side.dist is None:
            return Version(True, why_not="RECORD's hash is not in the snapshot")
        if disk.kind == "file" and disk.sha256 == side.sha256:
            return Version(True, side.sha256, disk.data, "this machine's file, as installed")
        name, version, rel = side.dist
        data, wheel, why = self.wheels.member(name, version, rel, side.sha256)
        if data is None:
            return Version(True, side.sha256, why_not=why)
        return Version(True, side.sha256, data, f"as installed: {os.path.basename(wheel)}")

    def _clean(self, cand: Candidate, side: Side) -> Version:
        if not side.commit or not cand.repo or cand.rel is None:
            return Version(True, why_not="that snapshot recorded no HEAD commit")
        tree, why = self._trees.get((cand.repo, side.commit), ({}, "not looked up"))
        if why:
            return Version(True, why_not=why)
        if cand.rel not in tree:
            return Version(False, origin=f"not in HEAD {side.commit[:7]}")
        mode, kind = tree[cand.rel]
        if kind != "blob" or mode == "120000":
            return Version(True, why_not=f"at HEAD it is a {'symbolic link' if mode == '120000' else kind}")
        driver = self._filters.get(cand.repo, {}).get(cand.rel)
        if driver:
            return Version(True, why_not=f"git filter '{driver}' produces its checked-out bytes (not read here)")
        data, why = self.git.checked_out_blob(cand.repo, side.commit, cand.rel)
        if data is None:
            return Version(True, why_not=why)
        return Version(True, sha256_hex(data), data, f"git HEAD {side.commit[:7]}",
                       mode=0o755 if mode == "100755" else 0o644, git_blob=(cand.repo, side.commit, cand.rel))


# ---------------------------------------------------------------------------------------
# All of it
# ---------------------------------------------------------------------------------------

def collect_file_deltas(good: Mapping[str, Any], bad: Mapping[str, Any], wheels: Optional[WheelFinder] = None,
                        git: Optional[GitReader] = None) -> FileDeltaSet:
    """Every file that differs between GOOD and BAD, resolved against this machine."""
    notes: List[str] = []
    candidates: List[Candidate] = []
    for gather in (git_candidates, installed_candidates, startup_candidates, watched_candidates):
        candidates.extend(gather(good, bad, notes))
    resolver = _Resolver(git or GitReader(), wheels or WheelFinder())
    resolver.prepare_git([c for c in candidates if not c.why and (not c.root or os.path.isdir(c.root))])

    by_path: Dict[str, FileDelta] = {}
    order: List[str] = []
    for cand in candidates:
        path = os.path.abspath(cand.path)
        disk = read_disk(path)
        delta = FileDelta(path, cand.source, cand.where, Version(True), Version(True), repo=cand.repo, rel=cand.rel)
        if cand.why:
            delta.applicable, delta.note = False, cand.why
        elif cand.root and not os.path.isdir(cand.root):
            delta.applicable = False
            delta.note = f"{cand.root} is not on this machine (the snapshots were taken elsewhere?)"
        else:
            delta.good = resolver.version(cand, cand.good, disk)
            delta.bad = resolver.version(cand, cand.bad, disk)
            _judge(delta, disk)
        if delta.applicable and delta.good.sha256 == delta.bad.sha256 and delta.good.present == delta.bad.present:
            continue  # the two versions are the same bytes (a file dirty on one side that matches HEAD)
        try:  # one file reached by two names (a symlinked directory) is one delta
            key = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
        except ValueError:  # a NUL in the name: read_disk already made it not applicable
            key = path
        earlier = by_path.get(key)
        if earlier is None:
            by_path[key] = delta
            order.append(key)
        elif not earlier.applicable and delta.applicable:
            delta.also = earlier.also + [earlier.where]
            by_path[key] = delta
        else:
            earlier.also.append(delta.where)
    deltas = [by_path[k] for k in order]
    applicable = sorted((d for d in deltas if d.applicable), key=lambda d: d.name)
    refused = sorted((d for d in deltas if not d.applicable and d.current == "neither"), key=lambda d: d.name)
    not_applicable = sorted((d for d in deltas if not d.applicable and d.current != "neither"), key=lambda d: d.name)
    notes.extend(resolver.wheels.notes)
    return FileDeltaSet(applicable, not_applicable, refused, notes)


def _judge(delta: FileDelta, disk: DiskState) -> None:
    """Applicable only when both versions are known and this machine's file can be switched."""
    reasons = []
    for label, version in (("GOOD", delta.good), ("BAD", delta.bad)):
        if not version.usable:
            reasons.append(f"{label}'s version is {version.why_not}" if version.why_not.startswith("held")
                           else f"{label}'s version: {version.why_not}")
    parts = delta.name.split(os.sep)
    if ".git" in parts:
        reasons.insert(0, "inside .git: bisect never writes there")
    elif disk.kind == "link":
        reasons.insert(0, "a symbolic link on this machine: not replaced")
    elif disk.kind == "other":
        reasons.insert(0, "not a regular file on this machine")
    elif disk.kind == "large":
        reasons.insert(0, f"larger than {MAX_FILE_BYTES >> 20} MiB")
    elif disk.kind == "error":
        reasons.insert(0, f"unreadable here ({disk.error})")
    elif disk.nlink > 1:
        reasons.insert(0, f"has {disk.nlink} hard links: replacing it would split them")
    if reasons:
        delta.applicable, delta.note = False, "; ".join(reasons)
        return
    delta.current_mode = disk.mode
    current_sha = disk.sha256 if disk.kind == "file" else None
    for label, version in (("good", delta.good), ("bad", delta.bad)):
        if version.present == (disk.kind == "file") and version.sha256 == current_sha:
            delta.current = label
            break
    if delta.current is None and disk.kind == "absent":
        delta.applicable = False
        delta.note = "not on this machine (both versions are files; the snapshots were taken elsewhere?)"
    elif delta.current is None:
        delta.current = "neither"
        now = f"sha256 {current_sha[:12]}" if current_sha else "absent"
        delta.applicable = False
        delta.note = (f"refused: its content here ({now}) is neither GOOD's ({delta.good.describe()}) nor BAD's "
                      f"({delta.bad.describe()}) version; changed since the snapshots? left as is")
