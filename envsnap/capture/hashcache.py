"""A cache of file hashes that can be trusted, so a capture of an unchanged venv reads no file twice.

A file's hash is reused only when its stat (device, inode, size, mtime_ns, ctime_ns) equals
the one taken before it was hashed, and an entry is never recorded from a racy stat (filestat.py:
git's index rule). A second kind of entry (a verdict) saves the rest of the work for a
distribution found intact: its RECORD's identity (the RECORD file's own stat, under the same
rule, or the sha256 of its text), what the RECORD says by itself (files listed without a hash,
unreadable hashes, the build: WHEEL's tags and the compiled files) and the stat of every file it
lists, as it was when that file's digest matched RECORD's (or, for a file checked by size alone,
when it showed the recorded size). When the RECORD and all of those stats are unchanged, the
findings are the same without reading anything; else the distribution is checked file by file.
A verdict's stats are its own, not the file entries' (a --deep capture may renew a file entry
after an edit that the verdict must then not vouch for). A verdict without the build (an older
writer's) is not used: the next capture replaces it.

One file per host and set of installation directories (a venv), in cachefile.py's format,
bounded by MAX_ENTRIES. What the capture reports about the files never depends on the cache;
it reports hits, misses and notes in `hash_cache`.

Speed (a warm capture of a 25,000-file venv in a few hundred milliseconds at most): each
section is decoded only when asked for (a default capture of unchanged distributions parses
only its own mode's verdicts), and stats are kept packed (filestat.STAT: 40 bytes a file), so
checking a verdict is nested map()s over os.stat and one bytes comparison, all in C.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import struct
import threading
import time
from operator import attrgetter, itemgetter
from typing import Any, Callable, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple, Union

from envsnap.capture import cachefile, filestat

MAX_ENTRIES = 200_000  # a deep SGLang venv holds ~38,000 installed files; a file is ~150 bytes each
_PREFIX = "hashes-"
FILES = "files"  # the section of file entries; verdicts are in "verdicts:<mode>"
_VERDICTS = "verdicts:"
STAT_CHUNK = 512  # files a process stats at a time for stat_verdict_files


class _NotGiven:
    """The default of HashCache.verdict's `stats`: not taken yet (None there means one could not be taken)."""


NOT_GIVEN = _NotGiven()
_MTIME_NS = attrgetter("st_mtime_ns")
_CTIME_NS = attrgetter("st_ctime_ns")


class _Verdict(NamedTuple):
    head: str  # "<RECORD identity> <entries> <unhashable> <number of paths>"
    findings: str  # JSON: {"errors": ..., "named": ...}
    paths: List[str]
    stats: str  # hex of the packed stats of the paths, in order


def _packed_stats_shared(groups: List[List[str]], processes: int) -> List[Optional[bytes]]:
    """filestat.packed_stats of each group of paths, in order; groups shared round-robin among `processes`
    (this one and forked children, where forking is safe: subproc.fork_child). A child that cannot be forked or
    whose answer does not come back has its groups done here."""
    import pickle

    from envsnap.subproc import fork_child, reap, write_all

    processes = max(1, min(processes, len(groups)))
    shares = [list(range(first, len(groups), processes)) for first in range(processes)]

    def answer_for(share: List[int]) -> Callable[[int], None]:
        def answer(write_fd: int) -> None:  # in the child: its groups' stats, pickled down the pipe
            stats = [filestat.packed_stats(groups[i]) for i in share]
            write_all(write_fd, pickle.dumps(stats, protocol=pickle.HIGHEST_PROTOCOL))
        return answer

    children = [(share, fork_child(answer_for(share))) for share in shares[1:]]
    out: List[Optional[bytes]] = [None] * len(groups)
    for i in shares[0]:
        out[i] = filestat.packed_stats(groups[i])
    for share, child in children:
        answer = None
        if child is not None:
            pid, read_fd = child
            with os.fdopen(read_fd, "rb") as pipe:
                payload = pipe.read()
            reap(pid)
            try:
                answer = pickle.loads(payload) if payload else None
            except Exception:
                answer = None
        if not isinstance(answer, list) or len(answer) != len(share):
            answer = [filestat.packed_stats(groups[i]) for i in share]
        for i, stats in zip(share, answer):
            out[i] = stats
    return out


class HashCache(cachefile.CacheBook):
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
        self._dirty = rewrite
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
        directory = cachefile.cache_dir()
        if directory is None:
            return cls(None, {}, "no cache directory (no home directory and no XDG_CACHE_HOME)")
        name = hashlib.sha256("\0".join([cachefile.hostname(), *sorted(set(scope))])
                              .encode("utf-8", "surrogateescape")).hexdigest()[:20]
        path = os.path.join(directory, f"{_PREFIX}{name}{cachefile.SUFFIX}")
        sections, refused = cachefile.load(path)
        if refused is not None:
            return cls(path, {}, f"{refused}: every file hashed", rewrite=True)
        if sections is None:
            return cls(path, {}, "cache empty: first capture of this environment with the cache")
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
            if filestat.STAT.pack(*filestat.STAT_FIELDS(st)) != value[0]:
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
        if filestat.is_racy(st, self.started_ns):
            with self._lock:
                self.racy += 1
            return False
        if "\n" in path or not digests:
            return False  # the file format is one line per path
        try:
            key = filestat.STAT.pack(*filestat.STAT_FIELDS(st))
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
        threshold = self.started_ns - filestat.RACY_WINDOW_NS
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
            keys = list(itertools.starmap(filestat.STAT.pack, map(filestat.STAT_FIELDS, stats)))
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

    def stat_verdict_files(self, keys: Iterable[str], processes: int = 1) -> Dict[str, Optional[bytes]]:
        """{key: filestat.packed_stats of the files its verdict lists} for the keys that have one. With
        `processes` > 1, in a process with no other thread (the capture command's packages child), the stats are
        shared out, STAT_CHUNK files at a time, to that many processes: os.stat releases the GIL for a few
        microseconds only, so threads queue for it and took longer than one thread (65 ms -> 107 ms for 8,000
        files on 2 cores), while forked processes each have a GIL of their own."""
        jobs: List[Tuple[str, List[str]]] = []
        for key in keys:
            found = self._verdict_table(key.rpartition("\0")[2]).get(key)
            if found is not None:
                jobs += [(key, found.paths[at:at + STAT_CHUNK]) for at in range(0, len(found.paths), STAT_CHUNK)]
        chunks = _packed_stats_shared([paths for _, paths in jobs], processes)
        out: Dict[str, Optional[bytes]] = {}
        for (key, _), chunk in zip(jobs, chunks):
            if key not in out:
                out[key] = chunk
            else:
                prior = out[key]
                out[key] = None if prior is None or chunk is None else prior + chunk
        return out

    def verdict(self, key: str, record_id: str, stats: Union[bytes, None, "_NotGiven"] = NOT_GIVEN
                ) -> Optional[Verdict]:
        """What a whole RECORD's check found last time (every file as recorded), when the RECORD
        is the same (`record_id`: see record_verdict) and every file it lists still has the
        stat it had then; else None. `stats`: those files' packed stats as stat_verdict_files took them
        (None: one could not be stat'ed); not given, they are taken here."""
        mode = key.rpartition("\0")[2]
        found = self._verdict_table(mode).get(key)
        if found is None:
            return None
        head = found.head.split(" ")
        try:
            if len(head) != 4 or head[0] != record_id or int(head[3]) != len(found.paths):
                raise ValueError("changed")
            now = filestat.packed_stats(found.paths) if isinstance(stats, _NotGiven) else stats
            if now != bytes.fromhex(found.stats):
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
        if record_stat is not None and filestat.is_racy(record_stat, self.started_ns):
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
        if self.path is None or not self._must_write(stop_at):
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
        why = cachefile.replace(self.path, sections, _PREFIX)
        if why:
            self._add_note(why)


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
        size = filestat.STAT.size
        return self._stats[i * size:(i + 1) * size], self._digest(i)

    def items(self) -> Iterable[Tuple[str, Tuple[bytes, str]]]:
        size = filestat.STAT.size
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
    if len(stats) != filestat.STAT.size * count:
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
