"""A cache of file hashes that can be trusted, so a capture of an unchanged venv reads no file twice.

The rule is git's index (git/Documentation/technical/racy-git.txt, read-cache.c
`ie_match_stat` and `is_racy_timestamp`): a file's hash is reused only when its device,
inode, size, mtime_ns and ctime_ns all equal what they were when it was hashed. `touch -r`
and `os.utime` can put an mtime back, but nothing short of changing the system clock sets
ctime back: every write, truncate, rename-over or chmod moves it. What stat cannot show is
an edit within one timestamp granule of the state that was hashed (the kernel stamps
files from a clock that ticks every few ms; ext3, HFS+ and some NFS servers keep whole
seconds, FAT two): such an entry is "racy". Like git, it is never trusted: a file whose
mtime or ctime is not older than the moment its stat was taken by more than
RACY_WINDOW_NS is hashed again at the next capture instead of being recorded.

A second kind of entry saves the rest of the work for a distribution that was found intact:
its RECORD's sha256, what the RECORD says by itself (files listed without a hash, lines with
an unreadable hash), and the stat of every file it lists as it was when those files' digests
were taken and found equal to RECORD's. When the RECORD text and every one of those stats are
unchanged, the findings are the same without parsing or hashing anything; when anything
differs the distribution is checked file by file (the file entries still apply). Its stats
are its own, not the file entries' (a --deep capture may renew a file entry after an edit
that this entry must then not vouch for), and it is recorded only from non-racy file entries.

The file lives in `$XDG_CACHE_HOME/envsnap` (default `~/.cache/envsnap`), one per host and
set of installation directories (a venv), and is bounded: at most MAX_ENTRIES entries and
MAX_BYTES per file, at most MAX_FILES files (the least recently used go first). It starts
with a one-line header (format, version, owner uid, host, entry count, sha256 of the rest)
and is replaced atomically (a new file renamed over the old one, never written in place),
so concurrent captures each read a whole file and the last writer wins. A file that is
damaged, truncated, of another version, owned by another user or writable by others is
ignored with a note, never trusted, and replaced by the next write. Only this module
reads or writes it; the capture reports hits, misses and any note (`hash_cache`), and
what it reports about the files never depends on the cache.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import threading
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

FORMAT = "envsnap-hash-cache"
VERSION = 1
MAX_ENTRIES = 200_000  # a deep SGLang venv holds ~38,000 installed files; a file is ~150 bytes each
MAX_BYTES = 64 << 20  # a bigger cache file is refused unread (and never written)
MAX_FILES = 8  # cache files kept (one per host and venv); the least recently used is removed
# Margin between a file's mtime/ctime and the moment its stat was taken below which an
# entry is racy (see above): covers the kernel's coarse clock (<= 10 ms), whole-second
# and FAT's 2 s timestamps, and a clock skew of about a second to a network filesystem.
RACY_WINDOW_NS = 3_000_000_000
_PREFIX = "hashes-"
_SUFFIX = ".cache"


def _hostname() -> str:
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


def stat_key(st: os.stat_result) -> str:
    """The identity of a file's state, as stored (a trailing space ends it)."""
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "


class HashCache:
    """One cache file's entries for one capture: look up, record, save once at the end.

    Entries map an absolute path to `"<dev> <ino> <size> <mtime_ns> <ctime_ns> <alg>:<hex>..."`,
    and `"<dist>\\0<location>\\0<mode>"` to a verdict: `"<RECORD sha256> <entries> <unhashable>"`,
    the RECORD's own findings (JSON), then path and stat of each file, all NUL-separated.
    `lookup` and `record` may be called from several hashing threads at once.
    """

    def __init__(self, path: Optional[str], entries: Dict[str, str], note: Optional[str] = None,
                 rewrite: bool = False) -> None:
        self.path = path
        self.note = note
        self._entries = entries
        self._fresh: Dict[str, str] = {}  # this capture's entries: hits kept, new hashes recorded
        self._stale: Set[str] = set()  # entries this capture found out of date: not carried over
        self._dirty = rewrite  # something on disk must change (a stale entry, a damaged file)
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.racy = 0
        # Every stat used for a new entry is taken after this instant (racy rule).
        self.started_ns = time.time_ns()

    @classmethod
    def open(cls, scope: Iterable[str]) -> HashCache:
        """The cache file for this host and these directories; never raises: whatever is
        wrong with it becomes the note and an empty cache."""
        directory = cache_dir()
        if directory is None:
            return cls(None, {}, "no cache directory (no home directory and no XDG_CACHE_HOME)")
        name = hashlib.sha256("\0".join([_hostname(), *sorted(set(scope))])
                              .encode("utf-8", "surrogateescape")).hexdigest()[:20]
        path = os.path.join(directory, f"{_PREFIX}{name}{_SUFFIX}")
        try:
            entries = read_cache_file(path)
        except FileNotFoundError:
            return cls(path, {}, "cache empty: first capture of this environment with the cache")
        except CacheRefused as exc:
            return cls(path, {}, f"cache ignored ({exc}): every file hashed", rewrite=True)
        except OSError as exc:
            return cls(path, {}, f"cache ignored (unreadable: {exc.strerror or exc}): every file hashed",
                       rewrite=True)
        return cls(path, entries)

    def lookup(self, path: str, algorithms: List[str]) -> Optional[Tuple[Dict[str, bytes], int]]:
        """(digests, size) from the cache when the file's stat is exactly the state they were
        taken from; None otherwise (no entry, file changed, gone or unreadable)."""
        value = self._entries.get(path)
        if value is None:
            return None
        try:
            st = os.stat(path)
        except OSError:
            self.forget(path)
            return None
        key = f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "
        if not value.startswith(key):
            self.forget(path)
            return None
        digests: Dict[str, bytes] = {}
        try:
            for part in value[len(key):].split(" "):
                name, _, hexdigest = part.partition(":")
                digests[name] = bytes.fromhex(hexdigest)
            if len(digests) != 1 or len(algorithms) != 1:
                digests = {name: digests[name] for name in algorithms}
            elif algorithms[0] not in digests:
                raise KeyError(algorithms[0])
        except (KeyError, ValueError):  # another algorithm, or a value no writer makes
            self.forget(path)
            return None
        self._fresh[path] = value
        return digests, st.st_size

    def forget(self, path: str) -> None:
        """Drop a path's old entry (its file changed, vanished or could not be read)."""
        self._stale.add(path)
        self._dirty = True

    def record(self, path: str, st: os.stat_result, digests: Dict[str, bytes]) -> bool:
        """Remember digests of the content read after `st` was taken; False when the entry is
        racy (changed too recently to be told apart from a later edit) or not storable."""
        if max(st.st_mtime_ns, st.st_ctime_ns) >= self.started_ns - RACY_WINDOW_NS:
            with self._lock:
                self.racy += 1
            return False
        if "\n" in path or not digests:
            return False  # the file format is one line per path
        if len(digests) == 1:
            (name, digest), = digests.items()
            self._fresh[path] = (f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "
                                 f"{name}:{digest.hex()}")
        else:
            self._fresh[path] = stat_key(st) + " ".join(f"{name}:{d.hex()}" for name, d in sorted(digests.items()))
        self._dirty = True
        return True

    def verdict(self, key: str, text: str) -> Optional[Verdict]:
        """What a whole RECORD's check found last time (every file as recorded), when the RECORD
        text is the same and every file it lists still has the stat it had then; else None."""
        value = self._entries.get(key)
        if value is None:
            return None
        parts = value.split("\0")
        head = parts[0].split(" ")
        stat_of = os.stat
        try:
            if len(head) != 3 or head[0] != _digest_text(text) or len(parts) % 2:
                raise ValueError("changed")
            for i in range(2, len(parts), 2):
                st = stat_of(parts[i])
                if parts[i + 1] != f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} ":
                    raise ValueError("changed")
            findings = json.loads(parts[1])
            found = Verdict(int(head[1]), findings["errors"], int(head[2]), findings["named"])
        except (OSError, ValueError, KeyError, TypeError):
            self.forget(key)
            return None
        self._fresh[key] = value
        self.count(len(parts) // 2 - 1, 0)
        return found

    def record_verdict(self, key: str, text: str, findings: Dict[str, Any], paths: List[str]) -> bool:
        """Remember that every file of a RECORD was found as recorded, under the stats its
        digests were taken from; only when each of those entries is in the cache (not racy)."""
        if "\n" in key:
            return False
        parts = [f"{_digest_text(text)} {findings['entries']} {findings['unhashable']}",
                 json.dumps({"errors": findings["errors"], "named": findings["named"]}, sort_keys=True)]
        for path in dict.fromkeys(paths):  # a RECORD may list a path twice
            value = self._fresh.get(path)
            if value is None:
                return False
            parts.append(path)
            parts.append(_stat_part(value))
        self._fresh[key] = "\0".join(parts)
        self._dirty = True
        return True

    def count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    def save(self, stop_at: Optional[float] = None) -> None:
        """Write this capture's entries (plus older ones it did not look at, e.g. the shared
        libraries a --deep capture hashed) when anything changed; never raises. Not after
        `stop_at` (time.monotonic()): the capture's deadline comes before the cache."""
        if self.path is None:
            return
        if self._dirty and stop_at is not None and time.monotonic() >= stop_at:
            self._add_note("cache not updated: capture deadline reached")
            return
        if not self._dirty:
            try:  # unchanged: only mark it recently used, for the eviction order
                os.utime(self.path)
            except OSError:
                pass
            return
        entries = dict(self._fresh)
        for path, value in self._entries.items():
            if len(entries) >= MAX_ENTRIES:
                break
            if path not in entries and path not in self._stale:
                entries[path] = value
        if len(entries) > MAX_ENTRIES:
            entries = dict(list(entries.items())[:MAX_ENTRIES])
        try:
            write_cache_file(self.path, entries)
        except (OSError, ValueError) as exc:
            self._add_note(f"cache not updated: {getattr(exc, 'strerror', None) or exc}")
            return
        _evict(os.path.dirname(self.path), keep=self.path)

    def _add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text

    def summary(self) -> Dict[str, Any]:
        """The `hash_cache` bookkeeping a section records."""
        out: Dict[str, Any] = {"used": self.hits > 0, "hits": self.hits, "misses": self.misses, "path": self.path}
        if self.racy:
            out["racy"] = self.racy
        if self.note:
            out["note"] = self.note
        return out


def _stat_part(value: str) -> str:
    """The `"<dev> <ino> <size> <mtime_ns> <ctime_ns> "` that starts a file entry."""
    end = -1
    for _ in range(5):
        end = value.index(" ", end + 1)
    return value[:end + 1]


class Verdict(NamedTuple):
    entries: int  # RECORD entries checked
    errors: Dict[str, str]  # RECORD lines with an unreadable hash
    unhashable_count: int
    unhashable_named: List[str]


def _digest_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def disabled_summary(files: int) -> Dict[str, Any]:
    """`hash_cache` of a capture made with --no-cache."""
    return {"used": False, "hits": 0, "misses": files, "path": None,
            "note": "--no-cache: every file hashed; the cache was neither read nor written"}


class CacheRefused(Exception):
    """A cache file that exists but must not be trusted (the message says why)."""


def read_cache_file(path: str) -> Dict[str, str]:
    """The entries of a cache file, after every check; raises CacheRefused or OSError."""
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


def parse_cache(data: bytes) -> Dict[str, str]:
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
    if header.get("host") != _hostname():
        raise CacheRefused("written on another host")
    payload = data[end + 1:]
    if hashlib.sha256(payload).hexdigest() != header.get("sha256"):
        raise CacheRefused("damaged: checksum mismatch")
    lines = payload.decode("utf-8", "surrogateescape").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    count = header.get("entries")
    if not isinstance(count, int) or len(lines) != 2 * count:
        raise CacheRefused("damaged: entry count mismatch")
    return dict(zip(lines[0::2], lines[1::2]))


def write_cache_file(path: str, entries: Dict[str, str]) -> None:
    """Replace the cache file atomically (private mode, no fsync: the checksum catches a
    file a crash left half-written)."""
    from envsnap.errors import EnvsnapError
    from envsnap.model.store import atomic_write_bytes

    parts: List[str] = []
    for entry_path, value in entries.items():
        parts.append(entry_path)
        parts.append(value)
    payload = ("\n".join(parts) + "\n").encode("utf-8", "surrogateescape") if parts else b""
    if len(payload) > MAX_BYTES - 4096:
        raise ValueError(f"cache would exceed {MAX_BYTES >> 20} MiB; not written")
    header = {"format": FORMAT, "version": VERSION, "uid": os.geteuid() if hasattr(os, "geteuid") else None,
              "host": _hostname(), "entries": len(entries), "written_at_ns": time.time_ns(),
              "sha256": hashlib.sha256(payload).hexdigest()}
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    data = json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + payload
    try:
        atomic_write_bytes(path, data, force=True, durable=False, mode=0o600)
    except EnvsnapError as exc:
        raise OSError(str(exc)) from None


def _evict(directory: str, keep: str) -> None:
    """Keep at most MAX_FILES cache files: remove the least recently used (written or read)."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(_PREFIX) and n.endswith(_SUFFIX)]
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
