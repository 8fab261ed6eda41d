"""The files a process has mapped, from /proc/PID/maps: which shared objects it actually loaded.

proc(5) "/proc/pid/maps": one line per mapping, `address perms offset dev inode pathname`, the
device as hex major:minor; the pathname is empty for an anonymous mapping, bracketed for the
kernel's own ([heap], [stack], [vdso], [vvar], [anon:name]), and ends in " (deleted)" when the
file was unlinked after it was mapped (a library replaced by a rename over it: the process runs
the old one). The kernel writes a newline inside a pathname as the four characters "\\012"
(fs/proc/task_mmu.c show_map_vma -> seq_file_path(m, file, "\\n")); other bytes come as they are.

Reading another user's process needs ptrace read access (proc(5): "Permission to access this file
is governed by a ptrace access mode PTRACE_MODE_READ_FSCREDS check"): a refusal is "denied", an
exit between listing and reading "gone", and a map of a million lines is read only up to
MAX_MAPS_BYTES ("truncated"). Nothing here raises.
"""
from __future__ import annotations

import os
import re
from typing import List, NamedTuple, Optional, Set, Tuple

MAX_MAPS_BYTES = 16 << 20  # ~160,000 mappings; a CUDA inference worker has ~5,000
_READ = 1 << 20
# Mapped files that are not code anyone installed: devices (/dev/nvidia*, /dev/zero), shared memory,
# kernel interfaces, memfd and SysV segments.
NOT_FILES = ("/dev/", "/proc/", "/sys/", "/memfd:", "/SYSV", "/anon_hugepage", "/drm mm object")
DELETED = " (deleted)"


class Mapped(NamedTuple):
    path: str
    dev: str  # "major:minor" (hex, as the kernel writes it)
    inode: int
    deleted: bool
    # Some mapping of it is executable ("r-xp"): the process runs code from it (a shared object the loader
    # mapped), whatever the file holds now; a locale archive or memory-mapped weights are never mapped so.
    executable: bool = False


class Maps(NamedTuple):
    status: str  # ok | gone | denied | truncated | unreadable
    note: str
    files: List[Mapped]  # distinct file-backed mappings, in address order of their first mapping


def _decode(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


def _unescape(path: str, inode: int) -> str:
    """The pathname with the kernel's "\\012" read back as a newline, when that names the mapped file."""
    if "\\012" not in path:
        return path
    candidate = path.replace("\\012", "\n")
    try:
        if os.stat(candidate).st_ino == inode:
            return candidate
    except OSError:
        pass
    return path


# A file-backed line: address perms offset dev inode, spaces, then a pathname starting with '/'.
_FILE_LINE = re.compile(rb"^[0-9a-f]+-[0-9a-f]+ (\S+) [0-9a-f]+ ([0-9a-f]+:[0-9a-f]+) ([0-9]+) +(/[^\n]*)$", re.M)


def parse(raw: bytes) -> List[Mapped]:
    """The distinct file-backed mappings of a maps text (bytes), skipping what is not a file."""
    out: List[Mapped] = []
    seen: Set[Tuple[str, bool]] = set()
    lines = _FILE_LINE.findall(raw)
    # Which files have an executable mapping (the perms' third letter), by (dev, inode, path) as each line names it.
    executable = {(dev, inode, path) for perms, dev, inode, path in lines if perms[2:3] == b"x"}
    for dev, inode_text, raw_path in dict.fromkeys((dev, inode, path) for _, dev, inode, path in lines):
        runs_code = (dev, inode_text, raw_path) in executable
        inode = int(inode_text)
        path = _decode(raw_path)
        if inode == 0 or path.startswith(NOT_FILES):
            continue
        deleted = path.endswith(DELETED)
        if deleted:
            try:  # a file whose own name ends in " (deleted)" is not a deleted file
                deleted = os.stat(path).st_ino != inode
            except OSError:
                pass
            if deleted:
                path = path[:-len(DELETED)]
        path = _unescape(path, inode)
        # One entry per path: a file mapped twice under one name (rare: a re-mapped library) keeps its first.
        if (path, deleted) not in seen:
            seen.add((path, deleted))
            out.append(Mapped(path, _decode(dev), inode, deleted, runs_code))
    return out


class RawMaps(NamedTuple):
    status: str  # as Maps
    note: str
    raw: bytes  # the maps text read (whole lines), b"" when none
    truncated: bool


def read_raw(pid: int, limit: int = MAX_MAPS_BYTES) -> RawMaps:
    """The process's maps text, unparsed (run telemetry shares one read with live_environ); a status and a note
    instead of an exception."""
    path = f"/proc/{pid}/maps"
    chunks: List[bytes] = []
    size = 0
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except (FileNotFoundError, ProcessLookupError):
        return RawMaps("gone", "process exited", b"", False)
    except PermissionError:
        return RawMaps("denied", "not permitted to read this process's maps (another user's process): "
                                 "run envsnap as that user or as root", b"", False)
    except OSError as exc:
        return RawMaps("unreadable", f"cannot open {path}: {exc.strerror or exc}", b"", False)
    truncated = False
    try:
        while True:
            piece = os.read(fd, _READ)
            if not piece:
                break
            chunks.append(piece)
            size += len(piece)
            if size >= limit:
                truncated = True
                break
    except ProcessLookupError:
        return RawMaps("gone", "process exited while its maps were read", b"", False)
    except PermissionError:
        return RawMaps("denied", "not permitted to read this process's maps", b"", False)
    except OSError as exc:
        if exc.errno == 3:  # ESRCH
            return RawMaps("gone", "process exited while its maps were read", b"", False)
        return RawMaps("unreadable", f"cannot read {path}: {exc.strerror or exc}", b"", False)
    finally:
        os.close(fd)
    raw = b"".join(chunks)
    if truncated:
        raw = raw[:raw.rfind(b"\n") + 1]
    return RawMaps("ok", "", raw, truncated)


def read(pid: int, limit: int = MAX_MAPS_BYTES) -> Maps:
    """The process's mapped files; its status and a note instead of an exception."""
    return from_raw(read_raw(pid, limit), limit)


def from_raw(found: RawMaps, limit: int = MAX_MAPS_BYTES) -> Maps:
    """read_raw's text as Maps."""
    if found.status != "ok":
        return Maps(found.status, found.note, [])
    if not found.raw:
        # A zombie (or a kernel thread) has no memory map: nothing was loaded that we can see.
        return Maps("gone", "no memory map (the process exited and was not reaped yet, or is a kernel thread)", [])
    if found.truncated:
        return Maps("truncated", f"more than {limit >> 20} MiB of mappings: only the first were read",
                    parse(found.raw))
    return Maps("ok", "", parse(found.raw))


def executable(pid: int) -> Optional[str]:
    """The path of the process's executable (/proc/PID/exe), or None when it cannot be read."""
    try:
        target = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None
    return target[:-len(DELETED)] if target.endswith(DELETED) else target
