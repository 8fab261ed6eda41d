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

A second kind of entry (a verdict) saves the rest of the work for a distribution that was
found intact: its RECORD's identity (the RECORD file's own stat, under the same rule, or the
sha256 of its text), what the RECORD says by itself (files listed without a hash, lines with
an unreadable hash, the distribution's build: WHEEL's tags and the compiled files), and the stat
of every file it lists: of a hashed file as it was when its digest was taken and found equal to
RECORD's, of a file checked by size alone (a default capture's non-Python files) as it was when
it showed the recorded size. When the RECORD and every one of those stats are unchanged, the
findings are the same without reading, parsing or hashing anything; when anything differs the
distribution is checked file by file (the file entries still apply). Its stats are its own, not
the file entries' (a --deep capture may renew a file entry after an edit that this entry must
then not vouch for), and it is recorded only from non-racy file entries (a size needs no racy
rule: it is part of the stat itself). A verdict written before verdicts held the build (and
covered the files checked by size) is not used: it is replaced by the next capture.

The file lives in `$XDG_CACHE_HOME/envsnap` (default `~/.cache/envsnap`), one per host and
set of installation directories (a venv), and is bounded: at most MAX_ENTRIES entries and
MAX_BYTES per file, at most MAX_FILES files (the least recently used go first). It starts
with a one-line header (format, version, owner uid, host, entry count, its sections' names,
entry counts and sizes, sha256 of the rest) and is replaced atomically (a new file renamed over
the old one, never written in place), so concurrent captures each read a whole file and the
last writer wins. A file that is damaged, truncated, of another version, owned by another user
or writable by others is ignored with a note, never trusted, and replaced by the next write.
Only this module reads or writes it; the capture reports hits, misses and any note
(`hash_cache`), and what it reports about the files never depends on the cache.

Speed (the goal: a warm capture of a 25,000-file venv in a few hundred milliseconds at most).
The whole file is read and its checksum verified at open (one read and one sha256: ~10 ms for
20 MB), but each section is decoded and split only when asked for: a default capture whose
distributions are all unchanged parses only the verdicts of its own mode, never the file
entries nor the verdicts of --deep captures. A verdict keeps its files' paths and their stats
packed into one bytes object (device, inode, size, mtime_ns, ctime_ns: 40 bytes a file), so
checking one is nested map()s over os.stat and one bytes comparison, all in C: per file, a
stat and no Python bytecode. File entries keep their stats packed the same way; on a first
capture they are recorded in one pass once hashing is over (record_many).

Over 400 lines on purpose: the file format, the trust checks (owner, host, checksum, version) and the racy
rule belong together: changing one without the others is how a cache would hide an edit.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import stat
import struct
import threading
import time
from operator import attrgetter, itemgetter
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple, Union

FORMAT = "envsnap-hash-cache"
VERSION = 2  # 1: one list of entries; 2: sections parsed on demand, verdicts as parallel lists
MAX_ENTRIES = 200_000  # a deep SGLang venv holds ~38,000 installed files; a file is ~150 bytes each
MAX_BYTES = 64 << 20  # a bigger cache file is refused unread (and never written)
MAX_FILES = 8  # cache files kept (one per host and venv); the least recently used is removed
# Margin between a file's mtime/ctime and the moment its stat was taken below which an
# entry is racy (see above): covers the kernel's coarse clock (<= 10 ms), whole-second
# and FAT's 2 s timestamps, and a clock skew of about a second to a network filesystem.
RACY_WINDOW_NS = 3_000_000_000
_PREFIX = "hashes-"
_SUFFIX = ".cache"
FILES = "files"  # the section of file entries; verdicts are in "verdicts:<mode>"
_VERDICTS = "verdicts:"

_STAT_FIELDS = attrgetter("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
_MTIME_NS = attrgetter("st_mtime_ns")
_CTIME_NS = attrgetter("st_ctime_ns")
# The same five numbers packed (40 bytes): no int-to-text conversion per file, and a whole
# distribution's stats compare as one bytes object. Stored in the file as hex, one line per list.
_STAT = struct.Struct("<QQQqq")


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
    """The identity of a file's state as text: `"<dev> <ino> <size> <mtime_ns> <ctime_ns> "`."""
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "


def packed_stat(st: os.stat_result) -> bytes:
    """The identity of a file's state as stored (device, inode, size, mtime_ns, ctime_ns)."""
    return _STAT.pack(*_STAT_FIELDS(st))


def packed_stats(paths: List[str]) -> Optional[bytes]:
    """packed_stat of every path, concatenated in order; None when one cannot be stat'ed. The
    loop is nested map()s: it runs in C, a stat and a tuple per path and no Python bytecode."""
    try:
        return b"".join(itertools.starmap(_STAT.pack, map(_STAT_FIELDS, map(os.stat, paths))))
    except (OSError, ValueError, struct.error):
        return None


def is_racy(st: os.stat_result, since_ns: int) -> bool:
    """Changed too recently, at `since_ns`, to be told apart from a later edit (see above)."""
    return max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns - RACY_WINDOW_NS


class _Verdict(NamedTuple):
    head: str  # "<RECORD identity> <entries> <unhashable> <number of paths>"
    findings: str  # JSON: {"errors": ..., "named": ...}
    paths: List[str]
    stats: str  # hex of the packed stats of the paths, in order


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

    def _add_note(self, text: str) -> None:
        self.note = f"{self.note}; {text}" if self.note else text

    def summary(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"used": self.hits > 0, "hits": self.hits, "misses": self.misses, "path": self.path}
        if self.racy:
            out["racy"] = self.racy
        if self.note:
            out["note"] = self.note
        return out


class HashCache(CacheBook):
    """One cache file's entries for one capture: look up, record, save once at the end.

    File entries map an absolute path to (packed stat, `"<alg>:<hex>[ <alg>:<hex>...]"`);
    verdicts map `"<dist>\\0<location>\\0<mode>"` to what a whole RECORD's check found (its
    identity, its own findings, and the path and stat key of every file it lists).
    `lookup` and `record` may be called from several hashing threads at once.
    """

    def __init__(self, path: Optional[str], entries: Optional[Dict[str, Tuple[bytes, str]]] = None, note: Optional[str] = None,
                 rewrite: bool = False, sections: Optional[Dict[str, Tuple[int, bytes]]] = None) -> None:
        super().__init__(path, note)
        self._raw: Dict[str, Tuple[int, bytes]] = dict(sections or {})  # verified, not parsed yet
        self._file_entries: Optional[Union[Dict[str, Tuple[bytes, str]], _FileEntries]] = (
            dict(entries) if entries is not None else None)
        self._verdicts: Dict[str, Dict[str, _Verdict]] = {}  # mode -> key -> verdict (parsed)
        self._fresh: Dict[str, Tuple[bytes, str]] = {}  # this capture's file entries: hits kept, new hashes
        self._fresh_verdicts: Dict[str, Dict[str, _Verdict]] = {}
        self._stale: Set[str] = set()  # entries this capture found out of date: not carried over
        self._changed: Set[str] = set()  # sections whose content this capture changed
        self._dirty = rewrite  # something on disk must change (a stale entry, a damaged file)
        # (path, stat taken before reading, digests) handed over by hashing threads; record_many
        # records them in one pass (a per-file record() call costs as much again as the entry).
        self.pending: List[Tuple[str, os.stat_result, Dict[str, bytes]]] = []
        self._lock = threading.Lock()
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
            sections = read_cache_file(path)
        except FileNotFoundError:
            return cls(path, {}, "cache empty: first capture of this environment with the cache")
        except CacheRefused as exc:
            return cls(path, {}, f"cache ignored ({exc}): every file hashed", rewrite=True)
        except OSError as exc:
            return cls(path, {}, f"cache ignored (unreadable: {exc.strerror or exc}): every file hashed",
                       rewrite=True)
        return cls(path, sections=sections)

    # ------------------------------------------------------------ the sections, parsed on demand

    @property
    def _entries(self) -> Union[Dict[str, Tuple[bytes, str]], "_FileEntries"]:
        """The file entries read from disk (parsed the first time they are needed)."""
        if self._file_entries is None:
            with self._lock:
                if self._file_entries is None:
                    count, raw = self._raw.get(FILES, (0, b""))
                    try:
                        self._file_entries = _parse_files(raw.decode("utf-8", "surrogateescape"), count)
                    except ValueError:  # a sound checksum over a wrong layout: a writer's bug
                        self._add_note("cache section of file entries unreadable: not used")
                        self._changed.add(FILES)
                        self._dirty = True
                        self._file_entries = {}
        return self._file_entries

    def _verdict_table(self, mode: str) -> Dict[str, _Verdict]:
        table = self._verdicts.get(mode)
        if table is None:
            count, raw = self._raw.get(_VERDICTS + mode, (0, b""))
            try:
                table = _parse_verdicts(_lines(raw), count)
            except (ValueError, IndexError):
                self._add_note(f"cache section of {mode} verdicts unreadable: not used")
                self._changed.add(_VERDICTS + mode)
                self._dirty = True
                table = {}
            self._verdicts[mode] = table
        return table

    # ------------------------------------------------------------ files

    def has_file_entries(self) -> bool:
        """Whether there is any file entry to look up (a first capture has none)."""
        return bool(self._file_entries) if self._file_entries is not None else self._raw.get(FILES, (0, b""))[0] > 0

    def lookup(self, path: str, algorithms: List[str]) -> Optional[Tuple[Dict[str, bytes], int]]:
        """(digests, size) from the cache when the file's stat is exactly the state they were
        taken from; None otherwise (no entry, file changed, gone or unreadable)."""
        value = self._entries.get(path)
        if value is None:
            return None
        try:
            st = os.stat(path)
            if _STAT.pack(*_STAT_FIELDS(st)) != value[0]:
                raise ValueError("changed")
        except (OSError, ValueError, struct.error):
            self.forget(path)
            return None
        digests: Dict[str, bytes] = {}
        try:
            for part in value[1].split(" "):
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
        self._changed.add(FILES)
        self._dirty = True

    def record(self, path: str, st: os.stat_result, digests: Dict[str, bytes]) -> bool:
        """Remember digests of the content read after `st` was taken; False when the entry is
        racy (changed too recently to be told apart from a later edit) or not storable."""
        if is_racy(st, self.started_ns):
            with self._lock:
                self.racy += 1
            return False
        if "\n" in path or not digests:
            return False  # the file format is one line per path
        try:
            key = _STAT.pack(*_STAT_FIELDS(st))
        except struct.error:
            return False
        if len(digests) == 1:
            (name, digest), = digests.items()
            self._fresh[path] = (key, f"{name}:{digest.hex()}")
        else:
            self._fresh[path] = (key, " ".join(f"{name}:{d.hex()}" for name, d in sorted(digests.items())))
        self._changed.add(FILES)
        self._dirty = True
        return True

    def record_many(self) -> None:
        """record() every pending (path, stat, digests), in one pass: the same rules. The common
        entry (not racy, one digest, a path without a newline) is built by C-level map()s and
        stored by one dict.update. Whether every entry is such is found by C-level scans of them
        all (the newest mtime/ctime, the joined paths, the digest counts): then no Python bytecode
        runs per file; else each entry is sorted out in turn (a cold capture of a 25,000-file venv
        records them all: per-entry code cost ~2-3 us a file)."""
        pending, self.pending = self.pending, []
        if not pending:
            return
        threshold = self.started_ns - RACY_WINDOW_NS
        stats = list(map(itemgetter(1), pending))
        digest_maps = list(map(itemgetter(2), pending))
        racy = recorded = 0
        if (max(max(map(_MTIME_NS, stats)), max(map(_CTIME_NS, stats))) < threshold
                and min(map(len, digest_maps)) == 1 == max(map(len, digest_maps))
                and "\n" not in "".join(map(itemgetter(0), pending))):
            plain = pending
        else:
            plain = []
            for item in pending:
                st = item[1]
                if st.st_mtime_ns >= threshold or st.st_ctime_ns >= threshold:
                    racy += 1
                elif len(item[2]) != 1 or "\n" in item[0]:
                    recorded += self.record(*item)
                else:
                    plain.append(item)
            stats = list(map(itemgetter(1), plain))
            digest_maps = list(map(itemgetter(2), plain))
        self.racy += racy
        try:
            keys = list(itertools.starmap(_STAT.pack, map(_STAT_FIELDS, stats)))
        except struct.error:  # a number out of the packed range: one by one, that entry left out
            for item in plain:
                recorded += self.record(*item)
            plain = []
        if plain:
            # "<alg>:<hex>" of each entry's only digest (the text record() stores).
            names = list(map(next, map(iter, digest_maps)))
            digests: List[bytes] = list(map(dict.__getitem__, digest_maps, names))
            if len(set(names)) == 1:
                values = list(map((names[0] + ":").__add__, map(bytes.hex, digests)))
            else:
                values = [f"{name}:{digest.hex()}" for name, digest in zip(names, digests)]
            self._fresh.update(zip(map(itemgetter(0), plain), zip(keys, values)))
            recorded += len(plain)
        if recorded:
            self._changed.add(FILES)
            self._dirty = True

    # ------------------------------------------------------------ verdicts (whole RECORDs)

    def verdict(self, key: str, record_id: str) -> Optional[Verdict]:
        """What a whole RECORD's check found last time (every file as recorded), when the RECORD
        is the same (`record_id`: see record_verdict) and every file it lists still has the
        stat it had then; else None."""
        mode = key.rpartition("\0")[2]
        found = self._verdict_table(mode).get(key)
        if found is None:
            return None
        head = found.head.split(" ")
        try:
            if len(head) != 4 or head[0] != record_id or int(head[3]) != len(found.paths):
                raise ValueError("changed")
            if packed_stats(found.paths) != bytes.fromhex(found.stats):
                raise ValueError("changed")
            findings = json.loads(found.findings)
            # A verdict without "build" was written before verdicts covered every file RECORD lists
            # (its paths were the hashed files only): it cannot vouch for the rest, so it is not used.
            result = Verdict(int(head[1]), findings["errors"], int(head[2]), findings["named"],
                             int(findings["sized"]), findings["build"])
            hashed_paths = int(findings["hashed_paths"])
        except (ValueError, KeyError, TypeError):
            self._forget_verdict(mode, key)
            return None
        self._fresh_verdicts.setdefault(mode, {})[key] = found
        self.count(hashed_paths, 0)
        return result

    def _forget_verdict(self, mode: str, key: str) -> None:
        self._verdict_table(mode).pop(key, None)
        self._changed.add(_VERDICTS + mode)
        self._dirty = True

    def record_verdict(self, key: str, record_id: str, findings: Dict[str, Any], paths: List[str],
                       record_stat: Optional[os.stat_result] = None,
                       sized: Optional[Dict[str, bytes]] = None) -> bool:
        """Remember that every file of a RECORD was found as recorded: the hashed ones under the
        stats their digests were taken from, only when each of those entries is in the cache (not
        racy); the ones checked by size alone (`sized`: path -> packed stat) under the stat that
        showed their size. No racy rule for those: the size is part of the stat, so an unchanged
        stat vouches for it whenever it was taken. `record_id` names the RECORD: `sha256:<hex>` of
        its text, or `stat:<its stat key>` when `record_stat` (taken before it was read) is given,
        and then only if that is not racy. `findings` holds what the RECORD says by itself (its
        entries checked by hash and by size, unhashable and named files, malformed lines, the build)."""
        if "\n" in key or " " in record_id or "\n" in record_id:
            return False
        if record_stat is not None and is_racy(record_stat, self.started_ns):
            return False
        unique = list(dict.fromkeys(paths))  # a RECORD may list a path twice
        fresh = self._fresh
        by_size = sized or {}
        hashed = 0
        parts = []
        try:
            for path in unique:
                entry = fresh.get(path)
                if entry is not None:
                    parts.append(entry[0])
                    hashed += 1
                else:
                    parts.append(by_size[path])
        except KeyError:  # a file without an entry (racy, unreadable, not storable)
            return False
        stats = b"".join(parts)
        head = f"{record_id} {findings['entries']} {findings['unhashable']} {len(unique)}"
        text = json.dumps({"errors": findings["errors"], "named": findings["named"], "sized": findings["sized"],
                           "build": findings["build"], "hashed_paths": hashed}, sort_keys=True)
        mode = key.rpartition("\0")[2]
        self._fresh_verdicts.setdefault(mode, {})[key] = _Verdict(head, text, unique, stats.hex())
        self._changed.add(_VERDICTS + mode)
        self._dirty = True
        return True

    def count(self, hits: int, misses: int) -> None:
        with self._lock:
            self.hits += hits
            self.misses += misses

    # ------------------------------------------------------------ writing

    def save(self, stop_at: Optional[float] = None) -> None:
        """Write this capture's entries (plus older ones it did not look at, e.g. the shared
        libraries a --deep capture hashed) when anything changed; never raises. Not after
        `stop_at` (time.monotonic()): the capture's deadline comes before the cache. A section
        this capture did not change is written back as it was read, without parsing it."""
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
        budget = MAX_ENTRIES
        sections: List[Tuple[str, int, bytes]] = []
        raw_files = self._raw.get(FILES)
        if FILES in self._changed or raw_files is None or raw_files[0] > budget:
            entries = dict(self._fresh)
            for path, value in self._entries.items():
                if len(entries) >= budget:
                    break
                if path not in entries and path not in self._stale:
                    entries[path] = value
            if len(entries) > budget:
                entries = dict(itertools.islice(entries.items(), budget))
            sections.append((FILES, len(entries), _join(_files_lines(entries))))
        else:
            sections.append((FILES,) + raw_files)
        budget -= sections[0][1]
        modes = sorted({name[len(_VERDICTS):] for name in self._raw if name.startswith(_VERDICTS)}
                       | set(self._verdicts) | set(self._fresh_verdicts))
        for mode in modes:
            name = _VERDICTS + mode
            raw = self._raw.get(name)
            if name not in self._changed and raw is not None and raw[0] <= budget:
                sections.append((name,) + raw)
                budget -= raw[0]
                continue
            table = dict(self._fresh_verdicts.get(mode, {}))
            for key, found in self._verdict_table(mode).items():
                table.setdefault(key, found)
            kept = list(itertools.islice(table.items(), max(0, budget)))
            budget -= len(kept)
            sections.append((name, len(kept), _join(_verdict_lines(kept))))
        try:
            write_cache_file(self.path, sections)
        except (OSError, ValueError) as exc:
            self._add_note(f"cache not updated: {getattr(exc, 'strerror', None) or exc}")
            return
        _evict(os.path.dirname(self.path), keep=self.path)



def _lines(raw: bytes) -> List[str]:
    if not raw:
        return []
    lines = raw.decode("utf-8", "surrogateescape").split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _join(lines: Iterable[str]) -> bytes:
    text = "\n".join(lines)
    return (text + "\n").encode("utf-8", "surrogateescape") if text else b""


def _files_lines(entries: Dict[str, Tuple[bytes, str]]) -> List[str]:
    """The file entries section: every path, then one line of their packed stats (hex), then
    every digest line, in the same order."""
    values = list(entries.values())
    return [*entries, b"".join([v[0] for v in values]).hex(), *[v[1] for v in values]]


class _FileEntries:
    """The file entries section as read: path -> (packed stat, digest text), each entry cut out of the
    section's stat block and digest lines when asked for. A capture whose distributions were not all
    vouched for by verdicts (an edited file anywhere keeps its distribution's verdict from being
    recorded) looks up a few thousand of the tens of thousands of entries: building every entry's
    tuple cost three times the index (29 ms for the 49,000 entries of a --deep cache on the H200)."""

    __slots__ = ("_index", "_stats", "_digest_block", "_digests")

    def __init__(self, paths: List[str], stats: bytes, digest_block: str) -> None:
        self._index = dict(zip(paths, range(len(paths))))
        self._stats = stats
        self._digest_block = digest_block
        self._digests: Optional[List[str]] = None

    def _digest(self, i: int) -> str:
        digests = self._digests
        if digests is None:  # split once, on the first lookup that hits (_parse_files counted the lines)
            digests = self._digests = self._digest_block.split("\n")
        return digests[i]

    def get(self, path: str) -> Optional[Tuple[bytes, str]]:
        i = self._index.get(path)
        if i is None:
            return None
        size = _STAT.size
        return self._stats[i * size:(i + 1) * size], self._digest(i)

    def items(self) -> Iterable[Tuple[str, Tuple[bytes, str]]]:
        size = _STAT.size
        return ((path, (self._stats[i * size:(i + 1) * size], self._digest(i))) for path, i in self._index.items())

    def __len__(self) -> int:
        return len(self._index)


def _parse_files(raw: str, count: int) -> Union[_FileEntries, Dict[str, Tuple[bytes, str]]]:
    """The file entries section (text): `count` paths, one line of their packed stats in hex, then
    their digest lines (split on first use)."""
    if count == 0 and not raw:
        return {}
    parts = raw.split("\n", count + 1)
    if len(parts) != count + 2 or parts[count + 1].count("\n") != count:
        raise ValueError("file entry count")
    stats = bytes.fromhex(parts[count])
    if len(stats) != _STAT.size * count:
        raise ValueError("stat block size")
    entries = _FileEntries(parts[:count], stats, parts[count + 1])
    if len(entries) != count:
        raise ValueError("a path listed twice")
    return entries


def _parse_verdicts(lines: List[str], count: int) -> Dict[str, _Verdict]:
    """A verdicts section: per verdict its key, head and findings lines, then its paths, then
    one line of their packed stats in hex (the head's last field says how many paths)."""
    table: Dict[str, _Verdict] = {}
    i = 0
    while i < len(lines):
        key, head, findings = lines[i], lines[i + 1], lines[i + 2]
        n = int(head.rpartition(" ")[2])
        start = i + 3
        if n < 0 or start + n >= len(lines):
            raise ValueError("truncated verdict")
        table[key] = _Verdict(head, findings, lines[start:start + n], lines[start + n])
        i = start + n + 1
    if len(table) != count:
        raise ValueError("verdict count")
    return table


def _verdict_lines(items: List[Tuple[str, _Verdict]]) -> List[str]:
    lines: List[str] = []
    for key, found in items:
        lines += (key, found.head, found.findings)
        lines += found.paths
        lines.append(found.stats)
    return lines


class Verdict(NamedTuple):
    entries: int  # RECORD entries checked by hash
    errors: Dict[str, str]  # RECORD lines with an unreadable hash
    unhashable_count: int
    unhashable_named: List[str]
    sized: int  # RECORD entries checked by size (their files exist with the recorded size)
    build: Optional[Dict[str, Any]]  # the distribution's build (capture/collectors/builds.py)


def disabled_summary(files: int) -> Dict[str, Any]:
    """`hash_cache` of a capture made with --no-cache."""
    return {"used": False, "hits": 0, "misses": files, "path": None,
            "note": "--no-cache: every file hashed; the cache was neither read nor written"}


class CacheRefused(Exception):
    """A cache file that exists but must not be trusted (the message says why)."""


def read_cache_file(path: str) -> Dict[str, Tuple[int, bytes]]:
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


def parse_cache(data: bytes) -> Dict[str, Tuple[int, bytes]]:
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
    sections: Dict[str, Tuple[int, bytes]] = {}
    offset = 0
    for name, n, size in named:
        sections[name] = (n, bytes(payload[offset:offset + size]))
        offset += size
    return sections


def write_cache_file(path: str, sections: List[Tuple[str, int, bytes]]) -> None:
    """Replace the cache file atomically (private mode, no fsync: the checksum catches a
    file a crash left half-written). `sections`: (name, entry count, bytes), in order."""
    from envsnap.errors import EnvsnapError
    from envsnap.model.store import atomic_write_bytes

    payload = b"".join(body for _, _, body in sections)
    if len(payload) > MAX_BYTES - 4096:
        raise ValueError(f"cache would exceed {MAX_BYTES >> 20} MiB; not written")
    header = {"format": FORMAT, "version": VERSION, "uid": os.geteuid() if hasattr(os, "geteuid") else None,
              "host": _hostname(), "entries": sum(n for _, n, _ in sections),
              "written_at_ns": time.time_ns(),
              "sections": [[name, n, len(body)] for name, n, body in sections],
              "sha256": hashlib.sha256(payload).hexdigest()}
    os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
    data = json.dumps(header, sort_keys=True).encode("utf-8") + b"\n" + payload
    try:
        atomic_write_bytes(path, data, force=True, durable=False, mode=0o600)
    except EnvsnapError as exc:
        raise OSError(str(exc)) from None


def newest_change_ns(stats: bytes) -> int:
    """The latest mtime_ns or ctime_ns among packed stats (packed_stats), for the racy rule."""
    newest = 0
    for _, _, _, mtime, ctime in _STAT.iter_unpack(stats):
        newest = max(newest, mtime, ctime)
    return newest


def _evict(directory: str, keep: str) -> None:
    evict(directory, keep, _PREFIX)


def evict(directory: str, keep: str, prefix: str) -> None:
    """Keep at most MAX_FILES cache files named <prefix>...: remove the least recently used
    (written or read)."""
    try:
        names = [n for n in os.listdir(directory) if n.startswith(prefix) and n.endswith(_SUFFIX)]
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
