"""Installed Python distributions, read from their metadata without importing them.

Shared by the packages collector (versions, origins, RECORD integrity) and the git
collector (editable installs' source checkouts).
"""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, Iterator, List, Optional, Tuple
from urllib.parse import unquote, urlparse

from envsnap.model.names import canonical_name

# importlib.metadata and the email parser (with zipfile, socket, ...) are imported where they are used:
# the packages and git collectors import this module, and every command that reads the collectors'
# declarations (diff, show) imports those.


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
    from importlib import metadata as importlib_metadata

    for dist in importlib_metadata.distributions(path=path):
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
        if local and os.path.isdir(local):
            found[canonical_name(dist.metadata["Name"])] = local
    return dict(sorted(found.items()))
