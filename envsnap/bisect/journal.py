"""Bisect's journal: every run appended (flush + fsync) to a JSONL file as it finishes.

Restarted with the same journal (same deltas and command, checked), bisect replays the journaled
runs instead of repeating them; a truncated last line (a kill mid-write) is dropped, damaged lines
are re-run. A journal of a different bisect is refused, naming the way out (--journal NEW, or
removing it) — unless it holds no completed configuration (a first attempt whose benchmark never
produced the metric): nothing in it is worth keeping, so it is replaced, and `replaced` says why.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
from typing import Any, BinaryIO, Dict, List, Optional, Tuple

from envsnap.errors import EnvsnapError

JOURNAL_VERSION = 1


class JournalWriteFailed(EnvsnapError):
    """A line of the journal could not be written (a full disk): it was cut off again."""


# ---------------------------------------------------------------------------------------
# Journal
# ---------------------------------------------------------------------------------------

def default_journal_path(bad_path: str) -> str:
    """`<BAD without .json>.bisect.jsonl` next to BAD; in the current directory when that is not writable."""
    base = os.path.basename(bad_path)
    stem = base[:-5] if base.endswith(".json") else base
    name = f"{stem}.bisect.jsonl"
    directory = os.path.dirname(os.path.abspath(bad_path))
    if os.access(directory, os.W_OK):
        return os.path.join(directory, name)
    return os.path.join(os.getcwd(), name)


def _sha(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogateescape")).hexdigest()


# Header lines are written with sorted keys, so a header cut short still starts like this.
_HEADER_START = b'{"bad_file": '


def _usable_run(entry: object) -> bool:
    """A journaled run the bisector can replay: anything else (a hand-edited or damaged line)
    is a run to repeat, like a cut one."""
    if not isinstance(entry, dict) or entry.get("type") != "run":
        return False
    config, metrics = entry.get("config"), entry.get("metrics", {})
    if not isinstance(config, list) or not all(isinstance(k, str) for k in config):
        return False
    if not isinstance(entry.get("ok"), bool) or not isinstance(metrics, dict):
        return False
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in metrics.values())


def _completed_configurations(header: Dict[str, Any], data: bytes) -> int:
    """Configurations of a journal with --repeat successful runs (1 for a header without repeat)."""
    repeat: int = header["repeat"] if isinstance(header.get("repeat"), int) and header["repeat"] > 0 else 1
    ok: Dict[Tuple[Any, ...], int] = {}
    for line in data.decode("utf-8", "replace").splitlines()[1:]:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if _usable_run(entry) and entry["ok"]:
            key = tuple(sorted(entry["config"]))
            ok[key] = ok.get(key, 0) + 1
    return sum(1 for n in ok.values() if n >= repeat)


class Journal:
    """Append-only JSONL: a header line, then one line per finished run."""

    def __init__(self, path: str, header: Dict[str, Any]):
        self.path = os.path.abspath(path)
        self.header = header
        self.runs: List[Dict[str, Any]] = []
        self.dropped_partial = False
        self.replaced: str = ""  # why an earlier bisect's journal was replaced
        self._handle: Optional[BinaryIO] = None

    def open(self) -> "Journal":
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise EnvsnapError(f"journal directory {directory} does not exist")
        if os.path.isdir(self.path):
            raise EnvsnapError(f"journal {self.path} is a directory")
        try:
            # Unbuffered: a write that fails (a full disk) fails in _write, not again when the file is closed.
            handle = open(self.path, "a+b", buffering=0)
        except OSError as exc:
            raise EnvsnapError(f"cannot open journal {self.path}: {exc.strerror or exc}") from None
        lock_or_refuse(handle, f"journal {self.path} is in use by another envsnap bisect",
                       f"cannot lock journal {self.path}")
        self._handle = handle
        handle.seek(0)
        data = handle.read()
        complete_end = data.rfind(b"\n") + 1
        # Check the file is ours before changing a byte of it (a mistyped --journal).
        if complete_end == 0:
            if data.strip() and not data.startswith(_HEADER_START):
                self.close()
                raise EnvsnapError(f"{self.path} is not an envsnap bisect journal (first line is not its header)")
        else:
            try:
                header = json.loads(data[:data.index(b"\n")].decode("utf-8", "replace"))
            except ValueError:
                header = None
            if not isinstance(header, dict) or header.get("type") != "header":
                self.close()
                raise EnvsnapError(f"{self.path} is not an envsnap bisect journal (first line is not its header)")
            mismatch = self._mismatch(header)
            if mismatch and _completed_configurations(header, data[:complete_end]):
                self.close()
                raise EnvsnapError(f"journal {self.path} belongs to a different bisect: {mismatch}; pass "
                                   f"--journal NEW_FILE to keep it, or remove {self.path}")
            if mismatch:
                self.replaced = mismatch
                handle.truncate(0)
                data, complete_end = b"", 0
        if complete_end < len(data):
            # A run killed mid-write leaves a partial last line: drop it, keep the rest.
            self.dropped_partial = complete_end > 0
            handle.truncate(complete_end)
            data = data[:complete_end]
        lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
        if not lines:
            self._write(dict(self.header, type="header"))
            return self
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a damaged line is a run to repeat, not a reason to stop
            if _usable_run(entry):
                self.runs.append(entry)
        return self

    def _mismatch(self, found: Dict[str, Any]) -> str:
        """What makes the journal on disk belong to another bisect ("" when it is this one's)."""
        if found.get("version") != JOURNAL_VERSION:
            return f"it has version {found.get('version')!r} (this envsnap writes {JOURNAL_VERSION})"
        checks = [("deltas_sha256", "the GOOD/BAD differences are not the same"),
                  ("command_sha256", "the command is not the same"), ("metric", "the --metric is not the same")]
        for key, what in checks:
            if found.get(key) != self.header.get(key):
                detail = ""
                if key == "command_sha256":
                    detail = f" (journal: {' '.join(map(str, found.get('command') or []))})"
                elif key == "deltas_sha256":
                    detail = f" (journal: {found.get('good_file')} vs {found.get('bad_file')})"
                elif key == "metric":
                    detail = f" (journal: {found.get('metric') or 'default'!r})"
                return what + detail
        return ""

    def _write(self, entry: Dict[str, Any]) -> None:
        """One line, fsynced; one that cannot be written whole (a full disk) is cut off again, and the
        bisect stops with one line saying so."""
        assert self._handle is not None
        line = (json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8", "replace")
        try:
            append_whole_line(self._handle.fileno(), line)
        except OSError as exc:
            raise JournalWriteFailed(f"cannot write the journal {self.path}: {exc.strerror or exc}") from None

    def append_run(self, entry: Dict[str, Any]) -> None:
        self._write(dict(entry, type="run"))

    def close(self) -> None:
        if self._handle is not None:
            try:
                self._handle.close()
            finally:
                self._handle = None


def append_whole_line(fd: int, line: bytes) -> None:
    """Append LINE to the file open at FD and fsync it; when it cannot be written whole (a full disk), cut the
    file back to what it was, so a later line is never glued to a partial one, and raise the OSError. A cut that
    fails too leaves a partial last line, which the readers skip."""
    size = os.fstat(fd).st_size
    try:
        view = memoryview(line)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except OSError:
        try:
            os.ftruncate(fd, size)
        except OSError:
            pass
        raise


def lock_or_refuse(handle: Any, in_use: str, failed: str) -> None:
    """Take an exclusive lock on an open file without waiting (one bisect per journal or files
    directory); another holder: EnvsnapError(in_use). The handle is closed when it fails."""
    try:
        import fcntl

        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except ImportError:  # pragma: no cover - not POSIX
        pass
    except OSError as exc:
        handle.close()
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            raise EnvsnapError(in_use) from None
        raise EnvsnapError(f"{failed}: {exc.strerror or exc}") from None
