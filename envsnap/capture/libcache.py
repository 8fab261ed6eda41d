"""A trusted cache of what the libraries collector learns from files: read once per file identity.

Reading a shared object's strings costs a tenth of a second per 17 MB of string sections
(libtorch_cpu.so), and finding who installed it means reading every RECORD of its site directory
and dpkg's file lists: work a second capture of the same processes must not repeat. This cache
keeps three kinds of entry, each valid only while the files it was read from are unchanged:

- "objects": per shared object (its path), the identity it was read under (device, inode, size,
  mtime_ns, ctime_ns, packed as the hash cache packs them) and what was read: build-id, soname,
  sha256 when there is no build-id, the getenv import, the environment-variable-like names of its
  string sections (libstrings.py). Looked up by fstat of the file that is read: an edit, a
  truncation, a rename over it or a chmod moves one of the five numbers, and the file is read again;
- "sites": per site directory, the identities of its distributions' RECORD files and the shared
  objects they list ({absolute path: [distribution, version]});
- "dpkg": the identities of /var/lib/dpkg/info (its mtime moves when dpkg adds, removes or renames
  a .list file) and /var/lib/dpkg/status, and the shared objects and executables dpkg's lists name.

The rules are the hash cache's (filestat.py: git's racy rule; cachefile.py: the file format with its
owner, host, mode and checksum checks, atomic replacement, least recently used files evicted): an entry
whose files changed within RACY_WINDOW_NS of the capture's start is not recorded, and a damaged,
foreign or unreadable cache file is ignored with a note and replaced by the next write. Only this
module reads or writes the file: `$XDG_CACHE_HOME/envsnap/libraries-<host digest>.cache`.
Values are decoded only when asked for: a warm capture decodes the entries of the objects its
processes map, not the rest.
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.capture import cachefile, filestat

_PREFIX = "libraries-"
OBJECTS, SITES, DPKG = "objects", "sites", "dpkg"
_SECTIONS = (OBJECTS, SITES, DPKG)
MAX_ENTRIES = {OBJECTS: 20_000, SITES: 2_000, DPKG: 1}
MAX_TOTAL_BYTES = 48 << 20  # below cachefile.MAX_BYTES: the file is refused unread beyond that


def identity(st: os.stat_result) -> str:
    """The identity an entry is valid under (hex of the packed device, inode, size, mtime, ctime)."""
    return filestat.packed_stat(st).hex()


class LibCache(cachefile.CacheBook):
    """One cache file's entries for one capture: get, put, save once at the end. Thread-safe."""

    def __init__(self, path: Optional[str], sections: Optional[Dict[str, Tuple[int, bytes]]] = None,
                 note: Optional[str] = None, rewrite: bool = False) -> None:
        super().__init__(path, note)
        self.started_ns = time.time_ns()
        self._raw = dict(sections or {})
        self._entries: Dict[str, Dict[str, Tuple[str, str]]] = {}  # section -> key -> (identity, JSON text)
        self._used: Dict[str, Dict[str, Tuple[str, str]]] = {name: {} for name in _SECTIONS}
        self._stale: Dict[str, Set[str]] = {name: set() for name in _SECTIONS}
        self._dirty = rewrite
        self._lock = threading.Lock()

    @classmethod
    def open(cls, disabled: bool = False) -> LibCache:
        """This host's libraries cache; never raises (whatever is wrong becomes the note)."""
        if disabled:
            return cls(None, note="--no-cache: every library read; the cache was neither read nor written")
        directory = cachefile.cache_dir()
        if directory is None:
            return cls(None, note="no cache directory (no home directory and no XDG_CACHE_HOME)")
        name = hashlib.sha256(cachefile.hostname().encode("utf-8", "surrogateescape")).hexdigest()[:20]
        path = os.path.join(directory, f"{_PREFIX}{name}{cachefile.SUFFIX}")
        sections, refused = cachefile.load(path)
        if refused is not None:
            return cls(path, note=f"{refused}: every library read", rewrite=True)
        if sections is None:
            return cls(path, note="cache empty: first capture of these libraries with the cache")
        return cls(path, sections)

    def _table(self, section: str) -> Dict[str, Tuple[str, str]]:
        table = self._entries.get(section)
        if table is None:
            count, raw = self._raw.get(section, (0, b""))
            lines = raw.decode("utf-8", "surrogateescape").split("\n") if raw else []
            if lines and lines[-1] == "":
                lines.pop()
            if len(lines) != 3 * count:  # a sound checksum over a wrong layout: a writer's bug
                self._add_note(f"cache section {section} unreadable: not used")
                self._dirty = True
                table = {}
            else:
                table = {lines[i]: (lines[i + 1], lines[i + 2]) for i in range(0, len(lines), 3)}
            self._entries[section] = table
        return table

    def get(self, section: str, key: str, ident: str) -> Optional[Any]:
        """The value recorded for `key` under this identity, else None (counted as hit or miss)."""
        with self._lock:
            found = self._table(section).get(key)
            if found is not None and found[0] == ident:
                try:
                    value = json.loads(found[1])
                except ValueError:
                    value = None
                if value is not None:
                    self._used[section][key] = found
                    if section == OBJECTS:
                        self.hits += 1
                    return value
            if found is not None:
                self._stale[section].add(key)
                self._dirty = True
            if section == OBJECTS:
                self.misses += 1
            return None

    def put(self, section: str, key: str, ident: str, value: Any, newest_change_ns: int) -> bool:
        """Record a value read from files whose newest mtime/ctime is `newest_change_ns`; False
        when that is too recent to tell apart from a later edit (racy) or the key is not storable."""
        if newest_change_ns >= self.started_ns - filestat.RACY_WINDOW_NS:
            with self._lock:
                self.racy += 1
            return False
        if "\n" in key or "\n" in ident or self.path is None:
            return False
        text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        with self._lock:
            self._used[section][key] = (ident, text)
            self._dirty = True
        return True

    def save(self, stop_at: Optional[float] = None) -> None:
        """Write what this capture used and read, then older entries up to the bounds; never raises."""
        if self.path is None or not self._must_write(stop_at):
            return
        budget = MAX_TOTAL_BYTES
        sections = []
        for name in _SECTIONS:
            kept = dict(self._used[name])
            for key, value in self._table(name).items():
                if len(kept) >= MAX_ENTRIES[name]:
                    break
                if key not in kept and key not in self._stale[name]:
                    kept[key] = value
            lines: List[str] = []
            for key, (ident, text) in kept.items():
                size = len(key) + len(ident) + len(text) + 3
                if size > budget:
                    continue
                budget -= size
                lines += (key, ident, text)
            body = ("\n".join(lines) + "\n").encode("utf-8", "surrogateescape") if lines else b""
            sections.append((name, len(lines) // 3, body))
        why = cachefile.replace(self.path, sections, _PREFIX)
        if why:
            self._add_note(why)
