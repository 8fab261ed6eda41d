"""Watched files (`--watch PATH`, repeatable): size and sha256 of every file under each path.

Meant for patch scripts (patch_kimik25_eagle3.py) and the files they patch. Rules:
- directories are walked recursively, `.git` is skipped (its churn says nothing), and
  every skip is recorded;
- symlinks are recorded as links with their target; a link to a file is hashed
  through, a link to a directory is not followed (that is how loops are avoided),
  and a link that loops or dangles is recorded as an error;
- FIFOs, sockets and devices are recorded by type and never opened for reading
  (a FIFO would block the capture);
- hashing streams 1 MiB chunks (bounded memory for a multi-GB file); big files are
  hashed in a pool of daemon threads while small ones are hashed inline (see
  DEFAULT_WORKERS for the measurement); it stops at the capture deadline: whatever
  was not reached is recorded as skipped, never silently left out.

Every regular file's text is kept too, under "content" (content.py: bounded, redacted; a binary
file is recorded by hash only), read after the hashing, by path, until the deadline.

The hashing helpers here are shared with the git collector (dirty and untracked files).
"""
from __future__ import annotations

import errno
import os
import stat
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.model.rules import NONE, SectionRules, rule
from envsnap.model.schema import CONTENT_SHAPE
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"entries": ("map", {"size": "num", "sha256": "str", "error": "str", "content": CONTENT_SHAPE}),
         "roots": ("list", "str"),
         "errors": "dict"}
RULES = SectionRules(category="files", component=NONE, compares="watched files", rules=(
    # --- Watched files (`--watch`): configs, launch scripts, model files ---
    rule("files.*", "files", NONE, 0.15, "a watched file changed"),
))

CHUNK = 1 << 20  # bytes per read: memory per hashing thread stays at about this
SKIP_DIRS = (".git",)
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
DEADLINE_NOTE = "not hashed: capture deadline reached"
# Hashing threads for big files: sha256 and read() release the GIL for a whole 1 MiB chunk, so
# threads hash several big files at once. Small files are hashed in the calling thread instead.
# Measured on a 16-core H200 host (warm page cache): 100k 100-byte files took 1.0 s in one
# thread but 2.8-3.8 s spread over 4-16 threads (each file is a few short syscalls and the
# threads only trade the GIL); 8 x 512 MiB took 4.0 s in one thread, 1.0 s in 4. Mixed, this
# split hashes both sets in 1.4 s (one thread for everything: 5.0 s).
DEFAULT_WORKERS = max(2, min(4, os.cpu_count() or 1))  # 2 even on one core: reads overlap
BIG_FILE = 1 << 20


def internal_deadline(ctx: CaptureContext) -> float:
    """A monotonic time a little before the capture deadline, so results get back to the runner in time."""
    left = ctx.remaining()
    margin = min(1.0, max(0.1, 0.05 * left))
    return time.monotonic() + max(0.05, left - margin)


def describe_os_error(exc: OSError) -> str:
    names = {errno.EACCES: "permission denied", errno.EPERM: "permission denied", errno.ENOENT: "does not exist",
             errno.ELOOP: "symlink loop", errno.EIO: "I/O error", errno.ENOTDIR: "not a directory"}
    found = names.get(exc.errno) if exc.errno is not None else None
    return found or exc.strerror or type(exc).__name__


def user_path(given: str, cwd: str) -> str:
    """A path as the user named it on the command line (~ expanded, relative to `cwd`), made absolute."""
    return os.path.abspath(os.path.join(cwd, os.path.expanduser(given)))


def stat_or_error(path: str, errors: Dict[str, str], follow: bool = True) -> Optional[os.stat_result]:
    """os.stat of `path` (os.lstat when not `follow`); None, with errors[path] saying why, when it fails."""
    try:
        return os.stat(path) if follow else os.lstat(path)
    except OSError as exc:
        errors[path] = describe_os_error(exc)
        return None


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    if stat.S_ISLNK(mode):
        return "link"
    return "file" if stat.S_ISREG(mode) else "other"


def hash_file(path: str, deadline: Optional[float] = None) -> Dict[str, Any]:
    """{"size", "sha256"} of a regular file (symlinks followed); {"type"} for special files; {"error"}."""
    import hashlib  # here: OpenSSL's load would otherwise be paid by every reader of the sections' SHAPE (diff)

    try:
        fd = os.open(path, _OPEN_FLAGS)  # O_NONBLOCK: a FIFO swapped in after listing can't block us
    except OSError as exc:
        return {"error": describe_os_error(exc)}
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            return {"type": _kind(st.st_mode)}
        digest = hashlib.sha256()
        done = 0
        while True:
            if deadline is not None and done and time.monotonic() > deadline:
                return {"size": st.st_size, "skipped": f"{DEADLINE_NOTE} after {done} of {st.st_size} bytes"}
            chunk = os.read(fd, CHUNK)
            if not chunk:
                break
            digest.update(chunk)
            done += len(chunk)
            # A short read that reaches the size fstat gave is the end: saves a read() per small file.
            if len(chunk) < CHUNK and done >= st.st_size:
                break
        return {"size": done, "sha256": digest.hexdigest()}
    except OSError as exc:
        return {"error": describe_os_error(exc)}
    finally:
        os.close(fd)


def path_entry(path: str, deadline: Optional[float] = None, st: Optional[os.stat_result] = None) -> Dict[str, Any]:
    """What one path is, without following a link blindly: file hash, link + target, special type, or error."""
    try:
        st = st or os.lstat(path)
    except OSError as exc:
        return {"error": describe_os_error(exc)}
    if stat.S_ISREG(st.st_mode):
        return hash_file(path, deadline)
    if not stat.S_ISLNK(st.st_mode):
        return {"type": _kind(st.st_mode)}
    entry = link_entry(path)
    if entry.get("type") == "file":
        del entry["type"]
        entry.update(hash_file(path, deadline))
    return entry


def link_entry(path: str) -> Dict[str, Any]:
    """A symlink as data: its target text, what it points at, and whether following it would loop."""
    try:
        entry: Dict[str, Any] = {"link": os.readlink(path)}
    except OSError as exc:
        return {"error": describe_os_error(exc)}
    try:
        target = os.stat(path)
    except OSError as exc:
        entry["error"] = "dangling link" if exc.errno == errno.ENOENT else describe_os_error(exc)
        return entry
    entry["type"] = _kind(target.st_mode)
    if entry["type"] == "dir":
        # Directory links are not followed (that is what keeps a walk finite); say whether it would loop.
        entry["followed"] = False
        real = os.path.realpath(path)
        parent = os.path.realpath(os.path.dirname(path))
        if parent == real or parent.startswith(real.rstrip(os.sep) + os.sep):
            entry["loop"] = True
    return entry


def parallel_map(func: Callable[[Any], Any], items: Sequence[Any], deadline: float,
                 workers: Optional[int] = None, batch: int = 32) -> Tuple[List[Any], List[int]]:
    """Apply func to every item in daemon threads; return (results, indices not finished by deadline).

    Daemon threads, not concurrent.futures: its workers are joined at interpreter exit,
    so one read stuck on a dead NFS mount would hold the whole process after the capture.
    Items are handed out in batches: with many small files the threads otherwise spend
    their time handing the GIL to each other.
    """
    results: List[Any] = [None] * len(items)
    done = [False] * len(items)
    if not items:
        return results, []
    count = workers or DEFAULT_WORKERS
    count = max(1, min(count, (len(items) + batch - 1) // batch))
    lock = threading.Lock()
    position = [0]

    def worker() -> None:
        while True:
            with lock:
                start = position[0]
                position[0] += batch
            if start >= len(items):
                return
            for index in range(start, min(start + batch, len(items))):
                if time.monotonic() > deadline:
                    return
                try:
                    results[index] = func(items[index])
                except Exception as exc:  # one bad item must not lose the others
                    results[index] = {"error": f"{type(exc).__name__}: {exc}"}
                done[index] = True

    threads = [threading.Thread(target=worker, name="envsnap-hash", daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()) + 0.05)
    return results, [i for i, finished in enumerate(done) if not finished]


def map_by_size(func: Callable[[Any], Any], items: Sequence[Any], sizes: Sequence[Optional[int]],
                deadline: float) -> Tuple[List[Any], List[int]]:
    """parallel_map for hashing: big (or unknown-size) items in the thread pool, small ones inline, at once."""
    big = [i for i, size in enumerate(sizes) if size is None or size >= BIG_FILE]
    small = [i for i, size in enumerate(sizes) if size is not None and size < BIG_FILE]
    results: List[Any] = [None] * len(items)
    missed: List[int] = []
    box: Dict[str, Any] = {}
    # batch=1: big files are few, and each must get its own thread.
    pool = threading.Thread(target=lambda: box.update(out=parallel_map(func, [items[i] for i in big], deadline, batch=1)),
                            name="envsnap-hash-big", daemon=True)
    pool.start()
    for position, index in enumerate(small):
        if time.monotonic() > deadline:
            missed.extend(small[position:])
            break
        try:
            results[index] = func(items[index])
        except Exception as exc:  # one bad item must not lose the others
            results[index] = {"error": f"{type(exc).__name__}: {exc}"}
    pool.join(max(0.0, deadline - time.monotonic()) + 0.1)
    big_results, big_missed = box.get("out", ([None] * len(big), list(range(len(big)))))
    for position, index in enumerate(big):
        results[index] = big_results[position]
    missed.extend(big[position] for position in big_missed)
    return results, sorted(missed)


def _walk(root: str, deadline: float, entries: Dict[str, Any], to_hash: List[Tuple[str, Any, Optional[int]]],
          errors: Dict[str, str], skipped: Dict[str, str]) -> None:
    """List everything under a directory (no link followed); regular files go to `to_hash`."""
    stack = [root]
    while stack:
        directory = stack.pop()
        if time.monotonic() > deadline:
            errors[directory] = "not walked: capture deadline reached"
            for rest in stack:
                errors[rest] = "not walked: capture deadline reached"
            return
        try:
            with os.scandir(directory) as it:
                listing = list(it)
        except OSError as exc:
            errors[directory] = f"cannot list: {describe_os_error(exc)}"
            continue
        for item in listing:
            path = item.path
            try:
                if item.is_symlink():
                    entry = link_entry(path)
                    if entry.get("type") == "file":
                        to_hash.append((path, None, None))  # hashed through the link, with the rest
                    else:
                        entries[path] = entry
                    continue
                if item.is_dir(follow_symlinks=False):
                    if item.name in SKIP_DIRS:
                        skipped[path] = "git metadata"
                    else:
                        stack.append(path)
                    continue
                if item.name in SKIP_DIRS:  # a `.git` file: submodule/worktree pointer
                    skipped[path] = "git metadata"
                    continue
                if item.is_file(follow_symlinks=False):
                    # Known regular from d_type; the size decides inline vs thread pool.
                    to_hash.append((path, "file", item.stat(follow_symlinks=False).st_size))
                    continue
                entries[path] = path_entry(path, None)  # fifo, socket, device: recorded by type
            except OSError as exc:
                entries[path] = {"error": describe_os_error(exc)}


def collect(ctx: CaptureContext) -> Section:
    if not ctx.watch:
        return unavailable("no --watch paths given")
    deadline = internal_deadline(ctx)
    roots = sorted({user_path(p, ctx.cwd) for p in ctx.watch})
    entries: Dict[str, Any] = {}
    errors: Dict[str, str] = {}
    skipped: Dict[str, str] = {}
    to_hash: List[Tuple[str, Any, Optional[int]]] = []
    for root in roots:
        st = stat_or_error(root, errors, follow=False)
        if st is None:
            continue
        if stat.S_ISDIR(st.st_mode):
            _walk(root, deadline, entries, to_hash, errors, skipped)
        elif stat.S_ISLNK(st.st_mode) and os.path.isdir(root):
            # A root the user named through a link: record the link and walk where it points.
            entries[root] = dict(link_entry(root), followed=True)
            _walk(root, deadline, entries, to_hash, errors, skipped)
        elif stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
            to_hash.append((root, st, st.st_size if stat.S_ISREG(st.st_mode) else None))
        else:
            entries[root] = {"type": _kind(st.st_mode)}
    # Overlapping roots list some paths twice: hash each once.
    unique = sorted({job[0]: job for job in to_hash}.values(), key=lambda job: job[0])

    def entry_of(job: Tuple[str, Any, Optional[int]]) -> Dict[str, Any]:
        path, known, _ = job
        return hash_file(path, deadline) if known == "file" else path_entry(path, deadline, known)

    results, missed = map_by_size(entry_of, unique, [job[2] for job in unique], deadline)
    for job, result in zip(unique, results):
        if result is not None:
            entries[job[0]] = result
    for index in missed:
        entries[unique[index][0]] = {"skipped": DEADLINE_NOTE}
    from envsnap.capture.collectors import (
        content,  # content imports this module's helpers
    )

    budget = content.Budget.of(ctx)
    for path in sorted(entries):
        entry = entries[path]
        if "sha256" in entry:
            entry["content"] = content.read_file(path, budget, known=entry, deadline=deadline)
    data = _summarise_data(roots, entries, errors, skipped)
    if not entries and errors:
        return failed(f"nothing readable under {', '.join(roots)}", data)
    return ok(data)


def _summarise_data(roots: List[str], entries: Dict[str, Any], errors: Dict[str, str],
                    skipped: Dict[str, str]) -> Dict[str, Any]:
    hashed = [e for e in entries.values() if "sha256" in e]
    data: Dict[str, Any] = {
        "roots": roots,
        "entries": dict(sorted(entries.items())),
        "errors": dict(sorted(errors.items())),
        "skipped": dict(sorted(skipped.items())),
        "count": len(entries),
        "hashed": len(hashed),
        "total_bytes": sum(e.get("size", 0) for e in hashed),
        "links": sum(1 for e in entries.values() if "link" in e),
        "problems": sum(1 for e in entries.values() if "error" in e or "skipped" in e),
    }
    return data


def _human(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


def summarize(data: Dict[str, Any]) -> List[str]:
    roots = data.get("roots", [])
    head = (f"{len(roots)} root{'s' if len(roots) != 1 else ''}: {data.get('hashed', 0)} files hashed "
            f"({_human(data.get('total_bytes', 0))}), {data.get('links', 0)} links, "
            f"{data.get('problems', 0) + len(data.get('errors', {}))} problems")
    lines = [head]
    lines += [f"root {r}" for r in roots]
    for path, entry in data.get("entries", {}).items():
        problem = entry.get("error") or entry.get("skipped")
        if problem:
            lines.append(f"{path}: {problem}")
    lines += [f"{path}: {error}" for path, error in data.get("errors", {}).items()]
    return lines
