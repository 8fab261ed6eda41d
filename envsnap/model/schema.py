"""The snapshot's shape: the shape language, the top-level and run shapes, and the validator of a loaded file.

A snapshot is a dict:

    {"schema_version": 1, "envsnap_version": "...", "created": "...Z", "label": "...",
     "host": "<hostname>", "sections": {"<collector>": {"status": ..., "data": {...}}},
     "runs": [...]}

`validate` refuses anything else with one line naming the field and what it should be,
so readers downstream can trust the types they get.

Over 400 lines on purpose: the shape language's compiler and the top-level checks, so that validation is one
pass over the data.
"""
from __future__ import annotations

import math
from itertools import chain
from operator import itemgetter
from typing import (
    Any,
    Callable,
    Dict,
    FrozenSet,
    Iterable,
    List,
    Mapping,
    Optional,
    Tuple,
)

from envsnap import __version__
from envsnap.errors import EnvsnapError
from envsnap.model.snapshot import SECTION_STATUSES, SUPPORTED_SCHEMA_VERSIONS


def _join_path(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


# --- shapes --------------------------------------------------------------------------------------
# The section layouts, as data: what every consumer (show, diff, rank, report, merge, bisect) may
# rely on once a snapshot has passed `validate`. Each collector declares its section's shape
# (`SHAPE` in its module); the explicit list of collectors gathers them (SECTION_SHAPES in
# envsnap/capture/collectors) and whoever loads a snapshot passes them in (`shapes`): the model
# knows no collector. Only types are checked, and only where a field is present: a missing field or
# an unknown extra one is fine (older and newer collectors), a field of the wrong type is a corrupt
# snapshot. Specs: "str" (or null), "num" (int/float, not bool, or null), "scalar" (any non-container),
# "any" (any JSON, depth-bounded), "dict" (an object of anything), ("map", spec) (an object
# whose values all match spec), ("list", spec), and {field: spec} (an object; other keys any).

_MAX_DEPTH = 48  # real snapshots nest ~12 deep; consumers recurse, so bound it well below 1000
_SCALARS = (str, int, float, bool, type(None))

# Shapes several sections share (each section's own shape is its collector's SHAPE).
ENV_SHAPE = ("map", "str")  # an environment: {name: value}
# A file's text (envsnap/capture/collectors/content.py): "content" of a file's entry, "patch" of a git
# file or stash entry.
CONTENT_SHAPE = {"status": "str", "text": "str", "size": "num", "sha256": "str", "redacted": "scalar",
                 "error": "str"}
# Where a section's file hashes came from (capture/hashcache.py): bookkeeping, not a fact
# about the environment (analysis/knowledge's VOLATILE_RULES mark it volatile).
HASH_CACHE_SHAPE = {"used": "scalar", "hits": "num", "misses": "num", "racy": "num", "path": "str", "note": "str"}
# Who else used the machine (capture/collectors/neighbours.py): the "neighbours" section of a capture and
# the "neighbours" of each run's telemetry (measure/neighbours.py) alike.
_NEIGHBOUR_PROCESS = {"pid": "num", "command": "str", "user": "str", "cpu_s": "num", "cpus": "num",
                      "ended": "scalar", "note": "str", "on_cpu_set": "scalar"}
_NEIGHBOUR_GPU_PROCESS = {"pid": "num", "command": "str", "user": "str", "own": "scalar", "why": "str",
                          "used_memory_bytes": "num", "sm_util_pct_mean": "num", "sm_util_pct_max": "num",
                          "util_samples": "num", "seen": ("list", "str")}
NEIGHBOURS_SHAPE = {"window_s": "num", "cpus_online": "num", "host_busy_cpus": "num", "steal_pct": "num",
                    "cpu_set_size": "num", "cpu_set_busy_cpus": "num",
                    "load_1m": ("list", "num"),
                    "runnable": {"median": "num", "max": "num", "samples": "num", "source": "str"},
                    "others_cpus": "num", "others_busy": "num", "top": ("list", _NEIGHBOUR_PROCESS),
                    "processes": "num", "ended": "num", "unreadable": ("map", "num"), "scans": "num",
                    "scan_cpu_s": "num", "gpu": "str",
                    "gpus": ("map", {"processes": ("list", _NEIGHBOUR_GPU_PROCESS), "error": "str"}),
                    "notes": ("list", "str")}
# What a run did (envsnap/measure/telemetry.py): counters of the command's process tree, of the
# --pid/--sglang processes (deltas over the run), and GPU samples.
_USAGE = {"cpu_user_s": "num", "cpu_system_s": "num", "ctx_voluntary": "num", "ctx_involuntary": "num",
          "peak_rss_bytes": "num", "peak_threads": "num", "cpu_set": ("list", "num"), "pid": "num", "error": "str",
          # what the scheduler did to its threads (measure/sched_sampling.py)
          "run_delay_s": "num", "on_cpu_s": "num", "timeslices": "num", "threads_seen": "num",
          "thread_names": ("map", "num"), "major_faults": "num"}
_TELEMETRY = dict(_USAGE, **{
    "wall_s": "num", "max_rss_bytes": "num", "peak_processes": "num", "cpu_set_source": "str", "samples": "num",
    "interval_s": "num", "sampler_cpu_s": "num", "watched": ("map", _USAGE), "gpu": "str", "notes": ("list", "str"),
    "gpus": ("map", {"samples": "num", "util_pct_mean": "num", "util_pct_median": "num", "util_pct_min": "num",
                     "active_samples": "num", "util_pct_active_mean": "num", "util_pct_steady_mean": "num",
                     "busy_s": "num", "sm_clock_mhz_active_median": "num",
                     "sm_clock_mhz_median": "num", "sm_clock_mhz_min": "num", "sm_clock_mhz_max": "num",
                     "power_w_median": "num", "power_w_max": "num", "clock_event_reasons": ("map", "num")}),
    "neighbours": NEIGHBOURS_SHAPE,
    # the command's processes' environments (measure/environ_sampling.py)
    "environs": ("map", {"pid": "num", "environ_status": "str", "environ_note": "str", "environ": ENV_SHAPE,
                         "live_environ_status": "str", "live_environ_note": "str", "live_environ": ENV_SHAPE}),
})
# A run's profiler traces, summarised (envsnap/measure/traces.py, trace_runs.py): per file (one rank), per
# kernel / copy / CPU operator / CUDA call name its count and total time, launches by kind, steps.
_TRACE_STAT = {"count": "num", "total_us": "num", "stream": "scalar"}
_TRACE_FILE = {"file": "str", "bytes": "num", "events": "num", "rank": "num", "stage": "str",
               "steps": {"count": "num", "source": "str", "kind": "str", "kinds": ("map", "num")},
               "span_us": "num", "kernels": ("map", _TRACE_STAT), "memcpy": ("map", _TRACE_STAT),
               "cpu_ops": ("map", _TRACE_STAT), "runtime": ("map", _TRACE_STAT), "launches": ("map", "num"),
               "gpu": ("map", "num"), "cpu_ops_us": "num",
               "dropped": ("map", {"names": "num", "count": "num", "total_us": "num"})}
_TRACE = {"source": "str", "files": ("list", _TRACE_FILE), "notes": ("list", "str"), "requested_steps": "num"}
# What an SGLang server counted during a run (envsnap/measure/server_metrics.py): its /metrics counters'
# and histograms' changes across the run, and the gauges that moved with the value they ended at.
_SERVER_METRICS = {"url": "str", "error": "str", "counters": ("map", "num"), "gauges": ("map", "num"),
                   "histograms": ("map", {"count": "num", "sum": "num", "mean": "num"}), "reset": ("list", "str")}
_RUN = {"ok": "scalar", "exit_code": "num", "duration_s": "num", "started": "str", "metrics": ("map", "num"),
        "output_tail": "str", "command": ("list", "str"), "source": "str", "parsers": ("list", "str"),
        "error": "str", "note": "str", "host": "str", "telemetry": _TELEMETRY,
        "trace": _TRACE, "server_metrics": _SERVER_METRICS}
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
_INF = math.inf
# What a fast parser (orjson) gives for an integer literal beyond 64 bits is a float at least
# this big: data from it is checked with this bound on floats, and a failure sends the text
# to the exact parser (store.parse), whose answer (int, "not within range") is the one given.
FAST_PARSER_FLOAT_LIMIT = 2.0 ** 63


def _bad_number(value: Any, limit: float = _INF) -> bool:
    kind = type(value)
    if kind is float:
        return not -limit < value < limit  # NaN and infinities fail too
    if kind is int:
        return not -_MAX_INT < value < _MAX_INT
    return False


def _check_depth(value: Any, depth: int, limit: float = _INF) -> None:
    if depth > _MAX_DEPTH:
        raise _ShapeError("deep", None)
    items = value.values() if isinstance(value, dict) else value
    for item in items:
        if isinstance(item, (dict, list)):
            _check_depth(item, depth + 1, limit)
        elif _bad_number(item, limit):
            raise _ShapeError("finite", item)


# Types whose check depends on the value too (a float's or an int's range), and the types whose
# every check (leaf, "any", nested object/list spec) depends on the type alone. The fast parser's
# integers are 64-bit (a bigger literal comes back as a float), always within _MAX_INT: for its data
# (checked with FAST_PARSER_FLOAT_LIMIT) an int's check depends on its type alone too.
_RANGED = frozenset({int, float})
_BY_TYPE = frozenset({str, bool, type(None)})
_BY_TYPE_FAST = _BY_TYPE | {int}
_DICT_ONLY = frozenset({dict})
_CONTAINERS = frozenset({dict, list})


class _AbsentType:
    """A field an entry does not have (checked as absent, never as a value)."""


_ABSENT = _AbsentType()

_LEAF_TYPES: Dict[str, FrozenSet[type]] = {
    "str": frozenset({str, type(None)}),
    "num": frozenset({int, float, type(None)}),  # type() is exact: a bool is not a number here
    "int": frozenset({int}),  # ranks: consumers sort by them, so null is not allowed
    "scalar": frozenset({str, int, float, bool, type(None)}),
}


# --- the checker, compiled once per spec -----------------------------------------------------------
# Each spec becomes one function check(value, depth) that raises _ShapeError; the type tests
# of leaf fields are inlined, so a snapshot's 20,000 integrity entries cost one call each, not
# one per field (the walk is the same: every value is visited once).
_Checker = Callable[[Any, int], None]
_COMPILED: Dict[Tuple[int, float], Tuple[Any, _Checker]] = {}


def _checker(spec: Any, limit: float = _INF) -> _Checker:
    """The checker of `spec`; `limit` bounds floats (infinity: finite is enough)."""
    found = _COMPILED.get((id(spec), limit))
    if found is None or found[0] is not spec:
        found = _COMPILED[(id(spec), limit)] = (spec, _compile(spec, limit))
    return found[1]


def _is_leaf(spec: Any) -> bool:
    return isinstance(spec, str) and spec in _LEAF_TYPES


def _leaf_bad(value: Any, kinds: FrozenSet[type], limit: float) -> bool:
    """Not one of `kinds`, or a number no consumer can compute with (see _bad_number)."""
    kind = type(value)
    if kind not in kinds:
        return True
    if kind is float:
        return not -limit < value < limit
    if kind is int:
        return not -_MAX_INT < value < _MAX_INT
    return False


def _compile(spec: Any, limit: float) -> _Checker:
    if isinstance(spec, str):
        return _compile_word(spec, limit)
    if isinstance(spec, tuple):
        return _compile_collection(spec[0], spec[1], limit)
    return _compile_object(spec, limit)


def _compile_word(spec: str, limit: float) -> _Checker:
    if spec == "dict":
        def check_dict(value: Any, depth: int) -> None:
            if not isinstance(value, dict):
                raise _ShapeError("dict", value)
            _check_depth(value, depth, limit)
        return check_dict
    if spec == "any":
        def check_any(value: Any, depth: int) -> None:
            if isinstance(value, (dict, list)):
                _check_depth(value, depth, limit)
            elif _bad_number(value, limit):
                raise _ShapeError("finite", value)
        return check_any
    kinds = _LEAF_TYPES[spec]

    def check_leaf(value: Any, depth: int) -> None:
        if _leaf_bad(value, kinds, limit):
            raise _ShapeError(spec, value)
    return check_leaf


def _compile_collection(kind: str, inner: Any, limit: float) -> _Checker:
    container, word = (dict, "map") if kind == "map" else (list, "list")

    def items(value: Any) -> Iterable[Tuple[Any, Any]]:
        if not isinstance(value, container):
            raise _ShapeError(word, value)
        return value.items() if isinstance(value, dict) else enumerate(value)

    def label(key: Any) -> str:
        return f"[{key}]" if container is list else str(key)

    if _is_leaf(inner):  # the common case (env maps, argv lists): no call per item
        kinds = _LEAF_TYPES[inner]
        kinds_by_type = kinds - _RANGED

        def check_leaves(value: Any, depth: int) -> None:
            pairs = items(value)
            # Every item's type at once (in C); only numbers need a look at their values.
            if set(map(type, value.values() if container is dict else value)) <= kinds_by_type:
                return
            for key, item in pairs:
                if _leaf_bad(item, kinds, limit):
                    raise _ShapeError(inner, item, label(key))
        return check_leaves
    if isinstance(inner, dict):
        return _compile_object(inner, limit, items, label, container)
    check_inner = _checker(inner, limit)

    def check_each(value: Any, depth: int) -> None:
        _check_items(check_inner, items(value), depth + 1, label)
    return check_each


def _check_items(check: _Checker, pairs: Iterable[Tuple[Any, Any]], depth: int, label: Any) -> None:
    """check(item) of each (key, item) of a map or list; a failure names the key on its way out."""
    for key, item in pairs:
        try:
            check(item, depth)
        except _ShapeError as exc:
            exc.parts.append(label(key))
            raise


def _compile_object(spec: Dict[str, Any], limit: float, items: Any = None, label: Any = None,
                    container: type = dict) -> _Checker:
    """An object spec: {field: spec}, other fields "any". With `items`, a map of such objects
    checked in one loop (integrity entries, processes, GPUs)."""
    leaves = {field: (_LEAF_TYPES[inner], inner) for field, inner in spec.items() if _is_leaf(inner)}
    nested = {field: _checker(inner, limit) for field, inner in spec.items()
              if not _is_leaf(inner) and inner != "any"}

    def check_fields(value: Any, depth: int) -> None:
        if not isinstance(value, dict):
            raise _ShapeError("obj", value)
        for key, item in value.items():
            leaf = leaves.get(key)
            if leaf is not None:
                kind = type(item)
                if kind not in leaf[0] or (kind is float and not -limit < item < limit) or \
                        (kind is int and not -_MAX_INT < item < _MAX_INT):
                    raise _ShapeError(leaf[1], item, key)
                continue
            check = nested.get(key)
            if check is None:  # "any"
                if isinstance(item, (dict, list)):
                    try:
                        _check_depth(item, depth + 1, limit)
                    except _ShapeError as exc:
                        exc.parts.append(str(key))
                        raise
                elif _bad_number(item, limit):
                    raise _ShapeError("finite", item, key)
                continue
            try:
                check(item, depth + 1)
            except _ShapeError as exc:
                exc.parts.append(str(key))
                raise

    if items is None:
        return check_fields

    by_type = _BY_TYPE_FAST if limit == FAST_PARSER_FLOAT_LIMIT else _BY_TYPE
    allowed = {field: kinds & by_type for field, (kinds, _) in leaves.items()}

    def pass_by_type(entries: List[Any], depth: int) -> bool:
        """Whether every entry passes, judged field by field over all entries at once (the types a
        field holds, found in C with no Python call per entry). True only where that settles it:
        a type whose check depends on the type alone (see _BY_TYPE); a nested value is checked by
        its own checker. Anything else (a float, an odd type) is left to the walk."""
        if not entries or not set(map(type, entries)) <= _DICT_ONLY:
            return not entries
        # Usually every entry has the fields of the first: then each is in every entry (itemgetter
        # raises otherwise) and, the key counts adding up, no other field is anywhere.
        columns: List[Tuple[Any, List[Any]]] = []
        if sum(map(len, entries)) == len(entries[0]) * len(entries):
            try:
                columns = [(name, list(map(itemgetter(name), entries))) for name in entries[0]]
            except KeyError:  # as many fields, not the same ones
                columns = []
        if not columns:
            columns = [(name, [entry.get(name, _ABSENT) for entry in entries])
                       for name in set(chain.from_iterable(entries))]
        for name, values in columns:
            types = set(map(type, values))
            types.discard(_AbsentType)
            if name in leaves:
                if not types <= allowed[name]:
                    return False
                continue
            check = nested.get(name)
            if check is None and types <= by_type:  # "any": scalars settled by type
                continue
            if check is None and not types <= by_type | _CONTAINERS:
                return False
            try:
                for item in values:
                    if item is not _ABSENT:
                        if check is not None:
                            check(item, depth + 1)
                        elif type(item) in _CONTAINERS:
                            _check_depth(item, depth + 1, limit)
            except _ShapeError:
                return False  # the walk finds it again and words it
        return True

    def check_objects(value: Any, depth: int) -> None:
        depth += 1
        pairs = items(value)
        # Thousands of integrity entries, processes or GPUs: when their fields' types settle it,
        # one look per field over all of them; else (and for the error's wording) entry by entry.
        if pass_by_type(list(value.values()) if container is dict else value, depth):
            return
        _check_items(check_fields, pairs, depth, label)
    return check_objects


def _check(value: Any, spec: Any, depth: int, limit: float = _INF) -> None:
    _checker(spec, limit)(value, depth)


def _check_sections(sections: Any, where: str, source: str, limit: float = _INF,
                    shapes: Optional[Mapping[str, Any]] = None) -> None:
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
                                    or _bad_number(elapsed, limit)):
            raise EnvsnapError(f"{source}: section {_short(name)} elapsed_s must be a number")
        if "data" in section:
            data = section["data"]
            if not isinstance(data, dict):
                raise EnvsnapError(f"{source}: section {_short(name)} data must be an object, not {_kind(data)}")
            _check_shape(data, shapes.get(name, "dict") if shapes else "dict", f"{where}.{name}.data", source,
                         limit)
        if limit != _INF:  # fields beside data are not checked, but a fast parser's big float is looked for
            _check_shape({k: v for k, v in section.items() if k not in _SECTION_FIELDS}, "any", where, source,
                         limit)


def section_problem(name: str, section: Any, shape: Any = "dict") -> Optional[str]:
    """Why `validate` would refuse this section, its data of `shape` (one line), or None when it passes."""
    try:
        _check_sections({name: section}, "sections", "section", shapes={name: shape})
    except EnvsnapError as exc:
        return str(exc).split(": ", 1)[-1]
    return None


_SECTION_FIELDS = frozenset({"status", "reason", "error", "elapsed_s", "data"})


def _check_shape(value: Any, spec: Any, path: str, source: str, limit: float = _INF) -> None:
    try:
        _check(value, spec, 0, limit)
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


def validate(data: Any, source: str = "<input>", float_limit: float = _INF,
             shapes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Check that data is a snapshot this envsnap can read, down to the types of the fields
    every consumer relies on; raise EnvsnapError naming the first thing that is wrong.
    `shapes` ({section: shape}, the collectors' SECTION_SHAPES) types each section's data; without
    it (or for a section it does not name) a section's data is checked as any JSON object.
    `float_limit` (FAST_PARSER_FLOAT_LIMIT for orjson's output) also refuses finite floats
    that big, so that store.parse can re-read such a text with the exact parser."""
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
    _check_sections(data.get("sections", {}), "sections", source, float_limit, shapes)
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
            problem = metric_problem(value)
            if problem:
                raise EnvsnapError(f"{source}: metric {_short(name)} {problem}, got {_short(value)}")
    _check_shape({k: v for k, v in data.items() if k not in ("sections", "nodes", "schema_version")}, _TOP, "",
                 source, float_limit)
    nodes = data.get("nodes")
    if nodes is not None:
        if not isinstance(nodes, dict):
            raise EnvsnapError(f"{source}: 'nodes' must be an object, not {_kind(nodes)}")
        for host, node in nodes.items():
            if not isinstance(node, dict):
                raise EnvsnapError(f"{source}: node {_short(host)} must be an object, not {_kind(node)}")
            _check_sections(node.get("sections", {}), f"nodes.{host}.sections", source, float_limit, shapes)
            _check_shape({k: v for k, v in node.items() if k != "sections"}, _TOP, f"nodes.{host}", source,
                         float_limit)
    return data


# A metric beyond this is not a measurement (and sums of two would overflow to inf).
MAX_METRIC = 1e15


def metric_problem(value: Any) -> Optional[str]:
    """What keeps `value` from being a run's metric ("must be ..."), or None: every writer (run's
    parsers, attach) and the loader ask this one question, so nothing is written that loads refuse."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "must be a number"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int of hundreds of digits
        finite = False
    if not finite:
        return "must be a finite number"
    if abs(value) > MAX_METRIC:
        return f"must be between {-MAX_METRIC:g} and {MAX_METRIC:g} (a value that large is no measurement)"
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
