"""Plain-data helpers of a snapshot: the schema version, a new empty snapshot, a section's
data, the flattened key space ("<section>.<path>") that the field rules match, and the
UTC timestamps snapshots carry."""
from __future__ import annotations

import datetime
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

from envsnap import __version__

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
SECTION_STATUSES = ("ok", "unavailable", "error", "timeout")


def as_dict(value: Any) -> Dict[str, Any]:
    """A mapping field, or {} where a snapshot (written by another version, or by hand) holds something else."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> List[Any]:
    """A list field, or [] where a snapshot holds something else."""
    return value if isinstance(value, list) else []


def number(value: Any) -> Optional[float]:
    """A numeric field as a float, or None for anything else (a bool too: JSON's true is not a count)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def section_data(snapshot: Mapping[str, Any], name: str) -> Dict[str, Any]:
    """The data of a section, or {} when the section is absent or not ok."""
    section = snapshot.get("sections", {}).get(name) or {}
    data = section.get("data")
    return data if isinstance(data, dict) else {}


def flatten(snapshot: Dict[str, Any]) -> Dict[str, Any]:
    """Flatten sections to {"<section>.<path>": scalar}; lists keep their index as a path part.

    `sections.X.data.a.b` becomes `X.a.b`; `sections.X.status` becomes `X.status`.
    The key parts are joined with '.', so a part that itself holds dots (a file name)
    stays readable: `packages.dists.torch.version`, `files.entries./a/b.py.sha256`.
    """
    flat: Dict[str, Any] = {}
    for name, section in sorted(snapshot.get("sections", {}).items()):
        flat[f"{name}.status"] = section.get("status")
        for path, value in _walk(section.get("data", {}), (name,)):
            flat[".".join(path)] = value
    return flat


def _walk(obj: Any, prefix: Tuple[str, ...]) -> Iterator[Tuple[Tuple[str, ...], Any]]:
    if isinstance(obj, dict):
        if not obj:
            yield prefix, {}
        for key in sorted(obj, key=str):
            yield from _walk(obj[key], prefix + (str(key),))
    elif isinstance(obj, list):
        if not obj:
            yield prefix, []
        for index, item in enumerate(obj):
            yield from _walk(item, prefix + (str(index),))
    else:
        yield prefix, obj


def new_snapshot(label: Optional[str], host: str, created: str) -> Dict[str, Any]:
    return {
        "schema_version": SCHEMA_VERSION,
        "envsnap_version": __version__,
        "created": created,
        "label": label or "",
        "host": host,
        "sections": {},
        "runs": [],
    }


def utc_now() -> str:
    """An ISO 8601 UTC timestamp with microseconds, as snapshots and runs record it."""
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
