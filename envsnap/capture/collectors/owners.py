"""Who installed a shared object: a Python distribution's RECORD, a dpkg package, or nobody known.

- A distribution: the nearest ancestor of the file named site-packages or dist-packages is its site
  directory; the RECORD of each `*.dist-info` there lists the files that distribution installed
  (PEP 376 / the "Recording installed projects" specification), relative to that directory. The
  distribution's name and version are those of its `<name>-<version>.dist-info` directory (the
  binary distribution format escapes '-' in both, so the first '-' separates them), the name
  normalised as the packages section keys it (PEP 503).
- A system package: dpkg's file lists, /var/lib/dpkg/info/<package>[:<arch>].list, one installed
  path a line, and its version from the stanza of /var/lib/dpkg/status (deb-control(5) fields
  Package, Architecture, Version). A listed path is compared through its directory's real path
  (on a merged-/usr system dpkg lists /lib/x86_64-linux-gnu/libc.so.6, the process maps
  /usr/lib/x86_64-linux-gnu/libc.so.6).
- Else unknown (a conda environment, an rpm system, a library built by hand, `pip install --target`).

Both indexes keep only what can be mapped (names holding ".so", and executables under bin/ and
sbin/) and are cached (libcache.py) under the identities of the files they were read from: the
RECORDs of a site directory, dpkg's info directory and status file. A warm capture lists a site
directory and stats its RECORDs; it reads none of them.
"""
from __future__ import annotations

import hashlib
import os
from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.capture import libcache
from envsnap.model.names import canonical_name

SITE_DIR_NAMES = ("site-packages", "dist-packages")
DPKG_INFO = "/var/lib/dpkg/info"
DPKG_STATUS = "/var/lib/dpkg/status"
MAX_RECORD_BYTES = 64 << 20
MAX_DPKG_LIST_BYTES = 256 << 20  # all .list files together


def mappable(path: str) -> bool:
    """Whether an installed path can be a mapped object: a shared object or an executable."""
    name = os.path.basename(path)
    return ".so" in name or os.path.basename(os.path.dirname(path)) in ("bin", "sbin")


def site_dir_of(path: str) -> Optional[str]:
    """The nearest ancestor named site-packages / dist-packages, or None."""
    parent = os.path.dirname(path)
    while parent and parent != os.path.dirname(parent):
        if os.path.basename(parent) in SITE_DIR_NAMES:
            return parent
        parent = os.path.dirname(parent)
    return None


def _dist_of(info_dir: str) -> Tuple[str, str]:
    stem = info_dir[:-len(".dist-info")]
    name, _, version = stem.partition("-")
    return canonical_name(name), version


def _record_paths(site: str, text: str) -> List[str]:
    """The mappable paths a RECORD lists, absolute."""
    import csv

    prefix = site.rstrip(os.sep) + os.sep
    out = []
    for line in text.splitlines():
        if ".so" not in line and "bin/" not in line:
            continue
        row = next(csv.reader([line]), None) if line.startswith('"') else line.split(",", 1)
        if not row or not row[0]:
            continue
        rel = row[0]
        path = os.path.normpath(rel if rel.startswith("/") else prefix + rel)
        if mappable(path):
            out.append(path)
    return out


class Owners:
    """Owner lookups for one capture, through the cache's site and dpkg indexes."""

    def __init__(self, cache: libcache.LibCache) -> None:
        self.cache = cache
        self._sites: Dict[str, Dict[str, List[str]]] = {}
        self._dpkg: Optional[Dict[str, List[str]]] = None
        self.notes: Dict[str, str] = {}

    def owner_of(self, path: str) -> Dict[str, Any]:
        site = site_dir_of(path)
        if site is not None:
            found = self._site_index(site).get(path)
            if found:
                return {"kind": "distribution", "name": found[0], "version": found[1]}
        found = self._dpkg_index().get(path)
        if found:
            return {"kind": "package", "manager": "dpkg", "name": found[0], "version": found[1]}
        return {"kind": "unknown"}

    # ------------------------------------------------------------ distributions

    def _site_index(self, site: str) -> Dict[str, List[str]]:
        known = self._sites.get(site)
        if known is not None:
            return known
        try:
            infos = sorted(n for n in os.listdir(site) if n.endswith(".dist-info"))
        except OSError as exc:
            self.notes[site] = f"site directory unreadable: {exc.strerror or exc}"
            self._sites[site] = {}
            return {}
        stats: List[Tuple[str, os.stat_result]] = []
        for name in infos:
            try:
                stats.append((name, os.stat(os.path.join(site, name, "RECORD"))))
            except OSError:
                continue  # no RECORD (an installer that writes none): it owns nothing we can name
        ident = hashlib.sha256("\n".join(f"{n} {libcache.identity(st)}" for n, st in stats)
                               .encode("utf-8", "surrogateescape")).hexdigest()
        cached = self.cache.get(libcache.SITES, site, ident)
        if isinstance(cached, dict):
            self._sites[site] = cached
            return cached
        index: Dict[str, List[str]] = {}
        newest = 0
        for name, st in stats:
            newest = max(newest, st.st_mtime_ns, st.st_ctime_ns)
            if st.st_size > MAX_RECORD_BYTES:
                self.notes[os.path.join(site, name)] = "RECORD larger than 64 MiB: not read"
                continue
            try:
                with open(os.path.join(site, name, "RECORD"), encoding="utf-8", errors="surrogateescape") as handle:
                    text = handle.read(MAX_RECORD_BYTES)
            except OSError:
                continue
            dist, version = _dist_of(name)
            for path in _record_paths(site, text):
                index.setdefault(path, [dist, version])
        self.cache.put(libcache.SITES, site, ident, index, newest)
        self._sites[site] = index
        return index

    # ------------------------------------------------------------ dpkg

    def _dpkg_index(self) -> Dict[str, List[str]]:
        if self._dpkg is not None:
            return self._dpkg
        try:
            info_st, status_st = os.stat(DPKG_INFO), os.stat(DPKG_STATUS)
        except OSError:
            self._dpkg = {}
            return self._dpkg
        ident = libcache.identity(info_st) + libcache.identity(status_st)
        cached = self.cache.get(libcache.DPKG, DPKG_INFO, ident)
        if isinstance(cached, dict):
            self._dpkg = cached
            return cached
        index = build_dpkg_index(DPKG_INFO, DPKG_STATUS)
        self.cache.put(libcache.DPKG, DPKG_INFO, ident, index,
                       max(info_st.st_mtime_ns, info_st.st_ctime_ns, status_st.st_mtime_ns, status_st.st_ctime_ns))
        self._dpkg = index
        return index


def _dpkg_versions(status_path: str) -> Dict[str, str]:
    """{"package" and "package:arch": version} of the installed packages (deb-control(5) stanzas)."""
    versions: Dict[str, str] = {}
    try:
        with open(status_path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return versions
    for stanza in text.split("\n\n"):
        fields: Dict[str, str] = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t"):
                continue
            name, _, value = line.partition(":")
            if name in ("Package", "Architecture", "Version"):
                fields[name] = value.strip()
        if "Package" in fields and "Version" in fields:
            versions.setdefault(fields["Package"], fields["Version"])
            if "Architecture" in fields:
                versions[f"{fields['Package']}:{fields['Architecture']}"] = fields["Version"]
    return versions


def _candidate_lines(data: bytes) -> Set[bytes]:
    """The lines of a .list file holding ".so" or "bin/": found with bytes.find (a regex over every
    line of every list cost 5x more: dpkg lists ~120,000 paths on a plain Debian box)."""
    out: Set[bytes] = set()
    for needle in (b".so", b"bin/"):
        at = data.find(needle)
        while at >= 0:
            start = data.rfind(b"\n", 0, at) + 1
            end = data.find(b"\n", at)
            if end < 0:
                end = len(data)
            out.add(data[start:end])
            at = data.find(needle, end)
    return out


def build_dpkg_index(info_dir: str, status_path: str) -> Dict[str, List[str]]:
    """{real path: [package, version]} of the mappable files dpkg's lists name."""
    versions = _dpkg_versions(status_path)
    index: Dict[str, List[str]] = {}
    real_dirs: Dict[str, str] = {}
    budget = MAX_DPKG_LIST_BYTES
    try:
        names = sorted(n for n in os.listdir(info_dir) if n.endswith(".list"))
    except OSError:
        return index
    for name in names:
        package = name[:-len(".list")]
        try:
            with open(os.path.join(info_dir, name), "rb") as handle:
                data = handle.read(budget)
        except OSError:
            continue
        budget -= len(data)
        owner = [package.partition(":")[0], versions.get(package) or versions.get(package.partition(":")[0], "")]
        for raw in _candidate_lines(data):
            line = raw.decode("utf-8", "surrogateescape")
            if not line.startswith("/") or not mappable(line):
                continue
            directory, base = os.path.split(line)
            real = real_dirs.get(directory)
            if real is None:
                real = real_dirs[directory] = os.path.realpath(directory)
            index.setdefault(os.path.join(real, base), owner)
        if budget <= 0:
            break
    return index
