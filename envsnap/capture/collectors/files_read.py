"""Files the measured processes read: each one's identity and content hash, and who read it.

A settings, tuning or cache file changes speed without a line of code or a variable changing: SGLang's
per-GPU fused-MoE kernel configs (JSON), NCCL's config files (NCCL_CONF_FILE, ~/.nccl.conf, /etc/nccl.conf),
autotune and JIT caches, a model's config.json. Which files a process read is seen two ways:

  python  the probe's audit hook (envsnap/probe/runtime.py, PEP 578 event "open"): every read-only open by
          the process's Python code, each path once, bounded by the probe (MAX_OPENED, the rest counted);
  fd      /proc/PID/fd: the files a process holds open, read-only, when sampled (during `envsnap run`'s
          runs, measure/maps_sampling.py; at capture for the processes given with --pid): native
          code's opens too, but only those still open when a sample came.

Left out, and counted in "skipped" by reason: what another section already covers (installed files under
the process's site directories: the packages section's integrity check against RECORD; the interpreter's
standard library; files in a git checkout: the git section), the kernel's views and devices (/proc, /sys,
/dev), anything not a regular file (sockets, pipes, FIFOs: never opened), and what is over the caps
(MAX_FILES files, MAX_BYTES bytes hashed in all). Hashes go through the hash cache (capture/hashcache.py):
an unchanged file is not read again. Paths are redacted like every other path (envsnap/redact.py).

The section is built after `envsnap run`'s runs (collect_after_runs), from the probe section's records and
the runs' samples; a plain capture has only the --pid processes' open files.
"""
from __future__ import annotations

import os
import stat
import time
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set

from envsnap.capture import procfs
from envsnap.capture.base import CaptureContext, ok, unavailable
from envsnap.model.rules import NONE, SectionRules, rule, volatile
from envsnap.model.types import Section

SHAPE = {
    "files": ("map", {"size": "num", "sha256": "str", "error": "str", "read_by": ("list", "str"),
                      "seen_by": ("list", "str")}),
    "skipped": ("map", "num"),
    "limits": {"files": "num", "bytes": "num"},
    "dropped_by_probe": "num",
}
RULES = SectionRules(category="files", component=NONE, compares="files the measured processes read", rules=(
    volatile("files_read.skipped*", "how many opens another section covers: bookkeeping"),
    volatile("files_read.limits*", "the caps of this envsnap"),
    volatile("files_read.dropped_by_probe", "bookkeeping of the probe's cap"),
    # Whether reads were recorded at all: `run` always records them, a plain capture only for --pid
    # processes. Says how the snapshots were taken, not what the processes ran with.
    rule("files_read.status", "files", NONE, 0.02, "file reads recorded on one side only"),
    # A file a measured process opened and read: a settings, tuning or cache file (SGLang's fused-MoE
    # configs, NCCL's nccl.conf, an autotune cache) acts on the code that read it, whatever its name -- or it
    # is the benchmark's own input that differs on purpose (a port list, a prompt set), which envsnap cannot
    # tell apart. The prior of a changed file (files.py's watched files: 0.15); that a measured process was
    # seen reading it ("read_by" in the value) is reach, the ranking's to weigh, as it weighs a variable read
    # (analysis/rank/observed.py, read_by_process) -- not a prior of its own.
    rule("files_read.*", "files", NONE, 0.15, "a file a measured process read changed"),
))

MAX_FILES = 256
MAX_BYTES = 256 * 1024 * 1024
KERNEL_PREFIXES = ("/proc/", "/sys/", "/dev/")
HOW = ("python", "fd")

SKIP_INSTALLED = "installed (the packages section's integrity check)"
SKIP_STDLIB = "the interpreter's standard library"
SKIP_GIT = "in a git checkout (the git section)"
SKIP_KERNEL = "/proc, /sys, /dev"
SKIP_CODE = "Python code (the probe's module list)"
SKIP_ENVSNAP = "envsnap's own (the observation of `envsnap run`)"
CODE_SUFFIXES = (".py", ".pyc")
SKIP_SPECIAL = "not a regular file"
SKIP_GONE = "gone by the time it was hashed"
SKIP_FILES = f"over the cap of {MAX_FILES} files"
SKIP_BYTES = f"over the cap of {MAX_BYTES >> 20} MiB hashed"
SKIP_DEADLINE = "not hashed: capture deadline reached"


class Reads:
    """Who read which path, gathered from the sources before anything is hashed."""

    def __init__(self) -> None:
        self.readers: Dict[str, Set[str]] = {}
        self.how: Dict[str, Set[str]] = {}
        self.covered: List[str] = []  # site and stdlib directories of the readers
        self.stdlib: List[str] = []
        self.dropped = 0
        self.own: List[str] = []  # envsnap's own directories (the run's private site and probe directories)

    def add(self, path: str, reader: str, how: str) -> None:
        if not isinstance(path, str) or not path.startswith("/"):
            return
        self.readers.setdefault(path, set()).add(reader)
        self.how.setdefault(path, set()).add(how)


def from_probe(reads: Reads, probe: Mapping[str, Any]) -> None:
    """The opens in the probe section's records: the server's under their keys, the run command's under
    "command/<process>" (every run's, the run taken off)."""
    tables = (("records", ""), ("command_records", "command/"))
    for table, prefix in tables:
        entries = probe.get(table)
        if not isinstance(entries, dict):
            continue
        for key, record in entries.items():
            if not isinstance(record, dict):
                continue
            name = prefix + (str(key).partition("/")[2] if prefix else str(key))
            for directory in record.get("site_dirs") or []:
                if isinstance(directory, str):
                    reads.covered.append(directory)
            if isinstance(record.get("stdlib_dir"), str):
                reads.stdlib.append(record["stdlib_dir"])
            for path in record.get("files_opened") or ():
                reads.add(path, name, "python")
            dropped = record.get("files_opened_dropped")
            if type(dropped) is int and dropped > 0:
                reads.dropped += dropped


def from_samples(reads: Reads, runs: Sequence[Mapping[str, Mapping[str, Any]]]) -> None:
    """The files the run command's processes held open when sampled (maps_sampling's "opened")."""
    for run in runs:
        for key, entry in run.items():
            for path in entry.get("opened") or ():
                reads.add(path, f"command/{key}", "fd")


def open_for_reading(pid: int, limit: int = 4096) -> List[str]:
    """Paths of the regular files a live process holds open read-only (/proc/PID/fd and fdinfo's flags);
    [] when it cannot be read (gone, another user's)."""
    out: List[str] = []
    directory = f"/proc/{pid}/fd"
    try:
        fds = os.listdir(directory)
    except OSError:
        return out
    for fd in fds[:limit]:
        target = read_only_file(pid, fd)
        if target is not None:
            out.append(target)
    return out


def read_only_file(pid: int, fd: str) -> Optional[str]:
    """The path of the regular file descriptor `fd` of `pid` holds open read-only, else None: a socket, pipe or
    anon_inode, the kernel's files, a file since removed, one opened for writing, or a descriptor since closed."""
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    if not target.startswith("/") or target.startswith(KERNEL_PREFIXES) or target.endswith(" (deleted)"):
        return None
    return target if read_only(pid, fd) else None


def read_only(pid: int, fd: str) -> bool:
    """Whether descriptor `fd` of `pid` was opened read-only (proc(5): fdinfo's "flags:", octal)."""
    try:
        for line in procfs.read_file(f"/proc/{pid}/fdinfo/{fd}", 4096).splitlines():
            if line.startswith(b"flags:"):
                return int(line.split()[1], 8) & os.O_ACCMODE == os.O_RDONLY
    except (OSError, ValueError, IndexError):
        pass
    return False


def _process_name(pid: int) -> str:
    from envsnap.capture.collectors import roles

    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = [a.decode("utf-8", "surrogateescape") for a in handle.read().split(b"\0") if a]
    except OSError:
        return "process"
    role = roles.parse_role(argv) if argv else None
    if role is not None and isinstance(role.get("key"), str):
        return str(role["key"])
    return roles.safe_name(os.path.basename(argv[0])) if argv else "process"


def from_pids(reads: Reads, pids: Iterable[int]) -> None:
    """The files the given processes and their descendants hold open now."""
    import psutil

    seen: Set[int] = set()
    for pid in pids:
        try:
            family = [pid] + [child.pid for child in psutil.Process(pid).children(recursive=True)]
        except Exception:
            family = [pid]
        for member in family:
            if member in seen:
                continue
            seen.add(member)
            name = _process_name(member)
            for path in open_for_reading(member):
                reads.add(path, name, "fd")


def _under(path: str, directories: Iterable[str]) -> bool:
    return any(d and (path == d or path.startswith(d.rstrip(os.sep) + os.sep)) for d in directories)


class _GitRoots:
    """Whether a path lies in a git work tree (a `.git` in it or a directory above), cached per directory."""

    def __init__(self) -> None:
        self.known: Dict[str, bool] = {}

    def inside(self, path: str) -> bool:
        directory = os.path.dirname(path)
        walked: List[str] = []
        found = False
        while True:
            cached = self.known.get(directory)
            if cached is not None:
                found = cached
                break
            walked.append(directory)
            if os.path.exists(os.path.join(directory, ".git")):
                found = True
                break
            parent = os.path.dirname(directory)
            if parent == directory:
                break
            directory = parent
        for each in walked:
            self.known[each] = found
        return found


def _skip_reason(path: str, reads: Reads, git: _GitRoots) -> Optional[str]:
    if path.startswith(KERNEL_PREFIXES):
        return SKIP_KERNEL
    if _under(path, reads.own):
        return SKIP_ENVSNAP
    if path.endswith(CODE_SUFFIXES):
        return SKIP_CODE
    if _under(path, reads.covered):
        return SKIP_INSTALLED
    if _under(path, reads.stdlib):
        return SKIP_STDLIB
    if git.inside(path):
        return SKIP_GIT
    return None


def hash_reads(reads: Reads, stop_at: Optional[float], no_cache: bool = False, max_files: int = MAX_FILES,
               max_bytes: int = MAX_BYTES) -> Dict[str, Any]:
    """The section's data: each kept path's hash (through the hash cache), readers and sources, and what was
    skipped and why. Paths are visited in sorted order, so the caps keep the same files every time."""
    from envsnap.capture import hashcache
    from envsnap.capture.collectors import file_hashing
    from envsnap.redact import redact_text

    skipped: Dict[str, int] = {}
    files: Dict[str, Dict[str, Any]] = {}
    git = _GitRoots()
    cache = hashcache.HashCache(None, {}) if no_cache else hashcache.HashCache.open(["envsnap-files-read"])
    hashed_bytes = 0

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for path in sorted(reads.readers):
        if stop_at is not None and time.monotonic() >= stop_at:
            skip(SKIP_DEADLINE)
            continue
        reason = _skip_reason(path, reads, git)
        if reason is not None:
            skip(reason)
            continue
        try:
            st = os.stat(path)
        except OSError:
            skip(SKIP_GONE)
            continue
        if not stat.S_ISREG(st.st_mode):
            skip(SKIP_SPECIAL)
            continue
        if len(files) >= max_files:
            skip(SKIP_FILES)
            continue
        if hashed_bytes + st.st_size > max_bytes:
            skip(SKIP_BYTES)
            continue
        entry: Dict[str, Any] = {}
        found = cache.lookup(path, ["sha256"])
        if found is None:
            before: List[os.stat_result] = []  # the stat taken before reading: what the cache may keep
            status, info = file_hashing.hash_file(path, ["sha256"], stop_at, before)
            if status == "ok":
                found = info
                if before and info[1] == before[0].st_size:
                    cache.pending.append((path, before[0], info[0]))
            elif status == "missing":
                skip(SKIP_GONE)
                continue
            elif status == "not_checked":
                skip(SKIP_DEADLINE)
                continue
            else:
                entry["error"] = str(info or status)
        if found is not None:
            digests, size = found
            entry.update(sha256=digests["sha256"].hex(), size=size)
            hashed_bytes += size
        entry["read_by"] = sorted(reads.readers[path])
        entry["seen_by"] = [how for how in HOW if how in reads.how[path]]
        files[redact_text(path)] = entry
    cache.record_many()
    cache.save(stop_at)
    data: Dict[str, Any] = {"files": files, "skipped": dict(sorted(skipped.items())),
                            "limits": {"files": max_files, "bytes": max_bytes}}
    if reads.dropped:
        data["dropped_by_probe"] = reads.dropped
    return data


def collect(ctx: CaptureContext) -> Section:
    """At capture: the files the --pid processes (and their children) hold open for reading."""
    if not ctx.pids:
        return unavailable("no measured process at capture (give --pid, or measure with `envsnap run`)")
    reads = Reads()
    from_pids(reads, ctx.pids)
    return ok(hash_reads(reads, ctx.deadline or None, ctx.no_cache))


def collect_after_runs(ctx: CaptureContext, probe: Mapping[str, Any],
                       sampled: Sequence[Mapping[str, Mapping[str, Any]]], own: Sequence[str] = ()) -> Section:
    """After `envsnap run`'s runs: what the probe's records say their processes opened, what the runs'
    samples saw held open, and the --pid processes' open files now. `own`: envsnap's own
    directories (the run's observation), whose files are not the program's."""
    reads = Reads()
    reads.own = list(own)
    from_probe(reads, probe)
    from_samples(reads, sampled)
    if ctx.pids:
        from_pids(reads, ctx.pids)
    # Always "ok", with no file at all too: whether a sample caught a file held open is timing, and a
    # section "ok" on one side and "unavailable" on the other would be a difference of its own.
    return ok(hash_reads(reads, ctx.deadline or None, ctx.no_cache))


def summarize(data: Dict[str, Any]) -> List[str]:
    files = data.get("files") or {}
    skipped = data.get("skipped") or {}
    head = f"{len(files)} file{'s' if len(files) != 1 else ''} read by the measured processes"
    if skipped:
        head += "; skipped: " + ", ".join(f"{count} {reason}" for reason, count in sorted(skipped.items()))
    lines = [head]
    for path, entry in sorted(files.items()):
        readers = ", ".join(entry.get("read_by") or [])
        what = entry.get("sha256", "")[:12] or entry.get("error", "?")
        lines.append(f"  {path}: {what} ({entry.get('size', '?')} bytes), read by {readers}")
    return lines

