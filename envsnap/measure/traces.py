"""Profiler traces: a compact summary of a Kineto / Chrome trace file, never the trace itself.

What reads them: torch.profiler's `export_chrome_trace` (`.json`, or `.json.gz` written through gzip)
and SGLang's `/start_profile`, which writes one such file per TP rank (sglang 0.5.23
srt/managers/scheduler_components/profiler_manager.py:343-362:
`[prefix-]{profile_id}-TP-{rank}[-DP-d][-PP-p][-EP-e][-{EXTEND|DECODE}].trace.json.gz`).

`summarize(path)` returns, for the file (one rank):

    {"file": name, "bytes": n, "events": n, "rank": int|null, "stage": "DECODE"|"EXTEND"|null,
     "steps": {"count": n, "source": "ProfilerStep#"|"sglang step spans"|"requested"|"whole trace",
               "kinds": {"DECODE": n, ...}},
     "span_us": first event start to last event end,
     "kernels": {name: {"count", "total_us", "stream"}},   GPU kernels (cat "kernel")
     "memcpy": {name: {"count", "total_us"}},             GPU memory copies and sets
     "cpu_ops": {name: {"count", "total_us"}},            CPU operators (cat "cpu_op"), inclusive times
     "runtime": {name: {"count", "total_us"}},            CUDA runtime / driver calls
     "launches": {"kernel": n, "graph": n, "memcpy": n, "sync": n},
     "gpu": {"busy_us", "span_us", "idle_us"},             union of kernel and copy time per device, summed
     "cpu_ops_us": union of CPU operator time per thread (top-level operator time),
     "dropped": {table: {"names", "count", "total_us"}} (names beyond MAX_NAMES, smallest first)}

Step boundaries, first found wins: torch.profiler's `ProfilerStep#N` spans (a schedule's steps);
SGLang's own step spans (`step[DECODE bs=8]`, `step[VERIFY ...]`, `step[DRAFT ...]`: sglang 0.5.23
srt/model_executor/model_runner.py:1831-1838 wraps each forward in profile_range(build_step_span_name(..)),
srt/utils/profile_utils.py:466-520): verify cycles when there are VERIFY spans, else decode steps, else
every step span; the number of steps asked of SGLang (`requested`, /start_profile num_steps); else the
whole trace is one step. `steps.source` says which.

Parsing streams the file: the `traceEvents` array is cut into pieces at object boundaries and each
piece parsed with orjson (the standard library's json without it), so memory stays bounded by the
piece, not the file (benchmarks/trace_parse.py measures the choice).
"""
from __future__ import annotations

import gc
import gzip
import os
import re
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Tuple

from envsnap.errors import EnvsnapError
from envsnap.model.snapshot import as_dict

TRACE_SUFFIXES = (".json", ".json.gz")
# Names kept per table, by total time; the rest are counted in "dropped" (a real SGLang decode trace has
# a few hundred distinct kernel names; CPU operator names can run into thousands with record_shapes off).
MAX_NAMES = 300
BLOCK = 8 << 20  # bytes read and parsed at a time

# CUDA runtime and driver calls by what they do (CUDA runtime API and driver API names, as Kineto records
# them in cat "cuda_runtime" / "cuda_driver": torch 2.13 kineto/libkineto/src/CuptiActivity.cpp).
LAUNCH_KINDS = {
    "cudaLaunchKernel": "kernel", "cudaLaunchKernelExC": "kernel", "cuLaunchKernel": "kernel",
    "cuLaunchKernelEx": "kernel", "cudaLaunchCooperativeKernel": "kernel", "cudaLaunchCooperativeKernelMultiDevice": "kernel",
    "cuLaunchCooperativeKernel": "kernel",
    "cudaGraphLaunch": "graph", "cuGraphLaunch": "graph",
    "cudaMemcpy": "memcpy", "cudaMemcpyAsync": "memcpy", "cudaMemsetAsync": "memcpy", "cudaMemset": "memcpy",
    "cudaMemcpyPeerAsync": "memcpy", "cuMemcpyAsync": "memcpy", "cuMemcpyHtoDAsync_v2": "memcpy",
    "cudaStreamSynchronize": "sync", "cudaDeviceSynchronize": "sync", "cudaEventSynchronize": "sync",
    "cudaStreamWaitEvent": "sync",
}
LAUNCH_KEYS = ("kernel", "graph", "memcpy", "sync")

_RANK_IN_NAME = re.compile(r"-TP-(\d+)")
_STAGE_IN_NAME = re.compile(r"-(EXTEND|DECODE)\.trace\.json")
_SGLANG_STEP = re.compile(r"step\[([A-Z_]+)")
# Verify cycles (EAGLE) first, then plain decode steps: what "per decode step" means for each.
_STEP_KINDS_BY_PREFERENCE = ("VERIFY", "DECODE")


class TraceError(EnvsnapError):
    """A file that is not a readable Chrome trace."""


def is_trace_name(name: str) -> bool:
    return name.endswith(TRACE_SUFFIXES)


# ---------------------------------------------------------------------------------------
# Streaming the events
# ---------------------------------------------------------------------------------------

def _loads() -> Callable[[bytes], Any]:
    try:
        import orjson

        return orjson.loads
    except ImportError:  # pragma: no cover - orjson is a dependency on CPython
        import json

        return json.loads


def _open(path: str) -> BinaryIO:
    handle = open(path, "rb")
    magic = handle.read(2)
    handle.seek(0)
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=handle, mode="rb")  # type: ignore[return-value]
    return handle


_KEY = b'"traceEvents"'


def _cut(data: bytes) -> int:
    """Index just past the last `}` that ends one event and is followed by `,` and the next `{`; -1 if none.
    A cut inside a nested object only makes a piece that does not parse: the caller then waits for more."""
    pos = len(data)
    while True:
        pos = data.rfind(b"}", 0, pos)
        if pos < 0:
            return -1
        tail = data[pos + 1:pos + 65].lstrip()
        if tail[:1] == b",":
            if tail[1:].lstrip()[:1] == b"{":
                return pos + 1
        if len(data) - pos > (64 << 20):
            return -1


def iter_event_batches(path: str, block: int = BLOCK) -> Iterator[Tuple[Dict[str, Any], List[Any]]]:
    """(top-level fields seen so far, a list of events), piece by piece. Raises TraceError."""
    loads = _loads()
    header: Dict[str, Any] = {}
    try:
        with _open(path) as stream:
            buf = b""
            start = -1
            while start < 0:
                more = stream.read(block)
                buf += more
                stripped = buf.lstrip()
                if stripped[:1] == b"[":  # a bare array of events is a Chrome trace too
                    start = len(buf) - len(stripped) + 1
                    break
                key = buf.find(_KEY)
                if key >= 0:
                    bracket = buf.find(b"[", key)
                    if bracket >= 0:
                        header = _parse_header(buf[:key], loads)
                        start = bracket + 1
                        break
                if not more:
                    raise TraceError(f"{path}: not a Chrome trace (no traceEvents)")
                if len(buf) > (64 << 20):
                    raise TraceError(f"{path}: not a Chrome trace (no traceEvents in its first 64 MB)")
            data = buf[start:]
            pending = b""
            while True:
                more = stream.read(block)
                if not more:
                    break
                data = pending + data + more if pending else data + more
                pending = b""
                cut = _cut(data)
                if cut < 0:
                    continue
                try:
                    events = loads(b"[" + data[:cut] + b"]")
                except ValueError:
                    pending, data = data, b""  # cut inside a nested object: wait for more
                    continue
                data = data[cut:].lstrip().lstrip(b",")
                yield header, events
            data = pending + data
            events, trailer = _last_piece(data, loads, path)
            header.update(trailer)
            yield header, events
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        raise TraceError(f"{path}: cannot read the trace ({exc})") from None


def _parse_header(text: bytes, loads: Callable[[bytes], Any]) -> Dict[str, Any]:
    body = text.rstrip().rstrip(b",").rstrip()
    if body.endswith(b"{"):
        return {}
    try:
        found = loads(body + b"}")
    except ValueError:
        return {}
    return as_dict(found)


def _last_piece(data: bytes, loads: Callable[[bytes], Any], path: str) -> Tuple[List[Any], Dict[str, Any]]:
    """The events before the array's closing `]`, and the top-level fields after it."""
    end = len(data)
    for _ in range(64):
        end = data.rfind(b"]", 0, end)
        if end < 0:
            break
        try:
            events = loads(b"[" + data[:end] + b"]")
        except ValueError:
            continue
        rest = data[end + 1:].strip().lstrip(b",").strip()
        trailer: Dict[str, Any] = {}
        if rest and rest != b"}":
            try:
                found = loads(b"{" + rest if not rest.startswith(b"{") else rest)
                trailer = as_dict(found)
            except ValueError:
                trailer = {}
        return events if isinstance(events, list) else [], trailer
    raise TraceError(f"{path}: not a complete Chrome trace (its traceEvents array does not close)")


# ---------------------------------------------------------------------------------------
# The summary
# ---------------------------------------------------------------------------------------

def _union_us(intervals: List[Tuple[float, float]]) -> Tuple[float, float, float]:
    """(covered time, first start, last end) of intervals."""
    if not intervals:
        return 0.0, 0.0, 0.0
    intervals.sort()
    covered = 0.0
    cur_start, cur_end = intervals[0]
    first = cur_start
    last = cur_end
    for start, end in intervals:
        if start > cur_end:
            covered += cur_end - cur_start
            cur_start, cur_end = start, end
        elif end > cur_end:
            cur_end = end
        if end > last:
            last = end
    covered += cur_end - cur_start
    return covered, first, last


def _table(stats: Dict[str, List[Any]], with_stream: bool = False) -> Tuple[Dict[str, Any], Optional[Dict[str, Any]]]:
    ranked = sorted(stats.items(), key=lambda kv: (-kv[1][1], kv[0]))
    kept, rest = ranked[:MAX_NAMES], ranked[MAX_NAMES:]
    out: Dict[str, Any] = {}
    for name, (count, total, streams) in kept:
        entry: Dict[str, Any] = {"count": count, "total_us": round(total, 3)}
        if with_stream and streams:
            entry["stream"] = max(sorted(streams), key=lambda s: streams[s])
        out[name] = entry
    dropped = None
    if rest:
        dropped = {"names": len(rest), "count": sum(v[0] for _, v in rest),
                   "total_us": round(sum(v[1] for _, v in rest), 3)}
    return out, dropped


def _rank(name: str, header: Dict[str, Any]) -> Optional[int]:
    match = _RANK_IN_NAME.search(name)
    if match:
        return int(match.group(1))
    info = header.get("distributedInfo")
    if isinstance(info, dict) and isinstance(info.get("rank"), int) and not isinstance(info.get("rank"), bool):
        return int(info["rank"])
    return None


def summarize(path: str, requested_steps: Optional[int] = None) -> Dict[str, Any]:
    """The summary of one trace file (see the module doc). Raises TraceError for a file that is not one.

    The cyclic garbage collector is paused meanwhile: the parsed events are freed by reference counting
    piece by piece, and each piece's ~100,000 new containers would otherwise trigger collections that walk
    them again (measured on a 200 MB trace: 5.2 s with it, 2.2 s without; benchmarks/trace_parse.py)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _summarize(path, requested_steps)
    finally:
        if enabled:
            gc.enable()


def _summarize(path: str, requested_steps: Optional[int]) -> Dict[str, Any]:
    kernels: Dict[str, List[Any]] = {}
    memcpy: Dict[str, List[Any]] = {}
    cpu_ops: Dict[str, List[Any]] = {}
    runtime: Dict[str, List[Any]] = {}
    gpu_intervals: Dict[Any, List[Tuple[float, float]]] = {}
    cpu_intervals: Dict[Any, List[Tuple[float, float]]] = {}
    profiler_steps: set = set()
    sglang_steps: Dict[str, int] = {}
    first, last = float("inf"), float("-inf")
    events = 0
    header: Dict[str, Any] = {}
    host_tables = {"cpu_op": cpu_ops, "cuda_runtime": runtime, "cuda_driver": runtime, "gpu_memcpy": memcpy,
                   "gpu_memset": memcpy}
    for seen, batch in iter_event_batches(path):
        header = seen
        for ev in batch:
            if not isinstance(ev, dict) or ev.get("ph") != "X":
                continue
            ts, dur = ev.get("ts"), ev.get("dur")
            if not isinstance(ts, (int, float)) or not isinstance(dur, (int, float)) or isinstance(dur, bool):
                continue
            events += 1
            end = ts + dur
            if ts < first:
                first = ts
            if end > last:
                last = end
            cat = ev.get("cat")
            name = ev.get("name")
            if not isinstance(name, str):
                continue
            table = host_tables.get(cat) if type(cat) is str else None
            if table is not None:  # CPU operators, CUDA runtime/driver calls, copies: a count and a total each
                stats = table.get(name)
                if stats is None:
                    stats = table[name] = [0, 0.0, None]
                stats[0] += 1
                stats[1] += dur
                if table is cpu_ops:
                    cpu_intervals.setdefault((ev.get("pid"), ev.get("tid")), []).append((ts, end))
                elif table is memcpy:  # copies occupy the GPU
                    args = ev.get("args")
                    gpu_intervals.setdefault(args.get("device") if isinstance(args, dict) else None, []).append((ts, end))
            elif cat == "kernel":
                stats = kernels.get(name)
                if stats is None:
                    stats = kernels[name] = [0, 0.0, {}]
                stats[0] += 1
                stats[1] += dur
                args = ev.get("args")
                device = None
                if isinstance(args, dict):
                    stream = args.get("stream")
                    device = args.get("device")
                    if isinstance(stream, (int, str)):
                        stats[2][stream] = stats[2].get(stream, 0) + 1
                gpu_intervals.setdefault(device, []).append((ts, end))
            elif cat == "user_annotation":
                if name.startswith("ProfilerStep#"):
                    profiler_steps.add(name)
                elif name.startswith("step["):
                    match = _SGLANG_STEP.match(name)
                    if match:
                        sglang_steps[match.group(1)] = sglang_steps.get(match.group(1), 0) + 1
    base = os.path.basename(path)
    busy = span = 0.0
    for intervals in gpu_intervals.values():
        covered, start, stop = _union_us(intervals)
        busy += covered
        span += stop - start
    cpu_busy = sum(_union_us(intervals)[0] for intervals in cpu_intervals.values())
    launches = {key: 0 for key in LAUNCH_KEYS}
    for name, (count, _total, _) in runtime.items():
        kind = LAUNCH_KINDS.get(name)
        if kind is not None:
            launches[kind] += count
    out: Dict[str, Any] = {
        "file": base, "bytes": _size(path), "events": events, "rank": _rank(base, header),
        "stage": (_STAGE_IN_NAME.search(base).group(1) if _STAGE_IN_NAME.search(base) else None),  # type: ignore[union-attr]
        "steps": _steps(profiler_steps, sglang_steps, requested_steps),
        "span_us": round(last - first, 3) if events else 0.0,
        "launches": launches,
        "gpu": {"busy_us": round(busy, 3), "span_us": round(span, 3), "idle_us": round(max(span - busy, 0.0), 3)},
        "cpu_ops_us": round(cpu_busy, 3),
    }
    dropped: Dict[str, Any] = {}
    for key, table in (("kernels", kernels), ("memcpy", memcpy), ("cpu_ops", cpu_ops), ("runtime", runtime)):
        out[key], lost = _table(table, with_stream=key == "kernels")
        if lost:
            dropped[key] = lost
    if dropped:
        out["dropped"] = dropped
    return out


def _steps(profiler_steps: set, sglang_steps: Dict[str, int], requested: Optional[int]) -> Dict[str, Any]:
    if profiler_steps:
        return {"count": len(profiler_steps), "source": "ProfilerStep#"}
    if sglang_steps:
        kinds = dict(sorted(sglang_steps.items()))
        for kind in _STEP_KINDS_BY_PREFERENCE:
            if kind in kinds:
                return {"count": kinds[kind], "source": "sglang step spans", "kind": kind, "kinds": kinds}
        return {"count": sum(kinds.values()), "source": "sglang step spans", "kinds": kinds}
    if requested:
        return {"count": int(requested), "source": "requested"}
    return {"count": 1, "source": "whole trace"}


def _size(path: str) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------
# Files written during a run
# ---------------------------------------------------------------------------------------

def listing(directory: str) -> Dict[str, Tuple[int, int]]:
    """{path: (size, mtime_ns)} of the trace files under `directory` (recursively)."""
    out: Dict[str, Tuple[int, int]] = {}
    for root, _dirs, files in os.walk(directory):
        for name in files:
            if is_trace_name(name):
                path = os.path.join(root, name)
                try:
                    st = os.stat(path)
                except OSError:
                    continue
                out[path] = (st.st_size, st.st_mtime_ns)
    return out


def written_since(directory: str, before: Dict[str, Tuple[int, int]]) -> List[str]:
    """Trace files under `directory` that are new or changed since `before` (a listing)."""
    now = listing(directory)
    return sorted(path for path, stat in now.items() if before.get(path) != stat)
