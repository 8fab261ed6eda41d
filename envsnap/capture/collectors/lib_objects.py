"""One shared object a process mapped, described once per capture: what it is, who installed it, its names.

Describer reads an object's ELF headers (elf.py: soname, build-id; the sha256 of the whole file
only when it has none), asks who installed it (owners.py) and scans its string sections for the
environment-variable-like names it holds (libstrings.py); everything read is cached by the file's
identity (libcache.py). The file at the mapped path must be the mapped one (same inode) and must
not change while it is read. `mentions` tells which checked names an object holds as a whole
literal and which only as the tail of a longer one.
"""
from __future__ import annotations

import os
import re
import stat
import time
from typing import Any, Dict, List, Optional, Set, Tuple

_FILE_VERSION = re.compile(r"\.so\.(\d+(?:\.\d+)*)$")
HASH_CHUNK = 8 << 20


class _Deadline(Exception):
    """The capture's deadline passed while an object was read."""


class Describer:
    """Describes objects for one capture: cache lookups, ELF headers, strings, owners."""

    def __init__(self, cache: Any, deadline: float) -> None:
        from envsnap.capture.collectors.owners import Owners

        self.cache = cache
        self.deadline = deadline
        self.owners = Owners(cache)
        self.names: Dict[str, str] = {}  # object key -> the names in its strings, space-separated
        self.unscanned: Dict[str, str] = {}
        self.non_elf: Set[str] = set()
        self.bytes_read = 0
        self.read = 0
        self.from_cache = 0
        # Tests: called with (path, bytes read so far) after each chunk of a scan.
        self.on_chunk: Optional[Any] = None

    def describe(self, mapped: Any) -> Optional[Dict[str, Any]]:
        """The objects entry of one mapped file (maps.Mapped); None when it is not an ELF object."""
        entry: Dict[str, Any] = {"name": os.path.basename(mapped.path), "dev": mapped.dev, "inode": mapped.inode}
        key = object_key(mapped)
        if mapped.deleted:
            entry.update(status="deleted", note="the file was deleted or replaced after the process mapped it: "
                                                "it runs a library that is no longer on disk")
            self.unscanned[key] = "deleted"
            return entry
        facts, problem = self.facts_of(mapped)
        if facts is None:
            entry.update(status=problem[0], note=problem[1])
            self.unscanned[key] = problem[1]
            return entry
        if not facts.get("elf"):
            if getattr(mapped, "executable", False):
                return self._changed_in_place(mapped, key, entry, str(facts.get("not_elf") or "not an ELF file"))
            self.non_elf.add(key)
            return None
        for field in ("soname", "build_id", "sha256", "size", "getenv"):
            if facts.get(field) is not None:
                entry[field] = facts[field]
        if facts.get("soname"):
            entry["name"] = facts["soname"]
        entry["owner"] = self.owners.owner_of(mapped.path)
        version, source = object_version(mapped.path, facts.get("soname"), entry["owner"])
        if version:
            entry["version"], entry["version_source"] = version, source
        if facts.get("note"):
            entry["note"] = facts["note"]
        if facts.get("names") is None:
            entry["strings"] = f"not read: {facts.get('unscanned', 'unknown')}"
            self.unscanned[key] = entry["strings"]
        else:
            entry["strings"] = "read"
            self.names[key] = facts["names"]
        entry["status"] = "ok"
        return entry

    def _changed_in_place(self, mapped: Any, key: str, entry: Dict[str, Any], why: str) -> Dict[str, Any]:
        """The entry of a file the process runs code from (mapped executable) that is no ELF object now: it was
        rewritten or truncated in place since (same inode). Kept, with what is known of it: its path, the stat
        identity of what is on disk now, and why it could not be read; never left out as "not code"."""
        entry.update(status="changed", note=f"the process runs code mapped from this file, but the file is no "
                                            f"ELF object now ({why}): rewritten or truncated in place since")
        try:
            st = os.stat(mapped.path)
            entry["on_disk"] = {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "ctime_ns": st.st_ctime_ns}
        except OSError as exc:
            entry["on_disk"] = {"error": exc.strerror or str(exc)}
        self.unscanned[key] = f"changed in place since it was mapped ({why})"
        return entry

    def facts_of(self, mapped: Any) -> Tuple[Optional[Dict[str, Any]], Tuple[str, str]]:
        """(what the file the process mapped holds, from the cache or read; else None and (status, why)).
        The file at the path must be the mapped one (same inode), and must not change while it is read
        (its identity before and after): changed once, it is read again; twice, its names stay unknown."""
        from envsnap.capture import libcache

        try:
            st = os.stat(mapped.path)
        except OSError as exc:
            return None, ("unreadable", f"cannot stat: {exc.strerror or exc}")
        if st.st_ino != mapped.inode:
            return None, ("replaced", f"the file now at this path is not the one mapped (inode {mapped.inode} "
                                      f"mapped, {st.st_ino} on disk)")
        cached = self.cache.get(libcache.OBJECTS, mapped.path, libcache.identity(st))
        if isinstance(cached, dict):
            self.from_cache += 1
            return cached, ("", "")
        for _attempt in range(2):
            try:
                facts, before, after = self._read(mapped.path)
            except _Deadline:
                return ({"elf": True, "names": None, "unscanned": "capture deadline reached"}, ("", ""))
            except OSError as exc:
                return None, ("unreadable", f"cannot read: {exc.strerror or exc}")
            if before is None or after is None:
                return None, ("unreadable", "not a regular file")
            if after.st_ino != mapped.inode:
                return None, ("replaced", "the file at this path was replaced while it was read")
            if libcache.identity(before) == libcache.identity(after):
                self.read += 1
                self.cache.put(libcache.OBJECTS, mapped.path, libcache.identity(after), facts,
                               max(after.st_mtime_ns, after.st_ctime_ns))
                return facts, ("", "")
        return None, ("changing", "the file changed while it was read, twice: its strings are not known")

    def _read(self, path: str) -> Tuple[Dict[str, Any], Optional[os.stat_result], Optional[os.stat_result]]:
        from envsnap.capture.collectors import elf, libstrings

        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            before = os.fstat(fd)
            if not stat.S_ISREG(before.st_mode):
                return {}, None, None
            try:
                found = elf.read_elf(fd, before.st_size)
            except elf.NotElf as exc:
                return {"elf": False, "not_elf": str(exc)}, before, os.fstat(fd)
            facts: Dict[str, Any] = {"elf": True, "size": before.st_size, "build_id": found.build_id,
                                     "soname": found.soname}
            if found.note:
                facts["note"] = found.note
            facts["getenv"] = libstrings.imports_getenv(fd, found.dynstr)

            def check(done: int) -> None:
                if self.on_chunk is not None:
                    self.on_chunk(path, done)
                if time.monotonic() > self.deadline:
                    raise _Deadline()

            if time.monotonic() > self.deadline:
                raise _Deadline()
            names, count = libstrings.scan(fd, found.string_ranges, on_chunk=check)
            self.bytes_read += count
            facts["names"] = " ".join(names)
            if found.build_id is None:
                facts["sha256"] = self._sha256(fd, before.st_size)
            return facts, before, os.fstat(fd)
        finally:
            os.close(fd)

    def _sha256(self, fd: int, size: int) -> str:
        import hashlib

        digest = hashlib.sha256()
        at = 0
        while at < size:
            piece = os.pread(fd, min(HASH_CHUNK, size - at), at)
            if not piece:
                break
            digest.update(piece)
            at += len(piece)
            self.bytes_read += len(piece)
            if time.monotonic() > self.deadline:
                raise _Deadline()
        return digest.hexdigest()


def object_key(mapped: Any) -> str:
    """The objects table's key of a mapped file: its path, marked when the file was deleted."""
    path = str(mapped.path)
    return path + " (deleted)" if mapped.deleted else path


def object_version(path: str, soname: Optional[str], owner: Dict[str, Any]) -> Tuple[Optional[str], str]:
    """(version, where it came from): the file name's, when it says more than the soname
    (libnccl.so.2.18.3 for soname libnccl.so.2); else the owner's; else the file name's."""
    in_file = _FILE_VERSION.search(os.path.basename(path))
    in_soname = _FILE_VERSION.search(soname or "")
    if in_file and (not in_soname or len(in_file.group(1)) > len(in_soname.group(1))):
        return in_file.group(1), "file name"
    if owner.get("version"):
        return str(owner["version"]), str(owner.get("kind"))
    if in_file:
        return in_file.group(1), "file name"
    return None, ""


def mentions(names_by_object: Dict[str, str], candidates: Set[str]) -> Dict[str, Tuple[List[str], List[str]]]:
    """{object key: (candidates it names as a whole literal, candidates that only end a longer one)},
    from each object's names as one space-separated string (as the cache keeps them).

    The exact test is a set intersection per object; the tail test runs only for the candidates no
    object names exactly, as one substring search each over all objects' names (then per object
    for the rare hit)."""
    out: Dict[str, Tuple[List[str], List[str]]] = {}
    named: Set[str] = set()
    for key, names in names_by_object.items():
        exact = candidates.intersection(names.split())
        named |= exact
        out[key] = (sorted(exact), [])
    rest = [c for c in candidates if c not in named]
    if rest:
        padded = {key: " " + names + " " for key, names in names_by_object.items()}
        everything = "".join(padded.values())
        for candidate in rest:
            needle = candidate + " "
            if needle in everything:
                for key, text in padded.items():
                    if needle in text:
                        out[key][1].append(candidate)
    for key in out:
        out[key][1].sort()
    return out


def objects_of(files: List[Any], describer: Describer, objects: Dict[str, Dict[str, Any]]) -> Tuple[Dict[str, str], int]:
    """The process's {name: object key} (describing objects not described yet) and its count of
    mapped files that are not ELF objects."""
    named: Dict[str, str] = {}
    other = 0
    for mapped in files:
        key = object_key(mapped)
        if key in describer.non_elf:
            other += 1
            continue
        entry = objects.get(key)
        if entry is None:
            entry = describer.describe(mapped)
            if entry is None:
                other += 1
                continue
            objects[key] = entry
        name = entry.get("name") or os.path.basename(mapped.path)
        unique, n = name, 1
        while unique in named:
            n += 1
            unique = f"{name}#{n}"
        named[unique] = key
    return dict(sorted(named.items())), other
