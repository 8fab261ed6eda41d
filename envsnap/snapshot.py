"""The snapshot file: plain JSON data, versioned, written atomically, loaded with validation.

This is the only module that reads or writes snapshot files. A snapshot is a dict:

    {"schema_version": 1, "envsnap_version": "...", "created": "...Z", "label": "...",
     "host": "<hostname>", "sections": {"<collector>": {"status": ..., "data": {...}}},
     "runs": [...]}

Same input gives byte-identical output: keys are sorted, collectors sort their lists.
"""
from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from typing import Any, Dict, Iterator, Optional, Tuple

from envsnap import __version__
from envsnap.errors import EnvsnapError

SCHEMA_VERSION = 1
SUPPORTED_SCHEMA_VERSIONS = (1,)
SECTION_STATUSES = ("ok", "unavailable", "error", "timeout")
# A snapshot over this size is not something envsnap wrote: refuse instead of exhausting memory.
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024


def dumps(snapshot: Dict[str, Any]) -> str:
    """Canonical JSON text: sorted keys, 1-space indent, trailing newline."""
    return json.dumps(snapshot, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False, default=_json_default) + "\n"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return sorted(obj, key=repr)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return repr(obj)


def atomic_write_text(path: str, text: str, force: bool = False) -> None:
    """Write text to path atomically (temp file in the same dir + fsync + rename).

    `-` writes stdout. An existing file is kept unless force is set; on any failure
    the old file (if any) is intact and no temp file is left behind.
    """
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    path = os.path.abspath(path)
    if os.path.isdir(path):
        raise EnvsnapError(f"{path} is a directory")
    if os.path.lexists(path) and not force:
        raise EnvsnapError(f"{path} exists; use --force to overwrite it")
    directory = os.path.dirname(path)
    if not os.path.isdir(directory):
        raise EnvsnapError(f"directory {directory} does not exist")
    data = text.encode("utf-8", "surrogateescape")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".envsnap-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise EnvsnapError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if not force and os.path.lexists(path):
            raise EnvsnapError(f"{path} exists; use --force to overwrite it")
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise EnvsnapError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    try:  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def save(snapshot: Dict[str, Any], path: str, force: bool = False) -> None:
    atomic_write_text(path, dumps(snapshot), force=force)


def _reject_duplicates(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"duplicate key {key!r}")
        out[key] = value
    return out


def _reject_constant(name: str):
    raise ValueError(f"invalid number {name}")


def parse(text: str, source: str = "<input>") -> Dict[str, Any]:
    """Parse and validate snapshot text; raise EnvsnapError naming what is wrong."""
    if not text.strip():
        raise EnvsnapError(f"{source}: empty file, not a snapshot")
    try:
        data = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise EnvsnapError(f"{source}: not a snapshot (JSON nested too deeply)") from None
    except ValueError as exc:
        msg = str(exc).splitlines()[0][:200]
        hint = " (truncated?)" if "Expecting" in msg or "Unterminated" in msg else ""
        raise EnvsnapError(f"{source}: not valid JSON{hint}: {msg}") from None
    return validate(data, source)


def validate(data: Any, source: str = "<input>") -> Dict[str, Any]:
    if not isinstance(data, dict):
        raise EnvsnapError(f"{source}: not a snapshot (top level is {type(data).__name__}, expected an object)")
    if "schema_version" not in data:
        raise EnvsnapError(f"{source}: not an envsnap snapshot (no schema_version)")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise EnvsnapError(f"{source}: schema_version must be an integer, got {_short(version)}")
    if version not in SUPPORTED_SCHEMA_VERSIONS:
        supported = ", ".join(str(v) for v in SUPPORTED_SCHEMA_VERSIONS)
        raise EnvsnapError(
            f"{source}: schema_version {version} is not supported by envsnap {__version__} (reads {supported})"
        )
    sections = data.get("sections", {})
    if not isinstance(sections, dict):
        raise EnvsnapError(f"{source}: 'sections' must be an object")
    for name, section in sections.items():
        if not isinstance(section, dict):
            raise EnvsnapError(f"{source}: section {_short(name)} must be an object")
        status = section.get("status")
        if status not in SECTION_STATUSES:
            raise EnvsnapError(f"{source}: section {_short(name)} has invalid status {_short(status)}")
        if "data" in section and not isinstance(section["data"], dict):
            raise EnvsnapError(f"{source}: section {_short(name)} data must be an object")
    for key in ("label", "host", "created"):
        if key in data and data[key] is not None and not isinstance(data[key], str):
            raise EnvsnapError(f"{source}: '{key}' must be a string")
    runs = data.get("runs", [])
    if not isinstance(runs, list) or not all(isinstance(r, dict) for r in runs):
        raise EnvsnapError(f"{source}: 'runs' must be a list of objects")
    for run in runs:
        metrics = run.get("metrics", {})
        if not isinstance(metrics, dict):
            raise EnvsnapError(f"{source}: a run's 'metrics' must be an object")
        for name, value in metrics.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise EnvsnapError(f"{source}: metric {_short(name)} must be a finite number, got {_short(value)}")
    return data


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load(path: str) -> Dict[str, Any]:
    """Read and validate a snapshot file (`-` reads stdin)."""
    source = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            raw = sys.stdin.buffer.read(MAX_SNAPSHOT_BYTES + 1)
        else:
            if os.path.isdir(path):
                raise EnvsnapError(f"{path}: is a directory, not a snapshot file")
            with open(path, "rb") as handle:
                raw = handle.read(MAX_SNAPSHOT_BYTES + 1)
    except FileNotFoundError:
        raise EnvsnapError(f"{source}: no such file") from None
    except OSError as exc:
        raise EnvsnapError(f"{source}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_SNAPSHOT_BYTES:
        raise EnvsnapError(f"{source}: larger than {MAX_SNAPSHOT_BYTES >> 20} MiB, not a snapshot")
    if b"\x00" in raw:
        raise EnvsnapError(f"{source}: binary data (NUL bytes), not a snapshot")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvsnapError(f"{source}: not UTF-8 text (byte {exc.start}), not a snapshot") from None
    return parse(text, source)


def section_data(snapshot: Dict[str, Any], name: str) -> Dict[str, Any]:
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


def check_writable(path: str, force: bool) -> None:
    """Fail early (before a long capture) when `path` could not be written."""
    if path == "-":
        return
    full = os.path.abspath(path)
    if os.path.isdir(full):
        raise EnvsnapError(f"{path} is a directory")
    if os.path.lexists(full) and not force:
        raise EnvsnapError(f"{path} exists; use --force to overwrite it")
    directory = os.path.dirname(full)
    if not os.path.isdir(directory):
        raise EnvsnapError(f"directory {directory} does not exist")
    if not os.access(directory, os.W_OK):
        raise EnvsnapError(f"cannot write in {directory}: permission denied")
