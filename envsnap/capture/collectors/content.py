"""The text of a file as a snapshot keeps it: one record shape everywhere, bounded and redacted.

A content record sits under "content" of a file's entry (git dirty and untracked files, edited
installed files, start-up hooks, watched files); the patch of a git file or stash entry, under
"patch", has the same shape:

    {"status": "text" | "truncated" | "binary" | "too_large" | "over_budget" | "unreadable",
     "text": str,        # "text" and "truncated" only
     "size": int,        # bytes on disk (a patch: the bytes git wrote)
     "sha256": str,      # hex, of all those bytes (absent only when they could not all be read)
     "redacted": true,   # present only when redaction changed the text
     "error": str}       # "unreadable" only

- text: the bytes decoded as strict UTF-8, which JSON carries as is and which loses nothing: for
  status "text" without "redacted", text.encode("utf-8") gives back the file byte for byte (and
  its sha256). A NUL byte, or bytes that are not UTF-8, make a file "binary": left to its hash
  (git's own rule of thumb, a NUL in the first 8000 bytes, plus the decoding).
- truncated: a file over the per-file bound; text is its first bytes, cut back to a whole
  character. It shows the start of an edit, never the file: a consumer must not restore from it.
- too_large: an untracked file over the per-file bound is not kept at all (only small untracked
  files are: a big one is data, not a patch).
- over_budget: the snapshot's text budget was spent on files before this one; size and sha256 kept.
- unreadable: `error` says why (permission denied, the capture deadline).
Redaction (envsnap.redact.redact_file_text, unless --no-redact) runs before the text is stored,
while sha256 stays the hash of the real bytes: `redacted: true` says the text is not the file.

Bounds (CaptureContext.content_max_file / content_max_total, options --content-max-file and
--content-max-total): each collector keeps at most the total (a Budget bounds its memory), then
the runner applies the total across collectors in one fixed order (enforce_total: git, --patch
files, installed files, start-up hooks, watched files; by path inside each), so which files keep their text never
depends on which collector finished first. Text held by records is kept out of the runner's
generic scrub (hold/release): it was redacted here with the rules for file text.
"""
from __future__ import annotations

import codecs
import os
import stat
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Tuple

from envsnap.capture.base import (
    DEFAULT_CONTENT_MAX_FILE,
    DEFAULT_CONTENT_MAX_TOTAL,
    CaptureContext,
)
from envsnap.capture.collectors.files import describe_os_error
from envsnap.model.types import Section
from envsnap.redact import redact_file_text

STATUSES = ("text", "truncated", "binary", "too_large", "over_budget", "unreadable")
TEXT_STATUSES = ("text", "truncated")
RECORD_KEYS = ("content", "patch")  # where records sit in a file's (or stash entry's) entry
CHUNK = 1 << 20
DEADLINE_ERROR = "not read: capture deadline reached"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class Budget:
    """The bounds of one collector's text, and the bytes of text it has kept so far (thread-safe:
    the git collector inspects repositories in parallel)."""

    def __init__(self, max_file: int = DEFAULT_CONTENT_MAX_FILE, max_total: int = DEFAULT_CONTENT_MAX_TOTAL,
                 redact: bool = True) -> None:
        self.max_file = max(0, int(max_file))
        self.max_total = max(0, int(max_total))
        self.redact = redact
        self._used = 0
        self._lock = threading.Lock()

    @classmethod
    def of(cls, ctx: CaptureContext) -> "Budget":
        return cls(getattr(ctx, "content_max_file", DEFAULT_CONTENT_MAX_FILE),
                   getattr(ctx, "content_max_total", DEFAULT_CONTENT_MAX_TOTAL), getattr(ctx, "redact", True))

    def left(self) -> int:
        with self._lock:
            return self.max_total - self._used

    def take(self, count: int) -> bool:
        with self._lock:
            if self._used + count > self.max_total:
                return False
            self._used += count
            return True


def _decode(data: bytes, complete: bool) -> Optional[str]:
    """Strict UTF-8 text, or None for binary. A prefix (complete=False) may end inside a
    character: the incremental decoder holds those last bytes back instead of failing."""
    if b"\0" in data:
        return None
    try:
        return codecs.getincrementaldecoder("utf-8")("strict").decode(data, final=complete)
    except UnicodeDecodeError:
        return None


def _base(size: Optional[int], sha256: Optional[str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    if size is not None:
        out["size"] = size
    if sha256:
        out["sha256"] = sha256
    return out


def from_bytes(data: bytes, size: int, sha256: Optional[str], budget: Budget, path: str,
               complete: bool, redactor: Any = None) -> Dict[str, Any]:
    """The record of a file whose first bytes (all of them when complete) are `data`."""
    text = _decode(data, complete)
    if text is None:
        return dict(_base(size, sha256), status="binary")
    stored = text
    if budget.redact:
        stored = redactor(text) if redactor is not None else redact_file_text(text, path)
    if not budget.take(len(stored.encode("utf-8"))):
        return dict(_base(size, sha256), status="over_budget")
    record = dict(_base(size, sha256), status="text" if complete else "truncated", text=stored)
    if stored != text:
        record["redacted"] = True
    return record


def unreadable(error: str, known: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    known = known or {}
    return dict(_base(known.get("size"), known.get("sha256")), status="unreadable", error=error)


def read_file(path: str, budget: Budget, known: Optional[Dict[str, Any]] = None, deadline: Optional[float] = None,
              small_only: bool = False) -> Dict[str, Any]:
    """The record of the file at `path` (links followed). `known` is what a collector already hashed
    ({"size", "sha256"}): reused for the part of a big file that is not kept, so a multi-GB file is
    not hashed twice; a file kept whole is hashed from the very bytes kept, so text and sha256 agree
    even if it changed in between. small_only: over the per-file bound -> too_large (untracked)."""
    import hashlib  # here: OpenSSL's load would otherwise be paid by every snapshot reader (diff imports collectors for SHAPE)

    known = known or {}
    if deadline is not None and time.monotonic() > deadline:
        return unreadable(DEADLINE_ERROR, known)
    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: a FIFO swapped in cannot block the capture
    except OSError as exc:
        return unreadable(_os_error(exc), known)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return unreadable("not a regular file", known)
        size = st.st_size
        trusted = known.get("sha256") if known.get("size") == size else None
        if budget.left() <= 0 or (small_only and size > budget.max_file):
            status = "over_budget" if budget.left() <= 0 else "too_large"
            sha = trusted or _hash_rest(fd, hashlib.sha256(), deadline)
            return dict(_base(size, sha), status=status)
        digest = hashlib.sha256()
        head = b""
        while len(head) <= budget.max_file:
            chunk = os.read(fd, min(CHUNK, budget.max_file + 1 - len(head)))
            if not chunk:
                break
            head += chunk
        digest.update(head)
        if len(head) <= budget.max_file:  # the whole file: hashed from these bytes
            return from_bytes(head, len(head), digest.hexdigest(), budget, path, complete=True)
        sha = trusted or _hash_rest(fd, digest, deadline)
        return from_bytes(head[:budget.max_file], size, sha, budget, path, complete=False)
    except OSError as exc:
        return unreadable(_os_error(exc), known)
    finally:
        os.close(fd)


def _hash_rest(fd: int, digest: Any, deadline: Optional[float]) -> Optional[str]:
    """Finish hashing from the current offset; None when the deadline stops it."""
    while True:
        if deadline is not None and time.monotonic() > deadline:
            return None
        chunk = os.read(fd, CHUNK)
        if not chunk:
            return str(digest.hexdigest())
        digest.update(chunk)


def _os_error(exc: OSError) -> str:
    return describe_os_error(exc)


def patch_record(data: bytes, budget: Budget) -> Dict[str, Any]:
    """The record of a patch as git wrote it (one file's or a whole stash's). Each file of a patch is
    redacted by the rules of its own path (source code or not)."""
    import hashlib

    complete = len(data) <= budget.max_file
    return from_bytes(data if complete else data[:budget.max_file], len(data), hashlib.sha256(data).hexdigest(),
                      budget, "", complete, redactor=redact_patch_text)


def redact_patch_text(text: str) -> str:
    from envsnap.model import patchtext  # here: a clean capture holds no patch (patchtext loads difflib)

    return "".join(redact_file_text(chunk, path or "") for path, chunk in patchtext.split_text_patch(text))


# ---------------------------------------------------------------- the whole snapshot

def _slots(name: str, data: Dict[str, Any]) -> Iterator[Tuple[Dict[str, Any], str]]:
    """(entry, key) of every content record of one section's data, in the budget's order."""
    def entries(mapping: Any) -> List[Dict[str, Any]]:
        return [mapping[k] for k in sorted(mapping) if isinstance(mapping[k], dict)] if isinstance(mapping, dict) else []

    if name == "git":
        for repo in entries(data.get("repos")):
            for entry in entries(repo.get("dirty")):
                yield entry, "patch"
                yield entry, "content"
            for entry in entries(repo.get("stash")):
                yield entry, "patch"
            for entry in entries(repo.get("untracked")):
                yield entry, "content"
    elif name == "packages":
        for entry in entries((data.get("integrity") or {}).get("modified")):
            yield entry, "content"
    elif name == "python":
        for entry in entries(data.get("startup_hooks")):
            yield entry, "content"
    elif name == "files":
        for entry in entries(data.get("entries")):
            yield entry, "content"
    elif name == "patches":
        for entry in entries(data.get("patches")):
            yield entry, "content"


# The patches the user named come right after the checkouts: a diff quotes their hunks from this text.
ORDER = ("git", "patches", "packages", "python", "files")


def enforce_total(sections: Dict[str, Section], max_total: int) -> None:
    """Keep at most max_total bytes of text over all sections, in ORDER; the rest is over_budget."""
    used = 0
    for name in ORDER:
        section = sections.get(name)
        data = section.get("data") if section is not None else None
        if not isinstance(data, dict):
            continue
        for entry, key in _slots(name, data):
            record = entry.get(key)
            if not isinstance(record, dict) or not isinstance(record.get("text"), str):
                continue
            count = len(record["text"].encode("utf-8"))
            if used + count > max_total:
                entry[key] = dict(_base(record.get("size"), record.get("sha256")), status="over_budget")
            else:
                used += count


class _Held:
    """A record kept out of the generic scrub: scrub() returns objects it does not know as they are."""

    __slots__ = ("record",)

    def __init__(self, record: Dict[str, Any]) -> None:
        self.record = record


def hold(name: str, section: Section) -> int:
    """Wrap the section's records so the runner's scrub leaves their text alone; returns how many."""
    data = section.get("data")
    count = 0
    if isinstance(data, dict):
        for entry, key in list(_slots(name, data)):
            if isinstance(entry.get(key), dict):
                entry[key] = _Held(entry[key])
                count += 1
    return count


def release(name: str, section: Section) -> None:
    """Unwrap what hold() wrapped (the scrub may have renamed entries: found by walking again)."""
    data = section.get("data")
    if isinstance(data, dict):
        for entry, key in list(_slots(name, data)):
            if isinstance(entry.get(key), _Held):
                entry[key] = entry[key].record


# ---------------------------------------------------------------- installed files

def attach_installed(data: Dict[str, Any], budget: Budget, deadline: Optional[float] = None) -> None:
    """The current text of each installed file that fails its RECORD check (packages section data:
    integrity.modified keyed by RECORD path, "<path> [<dist>]" on a clash; dists give locations)."""
    modified = (data.get("integrity") or {}).get("modified") or {}
    dists = data.get("dists") or {}
    for key in sorted(modified):
        entry = modified[key]
        if not isinstance(entry, dict):
            continue
        dist = str(entry.get("dist") or "")
        location = (dists.get(dist) or {}).get("location")
        if not location:
            entry["content"] = unreadable("the distribution's location is not known")
            continue
        rel = key[:-len(f" [{dist}]")] if dist and key.endswith(f" [{dist}]") else key
        known = {"size": entry.get("actual_size"), "sha256": entry.get("actual_sha256")}
        entry["content"] = read_file(os.path.normpath(os.path.join(location, rel)), budget, known, deadline)
