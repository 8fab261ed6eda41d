"""Switching files for bisect, and putting every one of them back, even after a kill -9.

The one place envsnap writes to a user's files. Its rules:
- before a file is first touched, its bytes are copied into a backup directory next to
  the journal (fsynced) and a manifest line records the copy, the file's mode, owner and
  times, and every sha256 bisect may leave in it (GOOD's and BAD's versions) — all BEFORE
  the file is touched, so a kill at any instant leaves a manifest that can undo it; a file
  switched hunk by hunk (hunks.py) holds other versions too: each one's sha256 is journaled
  (a "may_hold" line, fsynced) before it is first written;
- a version is written by atomic replacement: a temp file in the same directory under a
  name derived from the file's (so a restore finds one a kill left behind), fsync, the
  original mode and owner, rename, fsync of the directory; a version that is "absent" is
  an unlink; a missing parent directory is journaled, then created, and removed at restore;
- each write sets the file's mtime one whole second past the last one bisect set: Python
  trusts a `__pycache__` entry whose recorded source mtime (seconds) and size match, so two
  versions of equal size written within one second would otherwise run the stale bytecode;
- before every write the file is checked to hold what bisect left in it: one the user
  changed meanwhile stops the bisect and is never overwritten (nor restored over);
- restore puts back the original bytes, mode and times of every file whose content is one
  bisect may have left, removes the directories it created, and deletes the backups;
  a file changed by someone else is left as it is, and its original stays in
  `<backup dir>.kept…` with the path printed. The manifest is flock'ed while a bisect
  runs, so a second bisect cannot restore files under the first one's feet.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from envsnap.bisect.files import FileDelta, Version, read_disk
from envsnap.bisect.hunks import Split
from envsnap.bisect.journal import append_whole_line, lock_or_refuse
from envsnap.errors import EnvsnapError
from envsnap.model.store import process_umask

MANIFEST = "manifest.jsonl"
MANIFEST_VERSION = 1
ABSENT = "absent"  # a state in the manifest: the file did not exist


def backup_dir_for(journal_path: str) -> str:
    return os.path.abspath(journal_path) + ".backup"


def temp_name(path: str) -> str:
    """The temp file a replacement of path uses: fixed, so a restore can remove a leftover."""
    digest = hashlib.sha256(os.path.basename(path).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return os.path.join(os.path.dirname(path), f".envsnap-bisect-{digest}.tmp")


class FileChanged(EnvsnapError):
    """A file bisect switches was changed by someone else while bisect ran."""


class SwitchFailed(EnvsnapError):
    """A file could not be backed up or switched (a full disk, a read-only checkout): the file named was
    left as it was; the caller restores the others and says which, if any, are still switched."""


def _why(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _fsync_dir(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _state(path: str) -> str:
    """sha256 of the file at path, ABSENT, or a description of something else."""
    disk = read_disk(path, limit=1 << 62)
    if disk.kind == "absent":
        return ABSENT
    if disk.kind == "file":
        return disk.sha256 or ""
    return f"<{disk.kind}>"


def _state_of(version: Version) -> str:
    return (version.sha256 or "") if version.present else ABSENT


def write_atomically(path: str, data: bytes, mode: int, owner: Optional[Tuple[int, int]] = None,
                     times_ns: Optional[Tuple[int, int]] = None) -> None:
    """Replace path by data: temp file beside it, fsync, mode/owner, rename, fsync of the dir."""
    tmp = temp_name(path)
    try:
        os.unlink(tmp)  # a leftover of a killed bisect (the name is ours)
    except FileNotFoundError:
        pass
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0), 0o600)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fchmod(fd, mode)
            if owner is not None and os.geteuid() == 0:
                try:
                    os.fchown(fd, owner[0], owner[1])
                except OSError:
                    pass
            os.fsync(fd)
        finally:
            os.close(fd)
        if times_ns is not None:
            os.utime(tmp, ns=times_ns)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(os.path.dirname(path))


# ---------------------------------------------------------------------------------------
# The manifest
# ---------------------------------------------------------------------------------------

def _lock(handle: Any) -> None:
    lock_or_refuse(handle, f"the files of {os.path.dirname(handle.name)} are in use by another envsnap bisect",
                   f"cannot lock {handle.name}")


def _read_manifest(directory: str) -> List[Dict[str, Any]]:
    path = os.path.join(directory, MANIFEST)
    with open(path, "rb") as handle:
        raw = handle.read()
    entries = []
    for line in raw.split(b"\n"):
        if not line.strip():
            continue
        try:
            entry = json.loads(line.decode("utf-8", "surrogateescape"))
        except ValueError:
            continue  # a line cut by a kill: its file was not touched yet (it is written first)
        if isinstance(entry, dict):
            entries.append(entry)
    return entries


@dataclass
class RestoreReport:
    restored: List[str] = field(default_factory=list)  # put back
    unchanged: List[str] = field(default_factory=list)  # already as before
    left: List[Tuple[str, str]] = field(default_factory=list)  # (path, why) changed by someone else: left as is
    failed: List[Tuple[str, str]] = field(default_factory=list)  # (path, why) could not be written: still switched
    kept_dir: Optional[str] = None  # where originals of `left` files are kept
    removed_dirs: List[str] = field(default_factory=list)
    directory: str = ""  # the backup directory (still there when a file failed)

    @property
    def clean(self) -> bool:
        return not self.left and not self.failed

    def lines(self) -> List[str]:
        out = []
        for path, why in self.left:
            where = f"; its content before bisect is kept in {self.kept_dir}" if self.kept_dir else ""
            out.append(f"NOT restored: {path}: {why}{where}")
        if self.failed:
            paths = ", ".join(path for path, _ in self.failed)
            whys = sorted({why for _, why in self.failed})
            out.append(f"still switched: {paths} ({counted(len(self.failed), 'file')}: {'; '.join(whys)}): once that "
                       f"is fixed, run `{restore_command(self.directory)}`")
        return out


def counted(n: int, word: str) -> str:
    """'1 file', '2 files'."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def journal_of(directory: str) -> str:
    """The journal whose backups `directory` holds (backup_dir_for's inverse)."""
    return directory[:-len(".backup")] if directory.endswith(".backup") else directory


def restore_command(directory: str) -> str:
    import shlex

    return f"envsnap bisect --restore --journal {shlex.quote(journal_of(directory))}"


def still_switched(directory: str) -> List[str]:
    """Files the manifest in `directory` records that hold a version bisect wrote, not their original (read
    only: nothing is locked or changed); [] when there is no manifest."""
    if not os.path.exists(os.path.join(directory, MANIFEST)):
        return []
    try:
        backups, _ = _manifest_backups(_read_manifest(directory))
    except OSError:
        return []
    out = []
    for path, entry in sorted(backups.items()):
        try:
            now = _state(path)
        except OSError:
            continue
        if now != entry.get("state") and now in set(entry.get("may_hold") or []):
            out.append(path)
    return out


def restore_dir(directory: str) -> Optional[RestoreReport]:
    """Undo what the bisect journaling into `directory` changed; None when there is nothing to undo."""
    manifest = os.path.join(directory, MANIFEST)
    if not os.path.isdir(directory):
        return None
    if not os.path.exists(manifest):
        shutil.rmtree(directory, ignore_errors=True)  # killed before the manifest existed: nothing was touched
        return None
    handle = open(manifest, "rb")  # read-only is enough for the lock, and works on a read-only mount
    _lock(handle)
    try:
        return _restore_locked(directory, _read_manifest(directory))
    finally:
        handle.close()


def _manifest_backups(entries: List[Dict[str, Any]]) -> Tuple[Dict[str, Dict[str, Any]], List[str]]:
    """The manifest's first backup line per file (with every state it may hold) and the directories made."""
    backups: Dict[str, Dict[str, Any]] = {}
    created_dirs: List[str] = []
    held: Dict[str, List[str]] = {}  # states journaled before a write of a hunk subset (may_hold lines)
    for entry in entries:
        if entry.get("type") == "backup" and isinstance(entry.get("path"), str) and entry["path"] not in backups:
            backups[entry["path"]] = entry
        elif entry.get("type") == "mkdir" and isinstance(entry.get("path"), str):
            created_dirs.append(entry["path"])
        elif entry.get("type") == "may_hold" and isinstance(entry.get("path"), str) \
                and isinstance(entry.get("state"), str):
            held.setdefault(entry["path"], []).append(entry["state"])
    for path, states in held.items():
        if path in backups:
            backups[path] = dict(backups[path], may_hold=sorted(set(backups[path].get("may_hold") or []) | set(states)))
    return backups, created_dirs


def _restore_locked(directory: str, entries: List[Dict[str, Any]]) -> RestoreReport:
    """Restore every file of the manifest. A file that cannot be written now (a full disk, a read-only
    mount) keeps the whole backup directory in place, so `--restore` can finish it later (idempotent: what
    is back already counts as unchanged)."""
    report = RestoreReport(directory=directory)
    backups, created_dirs = _manifest_backups(entries)
    keep = []
    for path, entry in backups.items():
        try:
            tmp = temp_name(path)
            if os.path.lexists(tmp):
                os.unlink(tmp)
            outcome = _restore_one(directory, path, entry)
        except OSError as exc:
            report.failed.append((path, _why(exc)))
            continue
        if outcome == "restored":
            report.restored.append(path)
        elif outcome == "unchanged":
            report.unchanged.append(path)
        else:
            report.left.append((path, outcome))
            keep.append(entry)
    for path in reversed(created_dirs):
        try:
            os.rmdir(path)
            report.removed_dirs.append(path)
        except OSError:
            pass  # not empty (something else lives there now) or already gone
    if report.failed:
        return report  # the backups stay where --restore finds them
    if keep:
        report.kept_dir = _keep(directory, keep)
    else:
        shutil.rmtree(directory, ignore_errors=True)
        _fsync_dir(os.path.dirname(directory))
    return report


def _restore_one(directory: str, path: str, entry: Mapping[str, Any]) -> str:
    original = entry.get("state")
    allowed = set(entry.get("may_hold") or []) | {original}
    now = _state(path)
    if now not in allowed:
        what = "absent" if now == ABSENT else (f"sha256 {now[:12]}" if not now.startswith("<") else now)
        return f"changed by someone else since bisect wrote it (now {what})"
    times = entry.get("times_ns")
    times_ns = (int(times[0]), int(times[1])) if isinstance(times, list) and len(times) == 2 else None
    if original == ABSENT:
        if now == ABSENT:
            return "unchanged"
        os.unlink(path)
        _fsync_dir(os.path.dirname(path))
        return "restored"
    with open(os.path.join(directory, str(entry.get("copy"))), "rb") as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != original:
        return "its backup copy is damaged (sha256 mismatch)"
    mode = int(entry.get("mode", 0o644))
    if now == original:
        st = os.lstat(path)
        if stat.S_IMODE(st.st_mode) == mode and (times_ns is None or st.st_mtime_ns == times_ns[1]):
            return "unchanged"
    owner = tuple(entry["owner"]) if isinstance(entry.get("owner"), list) and len(entry["owner"]) == 2 else None
    write_atomically(path, data, mode, owner, times_ns)
    return "restored"


def _keep(directory: str, entries: List[Dict[str, Any]]) -> str:
    """Move the backup directory aside, holding only the files that could not be restored."""
    n = 0
    while True:
        kept = f"{directory}.kept" + (f"-{n}" if n else "")
        if not os.path.lexists(kept):
            break
        n += 1
    os.rename(directory, kept)
    copies = {str(e.get("copy")) for e in entries}
    for name in os.listdir(kept):
        if name != MANIFEST and name not in copies:
            try:
                os.unlink(os.path.join(kept, name))
            except OSError:
                pass
    with open(os.path.join(kept, MANIFEST), "w", encoding="utf-8") as handle:
        for entry in entries:
            handle.write(json.dumps(dict(entry, kept=True), sort_keys=True) + "\n")
    return kept


# ---------------------------------------------------------------------------------------
# The applier
# ---------------------------------------------------------------------------------------

class FileApplier:
    """Puts each file delta at its GOOD or BAD version for one configuration; a file split into hunks
    (hunks.py) at GOOD's text with the configuration's hunks at BAD's."""

    def __init__(self, directory: str, deltas: Sequence[FileDelta], progress: Optional[Callable[[str], None]] = None,
                 splits: Optional[Mapping[str, Split]] = None):
        self.directory = directory
        self.deltas = {d.name: d for d in deltas}
        self.splits = dict(splits or {})
        self.progress = progress or (lambda line: None)
        self.state: Dict[str, str] = {d.name: _state_of(d.good if d.current == "good" else d.bad) for d in deltas}
        self.backed_up: Dict[str, Dict[str, Any]] = {}
        self.touched: Set[str] = set()  # files written at least once (a backup alone changes nothing)
        self.last_mtime: Dict[str, int] = {}
        self.writes = 0
        self._handle: Optional[BinaryIO] = None
        self._copies = 0

    # -- the manifest ------------------------------------------------------------------
    def _open(self) -> None:
        if self._handle is not None:
            return
        if os.path.lexists(self.directory):
            raise EnvsnapError(f"{self.directory} exists: restore it first (envsnap bisect --restore)")
        try:
            os.mkdir(self.directory, 0o700)
        except OSError as exc:
            raise SwitchFailed(f"cannot create the backup directory {self.directory}: {_why(exc)}") from None
        try:
            # Unbuffered: a write that fails (a full disk) fails here, not again later when the file is closed.
            handle = open(os.path.join(self.directory, MANIFEST), "ab", buffering=0)
        except OSError as exc:
            shutil.rmtree(self.directory, ignore_errors=True)
            raise SwitchFailed(f"cannot write in the backup directory {self.directory}: {_why(exc)}") from None
        _lock(handle)
        self._handle = handle
        self._append({"type": "header", "version": MANIFEST_VERSION, "pid": os.getpid()})
        _fsync_dir(os.path.dirname(self.directory))

    def _append(self, entry: Dict[str, Any]) -> None:
        """One manifest line, fsynced; when it cannot be written whole, the manifest is cut back to what it
        was (a later line must never be glued to a partial one) and SwitchFailed says so."""
        assert self._handle is not None
        line = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8", "surrogateescape")
        try:
            append_whole_line(self._handle.fileno(), line)
        except OSError as exc:  # a partial last line is skipped by _read_manifest: its file was not touched yet
            raise SwitchFailed(f"cannot write the backup manifest in {self.directory}: {_why(exc)}") from None

    def _backup(self, delta: FileDelta) -> None:
        self._open()
        path = delta.name
        disk = read_disk(path, limit=1 << 62)
        entry: Dict[str, Any] = {"type": "backup", "path": path,
                       "may_hold": sorted({_state_of(delta.good), _state_of(delta.bad)})}
        if disk.kind == "absent":
            entry["state"] = ABSENT
        else:
            st = os.lstat(path)
            self._copies += 1
            copy = f"{self._copies:05d}"
            assert disk.data is not None
            try:
                write_atomically(os.path.join(self.directory, copy), disk.data, 0o600)
            except OSError as exc:
                raise SwitchFailed(f"cannot back up {path} into {self.directory}: {_why(exc)}") from None
            entry.update({"state": disk.sha256, "copy": copy, "mode": stat.S_IMODE(st.st_mode),
                          "owner": [st.st_uid, st.st_gid], "times_ns": [st.st_atime_ns, st.st_mtime_ns]})
        self._append(entry)
        self.backed_up[path] = entry

    def _make_parents(self, path: str) -> None:
        missing = []
        parent = os.path.dirname(path)
        while parent and not os.path.isdir(parent):
            missing.append(parent)
            parent = os.path.dirname(parent)
        for directory in reversed(missing):
            self._append({"type": "mkdir", "path": directory})
            try:
                os.mkdir(directory)
            except OSError as exc:
                raise SwitchFailed(f"cannot create directory {directory} for {path}: {_why(exc)}") from None

    # -- switching -----------------------------------------------------------------------
    def version_for(self, name: str, chosen: Set[str]) -> Version:
        """The version of file `name` in a configuration switching the deltas named in `chosen`."""
        split = self.splits.get(name)
        if split is None:
            delta = self.deltas[name]
            return delta.bad if name in chosen else delta.good
        return split.version({h.index for h in split.hunks if h.name in chosen})

    def apply(self, switched: Sequence[str]) -> None:
        """GOOD's version of every file delta, BAD's for those named in switched (a split file: its
        switched hunks at BAD's text)."""
        chosen = set(switched)
        for name, delta in sorted(self.deltas.items()):
            version = self.version_for(name, chosen)
            want = _state_of(version)
            if self.state[name] == want:
                continue
            now = _state(name)
            if now != self.state[name]:
                raise FileChanged(
                    f"{name} was changed while bisect was running, by someone or by the benchmark itself (it "
                    "holds none of the versions bisect put there): bisect stopped and did not overwrite it")
            if name not in self.backed_up:
                self._backup(delta)
            entry = self.backed_up[name]
            if want not in entry["may_hold"]:
                # A subset of hunks: journaled before it is written, so a restore after a kill knows it is ours.
                self._append({"type": "may_hold", "path": name, "state": want})
                entry["may_hold"] = sorted(set(entry["may_hold"]) | {want})
            try:
                self._write(delta, version)
            except OSError as exc:
                raise SwitchFailed(f"cannot switch {name}: {_why(exc)}") from None
            self.touched.add(name)
            self.state[name] = want
            self.writes += 1

    def _write(self, delta: FileDelta, version: Version) -> None:
        path = delta.name
        if not version.present:
            os.unlink(path)
            _fsync_dir(os.path.dirname(path))
            return
        assert version.data is not None
        entry = self.backed_up[path]
        if entry["state"] != ABSENT:
            mode, owner = entry["mode"], tuple(entry["owner"])
        else:
            mode, owner = version.mode or (0o666 & ~process_umask()), None
            self._make_parents(path)
        second = max(int(time.time()), self.last_mtime.get(path, 0) + 1,
                     int(entry.get("times_ns", [0, 0])[1] // 1_000_000_000) + 1)
        self.last_mtime[path] = second
        write_atomically(path, version.data, mode, owner, (second * 1_000_000_000, second * 1_000_000_000))

    def restore(self) -> Optional[RestoreReport]:
        """Put everything back (the manifest stays locked by this process until it is removed)."""
        if self._handle is None:
            return None
        entries = _read_manifest(self.directory)
        try:
            report = _restore_locked(self.directory, entries)
        finally:
            self._handle.close()
            self._handle = None
        return report


