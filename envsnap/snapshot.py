"""The snapshot file: plain JSON data, versioned, written atomically, loaded with validation.

This is the only module that reads or writes snapshot files. A snapshot is a dict:

    {"schema_version": 1, "envsnap_version": "...", "created": "...Z", "label": "...",
     "host": "<hostname>", "sections": {"<collector>": {"status": ..., "data": {...}}},
     "runs": [...]}

Same input gives byte-identical output: keys are sorted, collectors sort their lists.
"""
from __future__ import annotations

import errno
import json
import math
import os
import re
import stat
import sys
import tempfile
from typing import Any, Dict, Iterator, List, Optional, Tuple

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
    """Write text to path atomically: a temp file in the same dir, fsync, then rename.

    `-` writes stdout. An existing file is kept unless force is set; on any failure the
    old file (if any) is intact and no temp file is left behind. The temp file is an
    anonymous O_TMPFILE where the filesystem has them: it gets a name only for the
    instant between link and rename, so even a kill -9 mid-write leaves nothing.
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
    fd, tmp = _write_temp(directory, data)
    try:
        _give_final_mode(fd, path)
        if not force and os.path.lexists(path):
            raise EnvsnapError(f"{path} exists; use --force to overwrite it")
        if tmp is None:
            tmp = _link_anonymous(fd, directory)
        os.replace(tmp, path)
        tmp = None
    except BaseException as exc:
        if isinstance(exc, OSError):
            raise EnvsnapError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    finally:
        os.close(fd)
        if tmp is not None:
            _unlink_quietly(tmp)
    try:  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def _unlink_quietly(path: str) -> None:
    """Remove a temp file on the way out of a failed write; its absence is fine."""
    try:
        os.unlink(path)
    except OSError:
        pass


def _process_umask() -> int:
    """The umask, read without changing it (os.umask sets it, racing with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _give_final_mode(fd: int, path: str) -> None:
    """Temp files are created 0600; the result gets what a plain open() would have given it:
    the replaced file's mode, or 0666 minus the umask (a report is meant to be shared)."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~_process_umask()
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass  # a filesystem without modes: keep what it gave


def _write_temp(directory: str, data: bytes) -> Tuple[int, Optional[str]]:
    """(open fd, temp name or None for an anonymous file) holding `data`, fsynced."""
    fd, tmp = -1, None
    anonymous = getattr(os, "O_TMPFILE", 0)
    if anonymous:
        try:
            fd = os.open(directory, anonymous | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            # Not supported by this kernel or filesystem: a named temp file instead.
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP):
                raise EnvsnapError(f"cannot write in {directory}: {exc.strerror or exc}") from None
            fd = -1
    if fd < 0:
        try:
            fd, tmp = tempfile.mkstemp(prefix=".envsnap-", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise EnvsnapError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        if tmp is not None:
            _unlink_quietly(tmp)
        if isinstance(exc, OSError):
            where = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))
            raise EnvsnapError(f"cannot write in {directory}: {where}") from None
        raise
    return fd, tmp


def _link_anonymous(fd: int, directory: str) -> str:
    """Give an O_TMPFILE file a (hidden, temporary) name next to its destination."""
    # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N, the way open(2) documents; passing a
    # src_dir_fd makes Python call linkat (plain link() would link the /proc symlink itself).
    proc_fd = os.open("/proc/self/fd", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for _ in range(100):
            name = os.path.join(directory, f".envsnap-{os.getpid()}-{os.urandom(4).hex()}.tmp")
            try:
                os.link(str(fd), name, src_dir_fd=proc_fd, follow_symlinks=True)
                return name
            except FileExistsError:
                continue
    finally:
        os.close(proc_fd)
    raise OSError(errno.EEXIST, "no free temporary name")


def save(snapshot: Dict[str, Any], path: str, force: bool = False) -> None:
    """Write a snapshot atomically. Unless it says redaction is off, every part outside the
    sections (runs, labels, notes: added after the capture's scrub) is scrubbed once more,
    so a secret cannot reach the file by a path that forgot to redact."""
    from envsnap.redact import scrub

    # Without redaction the scrub still turns undecodable bytes (an `attach --note` or a
    # `--label` given in a non-UTF-8 locale) into \xNN text: the file must stay UTF-8.
    redact = snapshot.get("redaction") != "off"
    snapshot = {key: (value if key in ("sections", "nodes") else scrub(value, redact=redact))
                for key, value in snapshot.items()}
    atomic_write_text(path, dumps(snapshot), force=force)


def _reject_duplicates(pairs):
    out = dict(pairs)
    if len(out) != len(pairs):  # rare: find which key, for the message
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
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
    if _SURROGATE_ESCAPE.search(text):
        _reject_lone_surrogates(data, source)
    return validate(data, source)


# JSON may spell a lone UTF-16 surrogate (\udcff): valid JSON, but not text: no UTF-8 output
# (a report, a terminal) can hold it. envsnap never writes one (undecodable bytes become
# \xNN text), so where the text has a surrogate escape, every string is checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")


def _reject_lone_surrogates(data: Any, source: str) -> None:
    stack = [("", data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                _check_text(key, _join_path(path, key), source)
                stack.append((_join_path(path, key), value))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", value) for i, value in enumerate(node))
        elif isinstance(node, str):
            _check_text(node, path, source)


def _check_text(text: str, path: str, source: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise EnvsnapError(f"{source}: {_short_path(path or '(top level)')} holds a lone surrogate "
                           f"(\\u{ord(bad):04x}), not text; not a snapshot envsnap wrote") from None


def _join_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


# --- shapes --------------------------------------------------------------------------------------
# The section layouts of the team contract, as data: what every consumer (show, diff, rank,
# report, merge, bisect) may rely on once a snapshot has passed `validate`. Only types are
# checked, and only where a field is present: a missing field or an unknown extra one is
# fine (older and newer collectors), a field of the wrong type is a corrupt snapshot.
# Specs: "str" (or null), "num" (int/float, not bool, or null), "scalar" (any non-container),
# "any" (any JSON, depth-bounded), "dict" (an object of anything), ("map", spec) (an object
# whose values all match spec), ("list", spec), and {field: spec} (an object; other keys any).

_MAX_DEPTH = 48  # real snapshots nest ~12 deep; consumers recurse, so bound it well below 1000
_SCALARS = (str, int, float, bool, type(None))

_ENV = ("map", "str")
_STATS_DICT = "dict"
_PROCESS = {
    "pid": "num", "ppid": "num", "parent_key": "str", "title": "str", "cmdline": ("list", "str"), "exe": "str",
    "cwd": "str", "role": {"kind": "str", "tp": "int", "dp": "int", "pp": "int", "ep": "int"},
    "cpu_affinity": ("list", "num"), "nice": "num", "num_threads": "num", "gpus": ("list", "scalar"),
    "status": "str", "environ_status": "str", "environ_note": "str", "environ": _ENV,
    "divergence": {"added": _ENV, "removed": ("list", "str"), "changed": ("map", {"parent": "str", "child": "str"})},
}
_PROBE_RECORD = {
    "pid": "num", "ppid": "num", "argv": ("list", "str"), "title": "str", "env_at_start": _ENV,
    "env_at_init": _ENV, "env_at_exit": _ENV, "init": "dict", "host": "str",
}
SECTION_SHAPES: Dict[str, Any] = {
    "env": {"count": "num", "vars": _ENV},
    "host": {"os": "dict", "cpu": "dict", "thp": "dict", "numa_nodes": "num", "memory": "dict", "cgroup": "dict",
             "container": "dict", "ulimits": "dict"},
    "python": {"executable": "str", "version": "str", "implementation": "str", "prefix": "str", "base_prefix": "str",
               "in_venv": "scalar", "sys_path": ("list", "str"), "env": _ENV,
               "startup_hooks": ("map", {"kind": "str", "sha256": "str", "size": "num", "import_lines": ("list", "str"),
                                         "touches_env": "scalar", "env_mentions": ("list", "str")}),
               "startup_env_changes": ("map", ("map", "str"))},
    "packages": {"count": "num",
                 "dists": ("map", {"name": "str", "version": "str", "installer": "str", "location": "str",
                                   "origin": {"kind": "str", "url": "str", "commit": "str", "editable": "scalar"}}),
                 "integrity": {"mode": "str", "checked_files": "num",
                               "modified": ("map", {"dist": "str", "recorded_sha256": "str", "actual_sha256": "str",
                                                    "recorded_size": "num", "actual_size": "num"}),
                               "missing": ("map", "dict"), "rewritten_scripts": ("map", "dict"),
                               "unhashable": "dict", "errors": "dict"}},
    "git": {"repos": ("map", {"roles": ("list", "str"), "head": "str", "branch": "str", "detached": "scalar",
                              "upstream": "str", "ahead": "num", "behind": "num",
                              "dirty": ("map", {"status": "str", "sha256": "str"}), "untracked": ("map", "dict"),
                              "stash": ("map", {"sha": "str", "message": "str"}), "submodules": ("map", "dict"),
                              "errors": "dict"}),
            "errors": "dict"},
    "files": {"entries": ("map", {"size": "num", "sha256": "str", "error": "str"}), "roots": ("list", "str"),
              "errors": "dict"},
    "nvidia": {"driver_version": "str", "nvml_version": "str", "cuda_driver_version": "str", "count": "num",
               "gpus": ("map", "dict"), "topology": {"matrix": ("map", ("map", "scalar"))}, "source": "str"},
    "torch": {"installed": "scalar", "version": "str", "cuda": "str", "git_version": "str", "location": "str",
              "deep": "dict"},
    "processes": {"processes": ("map", _PROCESS), "roots": ("list", "str"), "errors": "dict"},
    "probe": {"dir": "str", "records": ("map", _PROBE_RECORD), "env_at_init_common": _ENV},
    "nccl": {"logs": ("list", "str"), "version": "str", "env": _ENV,
             "ranks": ("map", {"host": "str", "pid": "num", "version": "str", "env": _ENV, "transports": "dict",
                               "channels": "num", "init": "dict"})},
    "sglang": {"url": "str", "endpoint": "str", "version": "str", "server_args": "dict",
               "internal_states": ("list", "dict")},
}
_RUN = {"ok": "scalar", "exit_code": "num", "duration_s": "num", "started": "str", "metrics": ("map", "num"),
        "output_tail": "str", "command": ("list", "str"), "source": "str", "parsers": ("list", "str"),
        "error": "str", "note": "str", "host": "str"}
_TOP = {"envsnap_version": "str", "label": "str", "host": "str", "created": "str", "redaction": "str",
        "provenance": "dict", "metric_directions": ("map", "str"), "run_session": "dict", "runs": ("list", _RUN)}
_TYPE_WORDS = {"finite": "a number within range", "int": "an integer", "str": "a string", "num": "a number",
               "scalar": "a plain value", "dict": "an object",
               "map": "an object", "list": "a list", "obj": "an object"}


class _ShapeError(Exception):
    """A field of the wrong type; `parts` collects its path while the check unwinds (so
    the path costs nothing when the snapshot is fine)."""

    def __init__(self, expected: str, got: Any, key: Any = None):
        super().__init__(expected)
        self.expected, self.got = expected, got
        self.parts: List[str] = [] if key is None else [str(key)]


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


# Numbers no collector writes and no consumer can compute with: 1e999 parses to inf, and
# an integer beyond 64 bits makes float() overflow. Checked where the walk meets them
# (a parse hook per number would cost more than the whole walk).
_MAX_INT = 2 ** 64


def _bad_number(value: Any) -> bool:
    kind = type(value)
    if kind is float:
        return not math.isfinite(value)
    if kind is int:
        return not -_MAX_INT < value < _MAX_INT
    return False


def _check_depth(value: Any, depth: int) -> None:
    if depth > _MAX_DEPTH:
        raise _ShapeError("deep", None)
    items = value.values() if isinstance(value, dict) else value
    for item in items:
        if isinstance(item, (dict, list)):
            _check_depth(item, depth + 1)
        elif _bad_number(item):
            raise _ShapeError("finite", item)


_LEAF_TYPES = {
    "str": frozenset({str, type(None)}),
    "num": frozenset({int, float, type(None)}),  # type() is exact: a bool is not a number here
    "int": frozenset({int}),  # ranks: consumers sort by them, so null is not allowed
    "scalar": frozenset({str, int, float, bool, type(None)}),
}


def _leaf_ok(value: Any, spec: str) -> bool:
    kinds = _LEAF_TYPES.get(spec)
    if kinds is not None and type(value) not in kinds:
        return False
    return not _bad_number(value)  # "any" / "dict" containers are checked by the caller


def _check(value: Any, spec: Any, depth: int) -> None:
    if isinstance(spec, str):
        if spec == "dict":
            if not isinstance(value, dict):
                raise _ShapeError("dict", value)
            _check_depth(value, depth)
        elif spec == "any":
            if isinstance(value, (dict, list)):
                _check_depth(value, depth)
            elif _bad_number(value):
                raise _ShapeError("finite", value)
        elif not _leaf_ok(value, spec):
            raise _ShapeError(spec, value)
        return
    if isinstance(spec, tuple):
        kind, inner = spec
        if kind == "map":
            if not isinstance(value, dict):
                raise _ShapeError("map", value)
            pairs = value.items()
        else:
            if not isinstance(value, list):
                raise _ShapeError("list", value)
            pairs = enumerate(value)
        if isinstance(inner, str) and inner in _LEAF_TYPES:
            for key, item in pairs:  # the common case (env maps, argv lists): no call per item
                if not _leaf_ok(item, inner):
                    raise _ShapeError(inner, item, f"[{key}]" if kind == "list" else key)
            return
        for key, item in pairs:
            try:
                _check(item, inner, depth + 1)
            except _ShapeError as exc:
                exc.parts.append(f"[{key}]" if kind == "list" else str(key))
                raise
        return
    if not isinstance(value, dict):
        raise _ShapeError("obj", value)
    for key, item in value.items():
        inner = spec.get(key, "any")
        if isinstance(inner, str) and inner not in ("dict", "any"):
            if not _leaf_ok(item, inner):
                raise _ShapeError(inner, item, key)
            continue
        if inner == "any" and not isinstance(item, (dict, list)):
            if _bad_number(item):
                raise _ShapeError("finite", item, key)
            continue
        try:
            _check(item, inner, depth + 1)
        except _ShapeError as exc:
            exc.parts.append(str(key))
            raise


def _check_sections(sections: Any, where: str, source: str) -> None:
    if not isinstance(sections, dict):
        raise EnvsnapError(f"{source}: '{where}' must be an object, not {_kind(sections)}")
    for name, section in sections.items():
        if not isinstance(section, dict):
            raise EnvsnapError(f"{source}: section {_short(name)} must be an object, not {_kind(section)}")
        status = section.get("status")
        if status not in SECTION_STATUSES:
            raise EnvsnapError(f"{source}: section {_short(name)} has invalid status {_short(status)}")
        for text_field in ("reason", "error"):
            if section.get(text_field) is not None and not isinstance(section[text_field], str):
                raise EnvsnapError(f"{source}: section {_short(name)} {text_field} must be a string")
        elapsed = section.get("elapsed_s")
        if elapsed is not None and (isinstance(elapsed, bool) or not isinstance(elapsed, (int, float))
                                    or _bad_number(elapsed)):
            raise EnvsnapError(f"{source}: section {_short(name)} elapsed_s must be a number")
        if "data" in section:
            data = section["data"]
            if not isinstance(data, dict):
                raise EnvsnapError(f"{source}: section {_short(name)} data must be an object, not {_kind(data)}")
            _check_shape(data, SECTION_SHAPES.get(name, "dict"), f"{where}.{name}.data", source)


def section_problem(name: str, section: Any) -> Optional[str]:
    """Why `validate` would refuse this section (one line), or None when it passes."""
    try:
        _check_sections({name: section}, "sections", "section")
    except EnvsnapError as exc:
        return str(exc).split(": ", 1)[-1]
    return None


def _check_shape(value: Any, spec: Any, path: str, source: str) -> None:
    try:
        _check(value, spec, 0)
    except _ShapeError as exc:
        parts = ([path] if path else []) + exc.parts[::-1]
        where = ".".join(parts).replace(".[", "[")
        if exc.expected in ("num", "scalar", "int") and _bad_number(exc.got):
            exc.expected = "finite"
        if exc.expected == "deep":
            raise EnvsnapError(f"{source}: {_short_path(where)} is nested more than {_MAX_DEPTH} deep, "
                               "not a snapshot envsnap wrote") from None
        got = _short(exc.got) if exc.expected == "finite" else _kind(exc.got)
        raise EnvsnapError(f"{source}: {_short_path(where)} must be {_TYPE_WORDS.get(exc.expected, exc.expected)}, "
                           f"not {got}") from None


def _short_path(path: str) -> str:
    return repr(path) if len(path) <= 100 else repr(path[:97] + "...")


def validate(data: Any, source: str = "<input>") -> Dict[str, Any]:
    """Check that data is a snapshot this envsnap can read, down to the types of the fields
    every consumer relies on; raise EnvsnapError naming the first thing that is wrong."""
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
    _check_sections(data.get("sections", {}), "sections", source)
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
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or abs(value) > MAX_METRIC:
                raise EnvsnapError(f"{source}: metric {_short(name)} must be a finite number, got {_short(value)}")
    _check_shape({k: v for k, v in data.items() if k not in ("sections", "nodes", "schema_version")}, _TOP, "",
                 source)
    nodes = data.get("nodes")
    if nodes is not None:
        if not isinstance(nodes, dict):
            raise EnvsnapError(f"{source}: 'nodes' must be an object, not {_kind(nodes)}")
        for host, node in nodes.items():
            if not isinstance(node, dict):
                raise EnvsnapError(f"{source}: node {_short(host)} must be an object, not {_kind(node)}")
            _check_sections(node.get("sections", {}), f"nodes.{host}.sections", source)
            _check_shape({k: v for k, v in node.items() if k != "sections"}, _TOP, f"nodes.{host}", source)
    return data


# A metric beyond this is not a measurement (and sums of two would overflow to inf).
MAX_METRIC = 1e15


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def load(path: str) -> Dict[str, Any]:
    """Read and validate a snapshot file (`-` reads stdin)."""
    source = "<stdin>" if path == "-" else path
    try:
        if path == "-":
            raw = _read_capped(sys.stdin.buffer, source)
        else:
            if os.path.isdir(path):
                raise EnvsnapError(f"{path}: is a directory, not a snapshot file")
            # O_NONBLOCK: opening a FIFO nobody writes to must not hang (a pipe from
            # process substitution, `<(cat s.json)`, already has its writer and reads fine).
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
            mode = os.fstat(fd).st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
                os.close(fd)  # /dev/zero, /dev/tty, a disk: never a snapshot, and reading could not end
                raise EnvsnapError(f"{path}: a device, not a snapshot file")
            if stat.S_ISFIFO(mode):
                os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as handle:
                raw = _read_capped(handle, source)
    except FileNotFoundError:
        raise EnvsnapError(f"{source}: no such file") from None
    except OSError as exc:
        raise EnvsnapError(f"{source}: cannot read: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvsnapError(f"{source}: not UTF-8 text (byte {exc.start}), not a snapshot") from None
    return parse(text, source)


def _read_capped(handle: Any, source: str) -> bytes:
    """The whole stream, in chunks: binary data is refused at its first NUL and an oversized
    input at the cap, before either costs memory."""
    chunks = []
    total = 0
    while True:
        chunk = handle.read(1 << 20)
        if not chunk:
            return b"".join(chunks)
        if b"\x00" in chunk:
            raise EnvsnapError(f"{source}: binary data (NUL bytes), not a snapshot")
        total += len(chunk)
        if total > MAX_SNAPSHOT_BYTES:
            raise EnvsnapError(f"{source}: larger than {MAX_SNAPSHOT_BYTES >> 20} MiB, not a snapshot")
        chunks.append(chunk)


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
