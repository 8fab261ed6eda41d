"""The file every trusted cache (hash, libraries, --deep probe) lives in: where, its checks, its replacement.

One file per cache, in `$XDG_CACHE_HOME/envsnap` (default `~/.cache/envsnap`). It starts with a
one-line header (format, version, owner uid, host, entry count, its sections' names, entry
counts and sizes, sha256 of the rest) and is replaced atomically (a new file renamed over the
old one, never written in place), so concurrent captures each read a whole file and the last
writer wins. A file that is damaged, truncated, of another version, owned by another user or
writable by others is refused, never trusted: its cache notes why and the next write replaces
it. At most MAX_FILES files of one kind are kept (the least recently used go first).
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import time
from typing import Any, Dict, List, Optional, Tuple

FORMAT = "envsnap-hash-cache"
VERSION = 2  # 1: one list of entries; 2: sections parsed on demand, verdicts as parallel lists
MAX_BYTES = 64 << 20  # a bigger cache file is refused unread (and never written)
MAX_FILES = 8  # cache files kept per kind (one per host and venv); the least recently used is removed
SUFFIX = ".cache"

Sections = Dict[str, Tuple[int, bytes]]  # name -> (entry count, bytes)


def hostname() -> str:
    import socket  # here: importing this module (through the collectors' declarations) stays cheap

    return socket.gethostname()


def cache_dir() -> Optional[str]:
    """`$XDG_CACHE_HOME/envsnap`, or `~/.cache/envsnap` (the XDG base directory spec: a
    relative XDG_CACHE_HOME is ignored). None when there is no home to put it in."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        home = os.path.expanduser("~")
        if not os.path.isabs(home):
            return None
        base = os.path.join(home, ".cache")
    return os.path.join(base, "envsnap")


class CacheBook:
    """What a cache of this capture says about itself in its section: its file, hits, misses, entries not kept
    because a file changed while it was read (racy), notes (the hash cache's `hash_cache`, the libraries'
    `cache`)."""

    def __init__(self, path: Optional[str], note: Optional[str]) -> None:
        self.path = path
        self.note = note
        self.hits = 0
        self.misses = 0
        self.racy = 0
        self._dirty = False  # something on disk must change (a new or stale entry, a damaged file)

    def _add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text

    def summary(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"used": self.hits > 0, "hits": self.hits, "misses": self.misses, "path": self.path}
        if self.racy:
            out["racy"] = self.racy
        if self.note:
            out["note"] = self.note
        return out

    def _must_write(self, stop_at: Optional[float]) -> bool:
        """Whether save() writes its file: not without one, not when nothing changed (the file
        is then only marked recently used, for the eviction order), not after `stop_at`
        (time.monotonic(): the capture's deadline comes before the cache)."""
        if self.path is None:
            return False
        if not self._dirty:
            try:
                os.utime(self.path)
            except OSError:
                pass
            return False
        if stop_at is not None and time.monotonic() >= stop_at:
            self._add_note("cache not updated: capture deadline reached")
            return False
        return True


class CacheRefused(Exception):
    """A cache file that exists but must not be trusted (the message says why)."""


def load(path: str) -> Tuple[Optional[Sections], Optional[str]]:
    """(the file's sections, None); (None, None) when there is no file; (None, why it is
    ignored) when it is refused or unreadable. Never raises."""
    try:
        return read_cache_file(path), None
    except FileNotFoundError:
        return None, None
    except CacheRefused as exc:
        return None, f"cache ignored ({exc})"
    except OSError as exc:
        return None, f"cache ignored (unreadable: {exc.strerror or exc})"


def read_cache_file(path: str) -> Sections:
    """The sections of a cache file ({name: (entry count, bytes)}), after every check of the
    whole file (owner, mode, size, header, checksum); raises CacheRefused or OSError."""
    # O_NOFOLLOW: a symlink planted in place of the cache is refused, not followed.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        if os.path.islink(path):
            raise CacheRefused("a symlink, not a cache file") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise CacheRefused("not a regular file")
        if hasattr(os, "geteuid") and info.st_uid != os.geteuid():
            raise CacheRefused(f"owned by uid {info.st_uid}, not this user")
        if info.st_mode & 0o022:
            raise CacheRefused(f"writable by others (mode {stat.S_IMODE(info.st_mode):o})")
        if info.st_size > MAX_BYTES:
            raise CacheRefused(f"larger than {MAX_BYTES >> 20} MiB")
        data = handle.read(MAX_BYTES + 1)
    return parse_cache(data)


def parse_cache(data: bytes) -> Sections:
    end = data.find(b"\n")
    if end < 0:
        raise CacheRefused("damaged: no header")
    try:
        header = json.loads(data[:end])
    except ValueError:
        raise CacheRefused("damaged: unreadable header") from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise CacheRefused("not an envsnap hash cache")
    if header.get("version") != VERSION:
        raise CacheRefused(f"format version {header.get('version')!r}, this envsnap reads {VERSION}")
    if hasattr(os, "geteuid") and header.get("uid") != os.geteuid():
        raise CacheRefused(f"written by uid {header.get('uid')!r}, not this user")
    if header.get("host") != hostname():
        raise CacheRefused("written on another host")
    payload = memoryview(data)[end + 1:]
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CacheRefused("damaged: checksum mismatch")
    table = header.get("sections")
    try:
        named = [(str(name), int(count), int(size)) for name, count, size in table]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        raise CacheRefused("damaged: unreadable list of sections") from None
    count = header.get("entries")
    if not isinstance(count, int) or count != sum(n for _, n, _ in named) or min((n for _, n, _ in named), default=0) < 0:
        raise CacheRefused("damaged: entry count mismatch")
    if sum(size for _, _, size in named) != len(payload) or min((s for _, _, s in named), default=0) < 0:
        raise CacheRefused("damaged: section sizes do not add up")
    sections: Sections = {}
    offset = 0
    for name, n, size in named:
        sections[name] = (n, bytes(payload[offset:offset + size]))
        offset += size
    return sections


def replace(path: str, sections: List[Tuple[str, int, bytes]], prefix: str) -> Optional[str]:
    """Write the cache file (write_cache_file), then evict the least recently used of its kind
    (files named <prefix>...); why it was not written, or None. Never raises."""
    try:
        write_cache_file(path, sections)
    except (OSError, ValueError) as exc:
        return f"cache not updated: {getattr(exc, 'strerror', None) or exc}"
    evict(os.path.dirname(path), keep=path, prefix=prefix)
    return None


def write_cache_file(path: str, sections: List[Tuple[str, int, bytes]]) -> None:
    """Replace the cache file atomically (private mode, no fsync: the checksum catches a
    file a crash left half-written). `sections`: (name, entry count, bytes), in order."""
    from envsnap.errors import EnvsnapError
    from envsnap.model.store import atomic_write_bytes

    payload = b"".join(body for _, _, body in sections)
    if len(payload) > MAX_BYTES - 4096:
        raise ValueError(f"cache would exceed {MAX_BYTES >> 20} MiB; not written")
    header = {"format": FORMAT, "version": VERSION, "uid": os.geteuid() if hasattr(os, "geteuid") else None,
              "host": hostname(), "entries": sum(n for _, n, _ in sections),
              "written_at_ns": time.time_ns(),
              "sections": [[name, n, len(body)] for name, n, body in sections],
              "sha256": hashlib.sha256(payload).hexdigest()}
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    data = json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + payload
    try:
        atomic_write_bytes(path, data, force=True, durable=False, mode=0o600)
    except EnvsnapError as exc:
        raise OSError(str(exc)) from None


def evict(directory: str, keep: str, prefix: str) -> None:
    """Keep at most MAX_FILES cache files named <prefix>...: remove the least recently used
    (written or read)."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(SUFFIX)]
    except OSError:
        return
    if len(names) <= MAX_FILES:
        return
    aged = []
    for name in names:
        full = os.path.join(directory, name)
        if full == keep:
            continue
        try:
            aged.append((os.lstat(full).st_mtime_ns, full))
        except OSError:
            continue
    aged.sort()
    for _, full in aged[:len(names) - MAX_FILES]:
        try:
            os.unlink(full)
        except OSError:
            pass
