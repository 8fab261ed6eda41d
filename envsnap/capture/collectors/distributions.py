"""Installed Python distributions, read from their metadata without importing them.

Shared by the packages collector (versions, origins, RECORD integrity), the git collector
(editable installs' source checkouts), the torch collector (torch's version and the nvidia-*
libraries it requires) and the nvidia collector (nvidia-ml-py's version).

Finding them (`find`) is importlib.metadata's own discovery, done here without importing
importlib.metadata: that import pulls in the email package, zipfile, csv and importlib.abc
(~30-45 ms of CPU; with every collector in one process and the GIL between them, a tenth of a
warm capture). It is the same search step for step (CPython 3.10-3.13
Lib/importlib/metadata/__init__.py, identical in those versions: `MetadataPathFinder._search_paths`,
`FastPath`, `Lookup`, `Prepared`): each path entry is listed; every `*.dist-info` and `*.egg-info`
child is taken, grouped by the normalised name before its first '-' in the order the names first
appear, and each yields a `PathDist` over `pathlib.Path(entry, child)`, whose read_text and
locate_file are PathDistribution's. importlib.metadata itself is used, unchanged, for all
that is rarer: a path entry that is a zip file or an `.egg`, or cannot be listed but exists, a
Python whose discovery was not checked to be the same (3.9, later than 3.13), and a process
with another finder that declares distributions (`find_distributions` on sys.meta_path besides
PathFinder's). tests/capture/test_distributions.py compares the two on real layouts (duplicates,
case, egg-info files, eggs, zips, missing entries, the current directory). Unlike
importlib.metadata, nothing is cached between calls: a long-lived process (`run`, `bisect`) sees
a directory's current listing, where importlib.metadata's (kept per directory mtime) can be stale
when it changed twice within one timestamp tick.

A header of a distribution's metadata (Version, Requires-Dist, Name) is read by `header`, the
email parser's answer (policy compat32, as `dist.metadata[...]`) for a header block it reads the
same way, else the email parser's own.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple

from envsnap.model.names import canonical_name

# importlib.metadata and the email parser (with zipfile, socket, ...) are imported only for what
# `find` hands back to them; pathlib where a distribution is found: the packages and git collectors
# import this module, and every command that reads the collectors' declarations (diff, show)
# imports those.

# The Pythons whose importlib.metadata discovery `find` reproduces (see above).
_SAME_DISCOVERY = (3, 10) <= sys.version_info[:2] <= (3, 13)
_INFO_SUFFIXES = (".dist-info", ".egg-info")


class PathDist:
    """One distribution's metadata directory (or legacy egg-info file): what envsnap reads of
    importlib.metadata.PathDistribution, with its semantics (`_path` a pathlib.Path; read_text
    None for an absent or unreadable file; locate_file relative to the directory's parent).
    What needs the whole metadata (`metadata`, `requires` of an egg-info) is asked of a real
    PathDistribution over the same path."""

    __slots__ = ("_path",)

    def __init__(self, path: Any) -> None:
        self._path = path

    def read_text(self, filename: str) -> Optional[str]:
        try:
            text: str = self._path.joinpath(filename).read_text(encoding="utf-8")
            return text
        except (FileNotFoundError, IsADirectoryError, KeyError, NotADirectoryError, PermissionError):
            return None

    def locate_file(self, path: Any) -> Any:
        return self._path.parent / path

    def _real(self) -> Any:
        from importlib import metadata as importlib_metadata

        return importlib_metadata.PathDistribution(self._path)

    @property
    def metadata(self) -> Any:
        return self._real().metadata

    @property
    def version(self) -> Optional[str]:
        """`Distribution.version`: the Version header."""
        return header(self, "Version")

    @property
    def requires(self) -> Optional[List[str]]:
        """`Distribution.requires`: the Requires-Dist headers, else (an egg-info) requires.txt."""
        values = headers(self, "Requires-Dist")
        if values:
            return values
        if self.read_text("requires.txt") is None:
            return None  # importlib.metadata: no Requires-Dist and no requires.txt is None
        requires: Optional[List[str]] = self._real().requires
        return requires

    def __repr__(self) -> str:
        return f"PathDist({str(self._path)!r})"


def _normalize(name: str) -> str:
    """importlib.metadata's Prepared.normalize: PEP 503 normalisation plus dashes as underscores."""
    import re

    return re.sub(r"[-_.]+", "-", name).lower().replace("-", "_")


def _same_finders() -> bool:
    """Whether importlib.metadata would ask PathFinder alone (no other finder on sys.meta_path
    declares distributions)."""
    import importlib.machinery

    finders = [finder for finder in sys.meta_path if getattr(finder, "find_distributions", None) is not None]
    return len(finders) == 1 and finders[0] is importlib.machinery.PathFinder


def find(path: List[str], name: Optional[str] = None,
         listings: Optional[Dict[str, Optional[Dict[str, List[str]]]]] = None) -> Iterator[Any]:
    """What `importlib.metadata.distributions(path=path[, name=name])` yields, in its order.
    `listings`: a dict kept by a caller that looks up many names at once, so that each path
    entry is listed once among them (importlib.metadata keeps its listings per directory mtime)."""
    if not (_SAME_DISCOVERY and _same_finders()):
        yield from _importlib_find(path, name)
        return
    import pathlib

    wanted = _normalize(name) if name else None
    for root in path:
        if listings is None:
            found = _listed(root)
        else:
            if root not in listings:
                listings[root] = _listed(root)
            found = listings[root]
        if found is None:
            yield from _importlib_find([root], name)
            continue
        groups = found.values() if wanted is None else [found.get(wanted, [])]
        for group in groups:
            for child in group:
                yield PathDist(pathlib.Path(root, child))


def _listed(root: str) -> Optional[Dict[str, List[str]]]:
    """importlib.metadata's Lookup of one path entry ({normalised name: metadata directory names}),
    or None where importlib.metadata must answer (a zip or .egg, an entry it lists otherwise)."""
    if not isinstance(root, str) or os.path.basename(root).lower().endswith(".egg"):
        return None
    try:
        children = os.listdir(root or ".")  # "": the current directory, its children relative paths
    except Exception:
        # importlib.metadata then reads it as a zip file: a file, or nothing at all.
        return {} if not os.path.lexists(root) else None
    groups: Dict[str, List[str]] = {}
    for child in children:
        low = child.lower()
        if low.endswith(_INFO_SUFFIXES):
            key = low.rpartition(".")[0].partition("-")[0]
            if "." in key or "__" in key or not key.isascii():  # else already normalised (lower, no '-')
                key = _normalize(key)
            groups.setdefault(key, []).append(child)
    return groups


def _importlib_find(path: List[str], name: Optional[str]) -> Iterator[Any]:
    from importlib import metadata as importlib_metadata

    if name:
        yield from importlib_metadata.distributions(name=name, path=path)
    else:
        yield from importlib_metadata.distributions(path=path)


def first(name: str, path: List[str], listings: Optional[Dict[str, Any]] = None) -> Any:
    """`Distribution.from_name` on `path`: the first distribution of that name, or None."""
    for dist in find(path, name, listings):
        return dist
    return None


# --- headers --------------------------------------------------------------------------------

def headers(dist: Any, name: str) -> Optional[List[str]]:
    """`dist.metadata.get_all(name)`: every value of a header of the distribution's metadata
    (METADATA, else PKG-INFO), None when there is none, as the email parser gives it.

    Read here without the email package when the header block is plain: each line up to the
    first empty one is `Name: value`, its name printable ASCII without ':' or blanks (so no
    `From ` line) and no line folded onto the next (none begins with a blank). The parser then
    gives each value as the text after the first colon without its leading blanks
    (email/feedparser.py `_parse_headers`; email/_policybase.py Compat32.header_source_parse and
    header_fetch_parse: the policy of `email.message_from_string`, which `Distribution.metadata`
    uses); read_text's universal newlines leave no CR. Anything else is the parser's to read, and
    so is Description (importlib.metadata adds the message body to it: _adapters.Message).
    """
    if not isinstance(dist, PathDist) or name.lower() == "description":
        parsed: Optional[List[str]] = dist.metadata.get_all(name)
        return parsed
    found = _plain_headers(dist.read_text("METADATA") or dist.read_text("PKG-INFO") or "")
    if found is None:
        fallback: Optional[List[str]] = dist.metadata.get_all(name)
        return fallback
    wanted = name.lower()
    values = [value for key, value in found if key.lower() == wanted]
    return values or None


def header(dist: Any, name: str) -> Optional[str]:
    """`dist.metadata[name]`: the first value of a header, or None."""
    values = headers(dist, name)
    return values[0] if values else None


def _plain_headers(text: str) -> Optional[List[Tuple[str, str]]]:
    """(name, value) of each header of a plain header block (see `headers`), else None."""
    if not text or "\r" in text:
        return None  # no METADATA nor PKG-INFO (a legacy egg-info file), or CR line ends
    if text.startswith("\n"):
        return []  # an empty header block
    end = text.find("\n\n")
    if end < 0:
        block = text[:-1] if text.endswith("\n") else text
    else:
        block = text[:end]
    found = []
    for line in block.split("\n"):
        key, colon, value = line.partition(":")
        if not colon or not key or not key.isascii() or not key.isprintable() or " " in key:
            return None  # a folded or unnamed line, a name the parser reads otherwise
        found.append((key, value.lstrip(" \t")))
    return found


def iter_distributions(path: Optional[List[str]] = None) -> Iterator[Any]:
    """Every distribution on `path` (default sys.path), first one wins per name like pip.

    The current directory ('' on sys.path under `python -m`) is left out: it is where
    envsnap was started from, not part of the environment being recorded (a source
    checkout's stray `*.egg-info` would otherwise shadow the real install).
    """
    for dist, _, _ in iter_named(path):
        yield dist


def iter_named(path: Optional[List[str]] = None) -> Iterator[Tuple[Any, str, Optional[str]]]:
    """(distribution, Name, Version) for every distribution iter_distributions yields: the
    metadata read once for both the dedup and the caller."""
    seen = set()
    if path is None:
        path = [p for p in sys.path if p and os.path.abspath(p) != os.getcwd()]
    for dist in find(path):
        name, version = name_and_version(dist)
        if not name:
            continue
        key = canonical_name(name)
        if key in seen:
            continue
        seen.add(key)
        yield dist, name, version


# Name and Version are the first headers of METADATA (core metadata spec); this much of the
# file holds them whatever follows (the long description can be hundreds of KB).
_HEAD_BYTES = 16 << 10


def _metadata_head(dist: Any) -> Optional[str]:
    """The header block of METADATA (or PKG-INFO) read from a plain directory, or None (a
    zipped egg, a custom finder, a header block longer than _HEAD_BYTES: read it whole)."""
    base = metadata_dir(dist)
    if not base:
        return None
    for name in ("METADATA", "PKG-INFO"):
        try:
            with open(os.path.join(base, name), "rb") as handle:
                data = handle.read(_HEAD_BYTES)
        except FileNotFoundError:
            continue
        except OSError:
            return None
        if not data:
            continue  # an empty METADATA: PKG-INFO, as importlib.metadata would
        text = data.decode("utf-8", "replace").replace("\r\n", "\n")
        end = text.find("\n\n")
        if end >= 0:
            return text[:end + 1]
        return text if len(data) < _HEAD_BYTES else None
    return None


def name_and_version(dist: Any) -> Tuple[Optional[str], Optional[str]]:
    """(Name, Version) from the metadata's header block only.

    `dist.metadata` runs the email parser over the whole file, long description
    included (torch's is 30 KB), and `dist.version` parses it again: with hundreds of
    distributions that is a large share of a capture. Name and Version are one-line
    headers at the top (core metadata spec), so a scan of the header block up to the
    first blank line finds them; the email parser is used only when that scan fails
    (folded or encoded headers).
    """
    text = _metadata_head(dist)
    if text is None:
        try:
            text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
        except Exception:
            return None, None
        text = text.replace("\r\n", "\n").split("\n\n", 1)[0]
    found: Dict[str, str] = {}
    for line in text.split("\n"):
        if not line.strip():
            break
        key, sep, value = line.partition(":")
        if sep and key in ("Name", "Version") and key not in found:
            found[key] = value.strip()
            if len(found) == 2:
                break
    if len(found) < 2 or not all(found.values()):
        from email.parser import HeaderParser

        headers = HeaderParser().parsestr(text.replace("\r\n", "\n").split("\n\n", 1)[0])
        for key in ("Name", "Version"):
            if not found.get(key) and headers.get(key):
                found[key] = str(headers.get(key)).strip()
    return found.get("Name") or None, found.get("Version") or None


def metadata_dir(dist: Any) -> Optional[str]:
    """The dist-info/egg-info directory (importlib.metadata keeps it in a private `_path`)."""
    path = getattr(dist, "_path", None)
    return str(path) if path is not None else None


def direct_url(dist: Any) -> Optional[Dict[str, Any]]:
    """The parsed direct_url.json (PEP 610) of a distribution, or None."""
    try:
        text = dist.read_text("direct_url.json")
    except Exception:
        return None
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def local_path_of_url(url: str) -> Optional[str]:
    from urllib.parse import unquote, urlparse  # here: a snapshot reader imports this module, never calls this

    parsed = urlparse(url)
    if parsed.scheme != "file":
        return None
    return unquote(parsed.path)


def editable_source_dirs(path: Optional[List[str]] = None) -> Dict[str, str]:
    """{distribution name: source directory} for every editable (pip -e) install."""
    found: Dict[str, str] = {}
    for dist in iter_distributions(path):
        info = direct_url(dist)
        if not info or not (info.get("dir_info") or {}).get("editable"):
            continue
        local = local_path_of_url(str(info.get("url", "")))
        name = header(dist, "Name")  # what dist.metadata["Name"] is
        if name and local and os.path.isdir(local):
            found[canonical_name(name)] = local
    return dict(sorted(found.items()))
