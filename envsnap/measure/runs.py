"""Run a benchmark command, parse its metrics, and build run records.

A run record (snapshot["runs"] items; model/types.py Run, model/schema.py _RUN):

    {"ok": bool, "exit_code": int|None, "duration_s": float, "started": "...Z",
     "metrics": {name: float}, "output_tail": str, "command": [argv, redacted],
     "source": "run"|"attach", "parsers": [...], "error": str (when not ok), "note": str,
     "telemetry": {...} (with RunOptions.telemetry: what the run did, see telemetry.py),
     "server_metrics": {...} (with RunOptions.server_metrics: what the SGLang server counted during
     the run, from its /metrics: server_metrics.py)}

A run that fails (non-zero exit, timeout, no metric found) is recorded with ok false and
no metrics: it is never a measurement, and it is never silently dropped either.
Warm-up runs are executed but not recorded.

One module, as one concept: `envsnap run`'s session (warm-up, repeats, metric specs, probe records written
during the runs, telemetry) around one run loop.
"""
from __future__ import annotations

import glob
import os
import statistics
import time
from dataclasses import dataclass, field
from typing import (
    TYPE_CHECKING,
    Callable,
    Dict,
    Iterable,
    List,
    Mapping,
    Optional,
    Sequence,
)

from envsnap.errors import EnvsnapError
from envsnap.format import plural
from envsnap.measure import DEFAULT_REPEAT, DEFAULT_RUN_TIMEOUT, metrics as metrics_mod
from envsnap.measure.parsers import MetricSpec, check_metric_name, parse_run
from envsnap.model.schema import metric_problem
from envsnap.model.snapshot import utc_now
from envsnap.redact import redact_argv, redact_text
from envsnap.subproc import run_command

if TYPE_CHECKING:
    from envsnap.measure.maps_sampling import MapsSampler
    from envsnap.measure.telemetry import Telemetry
    from envsnap.measure.trace_runs import ProfileRequest

OUTPUT_TAIL_LINES = 40
# A log or result file can be large (a server log of days): only this much of what a run
# appended is read.
MAX_APPENDED_BYTES = 32 * 1024 * 1024


# ---------------------------------------------------------------------------------------
# Options
# ---------------------------------------------------------------------------------------

def parse_direction_specs(specs: Sequence[str]) -> Dict[str, str]:
    """`NAME=higher|lower|none` strings -> {name: direction}."""
    out: Dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        value = value.strip().lower()
        if not sep or value not in metrics_mod.DIRECTIONS:
            raise EnvsnapError(f"--direction {spec!r}: expected NAME=higher, NAME=lower or NAME=none")
        out[check_metric_name(name.strip(), f"--direction {spec!r}")] = value
    return out


def parse_metric_values(specs: Sequence[str]) -> Dict[str, float]:
    """`NAME=VALUE` strings (for `attach`) -> {name: finite float}."""
    out: Dict[str, float] = {}
    for spec in specs:
        name, sep, raw = spec.partition("=")
        if not sep:
            raise EnvsnapError(f"--metric {spec!r}: expected NAME=VALUE (e.g. verify_ms=29)")
        name = check_metric_name(name.strip(), f"--metric {spec!r}")
        try:
            value = float(raw.strip())
        except ValueError:
            raise EnvsnapError(f"--metric {spec!r}: {raw.strip()!r} is not a number") from None
        problem = metric_problem(value)  # the loader's own test: never a file it would then refuse
        if problem:
            raise EnvsnapError(f"--metric {spec!r}: the value {problem}")
        out[name] = value
    return out


# ---------------------------------------------------------------------------------------
# Files a run appends to
# ---------------------------------------------------------------------------------------

def _flag_value(argv: Sequence[str], flag: str) -> Optional[str]:
    """The value of `--flag VALUE` / `--flag=VALUE` in argv (the last one wins, like argparse)."""
    value = None
    for i, arg in enumerate(argv):
        if arg == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(flag + "="):
            value = arg[len(flag) + 1:]
    return value


def _is_bench_serving(argv: Sequence[str]) -> bool:
    """`python -m sglang.bench_serving` / `sglang.benchmark.serving` (0.5.23), or either as a script."""
    scripts = (["sglang", "bench_serving.py"], ["sglang", "benchmark", "serving.py"])  # whole path components
    return any(a in ("sglang.bench_serving", "sglang.benchmark.serving")
               or any(a.replace(os.sep, "/").split("/")[-len(script):] == script for script in scripts)
               for a in argv[:6])


def result_files(argv: Sequence[str], cwd: str) -> List[str]:
    """Result files the SGLang benchmark in argv appends a JSONL line to (see result_patterns too).

    bench_serving appends to `--output-file`; bench_one_batch_server appends to
    `--result-filename`, default `result.jsonl` in its working directory
    (sglang 0.5.5 sglang/bench_one_batch_server.py BenchArgs.result_filename).
    """
    argv = [str(a) for a in argv]
    paths = []
    output_file = _flag_value(argv, "--output-file")
    if output_file:
        paths.append(output_file)
    result_filename = _flag_value(argv, "--result-filename")
    if result_filename:
        paths.append(result_filename)
    elif any("one_batch_server" in a for a in argv):
        paths.append("result.jsonl")
    return sorted({os.path.join(cwd, p) for p in paths})


def result_patterns(argv: Sequence[str], cwd: str) -> List[str]:
    """Glob patterns of result files whose exact name is only known once the benchmark writes them.

    Without --output-file, bench_serving appends its result line to
    `{backend}_{MMDD}_{num_prompts}_...jsonl` in its working directory, the date taken when it
    finishes (sglang 0.5.5 sglang/bench_serving.py:2119-2147, 0.5.23 sglang/benchmark/serving.py:1927-1961;
    --backend defaults to "sglang"): e.g. `sglang_1201_64_sharegpt.jsonl`.
    """
    argv = [str(a) for a in argv]
    if not _is_bench_serving(argv) or _flag_value(argv, "--output-file"):
        return []
    backend = _flag_value(argv, "--backend") or "sglang"
    return [os.path.join(glob.escape(cwd), glob.escape(backend) + "_[0-9][0-9][0-9][0-9]_*.jsonl")]


class AppendWatch:
    """Remembers where files end now, and later reads only what was appended since.

    `patterns` (globs) stand for files whose names are known only once written: those matching
    now are watched from their current end, those that appear later are read whole.
    """

    def __init__(self, paths: Iterable[str], patterns: Iterable[str] = ()):
        self.patterns = list(patterns)
        self.offsets: Dict[str, int] = {}
        for path in list(paths) + [p for pattern in self.patterns for p in glob.glob(pattern)]:
            try:
                self.offsets[path] = os.stat(path).st_size
            except OSError:
                self.offsets[path] = 0  # created during the run: all of it is new

    def read(self) -> Dict[str, str]:
        out: Dict[str, str] = {}
        for pattern in self.patterns:
            for path in glob.glob(pattern):
                self.offsets.setdefault(path, 0)  # appeared during the run
        for path, offset in sorted(self.offsets.items(), key=lambda item: _mtime(item[0])):
            try:
                size = os.stat(path).st_size
                if size < offset:
                    offset = 0  # rotated or rewritten during the run: read it all
                start = max(offset, size - MAX_APPENDED_BYTES)
                with open(path, "rb") as handle:
                    handle.seek(start)
                    data = handle.read(size - start)
            except OSError:
                continue
            out[path] = data.decode("utf-8", "replace")
        return out


def _mtime(path: str) -> float:
    try:
        return os.stat(path).st_mtime
    except OSError:
        return 0.0


# ---------------------------------------------------------------------------------------
# One run
# ---------------------------------------------------------------------------------------

def _tail(text: str, lines: int = OUTPUT_TAIL_LINES) -> str:
    kept = text.splitlines()[-lines:]
    return redact_text("\n".join(kept))


@dataclass
class RunOptions:
    command: List[str]
    # 5: the fewest runs a side with which fully separated runs are significant by a margin
    # (exact Mann-Whitney: 5 vs 5 gives p = 0.008; 4 vs 4 0.029; 3 vs 3 never below 0.1).
    repeat: int = DEFAULT_REPEAT
    warmup: int = 0
    custom: List[MetricSpec] = field(default_factory=list)
    logs: List[str] = field(default_factory=list)
    timeout: float = DEFAULT_RUN_TIMEOUT
    cwd: Optional[str] = None
    env: Optional[Mapping[str, str]] = None
    # When set, a run without this metric is a failed run.
    require_metric: Optional[str] = None
    # Record what each run did (CPU, context switches, memory, CPU set, GPUs): telemetry.py.
    telemetry: bool = False
    # Processes given with --pid/--sglang, {process key: pid}: their counters' deltas per run.
    watch: Dict[str, int] = field(default_factory=dict)
    # --trace DIR: profiler traces written there during a run are summarised into its record
    # (trace_runs.py); `profile` asks an SGLang server to write them (--profile-steps).
    trace_dir: Optional[str] = None
    profile: Optional["ProfileRequest"] = None
    # --sglang-url of a server that serves /metrics: its counters are read before and after each run
    # (server_metrics.py), the run's own accept length among them.
    server_metrics: Optional[str] = None


def run_once(opts: RunOptions, telemetry: Optional["Telemetry"] = None, label: str = "run",
             sessions: Optional[List[int]] = None) -> Dict:
    """Run the command once; return its run record (never raises, except KeyboardInterrupt).

    With opts.telemetry, the record has "telemetry"; pass a session's Telemetry to share its
    NVML handle and process cache between runs (else one is opened for this run alone).
    With opts.trace_dir, the record has "trace": the summaries of the profiler traces the run wrote.
    `sessions` gets the command's session id (its pid: run_command starts it in a session of its own),
    which tells the command's processes from a server's.
    """
    cwd = opts.cwd or os.getcwd()
    logs = AppendWatch([os.path.abspath(p) for p in opts.logs])
    files = AppendWatch(result_files(opts.command, cwd), result_patterns(opts.command, cwd))
    started = utc_now()
    own = None
    if telemetry is None and opts.telemetry:
        from envsnap.measure.telemetry import Telemetry

        telemetry = own = Telemetry(opts.watch)
    watch = None
    if opts.trace_dir:
        from envsnap.measure.trace_runs import TraceWatch

        watch = TraceWatch(opts.trace_dir, opts.profile)
        watch.begin(label)
    server = None
    if opts.server_metrics:
        from envsnap.measure.server_metrics import ServerMetrics

        server = ServerMetrics(opts.server_metrics)
        server.begin()
    sampler = telemetry.begin() if telemetry is not None else None
    try:
        result = run_command(opts.command, timeout=opts.timeout, cwd=cwd, env=opts.env)
        if sessions is not None and result.pid is not None:
            sessions.append(result.pid)
        usage = sampler.finish(result.elapsed_s) if sampler is not None else None
    finally:
        if sampler is not None:
            sampler.stop()
        if own is not None:
            own.close()
    output = result.stdout + ("\n" if result.stdout and result.stderr else "") + result.stderr
    log_text = "\n".join(logs.read().values())
    parsed = parse_run(result.stdout + "\n" + result.stderr, log_text=log_text, files=files.read(),
                       custom=opts.custom, json_texts=[result.stdout, result.stderr])
    server_record = None
    if server is not None:
        from envsnap.measure import server_metrics

        server_record, own_metrics = server.finish()
        server_metrics.merge(parsed.metrics, own_metrics, parsed.notes, parsed.parsers)
        problem = server_metrics.problem_note(server_record)
        if problem:
            parsed.notes.append(problem)
    record: Dict = {
        "ok": False,
        "exit_code": result.returncode,
        "duration_s": round(result.elapsed_s, 4),
        "started": started,
        "metrics": {},
        "output_tail": _tail(output),
        "command": redact_argv(opts.command),
        "source": "run",
        "parsers": [],
    }
    error = result.error
    if error is None and not parsed.metrics:
        error = "no metric found in the output (add --metric NAME=REGEX)"
    if error is None and opts.require_metric and opts.require_metric not in parsed.metrics:
        found = ", ".join(sorted(parsed.metrics)) or "none"
        error = f"metric {opts.require_metric!r} not in the output (found: {found})"
    if error is None:
        record["ok"] = True
        record["metrics"] = {k: parsed.metrics[k] for k in sorted(parsed.metrics)}
        record["parsers"] = parsed.parsers
    else:
        record["error"] = redact_text(error)
    if parsed.notes:
        record["note"] = "; ".join(dict.fromkeys(parsed.notes))
    if usage is not None:
        record["telemetry"] = usage
    if watch is not None:
        record["trace"] = watch.finish()
    if server_record is not None:
        record["server_metrics"] = server_record
    return record


# ---------------------------------------------------------------------------------------
# A series of runs
# ---------------------------------------------------------------------------------------

def main_metric(names: Iterable[str], preferred: Sequence[str] = ()) -> Optional[str]:
    """The metric to show first: a --metric the user named, else a throughput, else the first."""
    names = set(names)
    for name in preferred:
        if name in names:
            return name
    for name in metrics_mod.THROUGHPUT_NAMES:
        if name in names:
            return name
    for name in sorted(names):
        if metrics_mod.role(name) == "throughput" or "throughput" in name or name.endswith("tok_s"):
            return name
    return sorted(names)[0] if names else None


def describe(record: Dict, metric: Optional[str]) -> str:
    if not record.get("ok"):
        return f"failed: {record.get('error', 'unknown error')}"
    metrics = record.get("metrics", {})
    name = metric if metric in metrics else main_metric(metrics)
    shown = f"{name} {metrics[name]:.6g}" if name else "ok"
    return f"{shown} ({record.get('duration_s', 0):.1f} s)"


@dataclass
class RunSession:
    """The runs of one `envsnap run`; `records` fills as runs finish (kept on Ctrl-C)."""

    opts: RunOptions
    records: List[Dict] = field(default_factory=list)
    warmups_done: int = 0
    # When each run ran: {"run": 1-based number or "warmup N", "start": epoch s, "end": epoch s, "sid": the
    # command's session id} (the probe's records are matched to runs, and told from a server's, by these).
    windows: List[Dict] = field(default_factory=list)
    # What the command's processes mapped, run by run (telemetry's maps_sampling.MapsSampler).
    maps: Optional["MapsSampler"] = None

    def execute(self, progress: Optional[Callable[[str], None]] = None) -> List[Dict]:
        preferred = [name for name, _ in self.opts.custom]
        telemetry = None
        if self.opts.telemetry:
            from envsnap.measure.telemetry import Telemetry

            telemetry = Telemetry(self.opts.watch)
            self.maps = telemetry.maps
        try:
            for i in range(self.opts.warmup):
                record = self._timed(f"warmup {i + 1}", telemetry)
                self.warmups_done += 1
                if progress:
                    progress(f"warm-up {i + 1}/{self.opts.warmup}: {describe(record, None)}")
            for i in range(self.opts.repeat):
                record = self._timed(i + 1, telemetry)
                self.records.append(record)
                if progress:
                    progress(f"run {i + 1}/{self.opts.repeat}: "
                             f"{describe(record, main_metric(record['metrics'], preferred))}")
        finally:
            if telemetry is not None:
                telemetry.close()
        return self.records

    def _timed(self, label, telemetry) -> Dict:
        start = time.time()
        sessions: List[int] = []
        try:
            return run_once(self.opts, telemetry, label=str(label).replace(" ", ""), sessions=sessions)
        finally:
            window = {"run": label, "start": start, "end": time.time()}
            if sessions:
                window["sid"] = sessions[0]
            self.windows.append(window)

    def session_info(self, interrupted: bool) -> Dict:
        info = {
            "command": redact_argv(self.opts.command),
            # Where the command ran: the analysis tells a checkout the benchmark ran from (analysis/rank/running.py).
            "cwd": redact_text(self.opts.cwd or os.getcwd()),
            "repeat": self.opts.repeat,
            "warmup": self.opts.warmup,
            "warmups_done": self.warmups_done,
            "completed": len(self.records),
            "ok": sum(1 for r in self.records if r.get("ok")),
            "interrupted": interrupted,
        }
        if self.opts.custom:
            info["metric_regexes"] = {name: redact_text(regex.pattern) for name, regex in self.opts.custom}
        return info


def stored_metric_regexes(snapshot: Mapping) -> Dict[str, str]:
    """{name: regex} that `envsnap run --metric NAME=REGEX` stored with the snapshot's run session
    (redacted like everything else: a regex that looked like a secret holds `redacted:…`)."""
    session = snapshot.get("run_session")
    stored = session.get("metric_regexes") if isinstance(session, dict) else None
    if not isinstance(stored, dict):
        return {}
    return {str(k): v for k, v in stored.items() if isinstance(v, str) and v}


def summary(records: Sequence[Dict], preferred: Sequence[str] = ()) -> str:
    """'5 runs (4 ok, 1 failed); tok_s median 812.5' for the closing line."""
    ok = [r for r in records if r.get("ok")]
    text = f"{plural(len(records), 'run')} ({len(ok)} ok, {len(records) - len(ok)} failed)"
    names = set()
    for r in ok:
        names.update(r.get("metrics", {}))
    name = main_metric(names, preferred)
    if name:
        median = statistics.median(r["metrics"][name] for r in ok if name in r.get("metrics", {}))
        text += f"; {name} median {median:.6g}"
    return text


def attach_record(metrics: Mapping[str, float], note: Optional[str] = None, trace: Optional[Dict] = None) -> Dict:
    """A measurement made elsewhere: no command, no output, source "attach" (a trace summary alone is one too)."""
    if not metrics and not trace:
        raise EnvsnapError("attach needs at least one --metric NAME=VALUE")
    record: Dict = {
        "ok": True,
        "exit_code": None,
        "duration_s": 0.0,
        "started": utc_now(),
        "metrics": {k: float(metrics[k]) for k in sorted(metrics)},
        "output_tail": "",
        "command": [],
        "source": "attach",
        "parsers": [],
    }
    if note:
        record["note"] = redact_text(note)
    if trace:
        record["trace"] = trace
    return record


def merge_directions(snapshot: Dict, directions: Mapping[str, str]) -> None:
    if directions:
        stored = dict(snapshot.get("metric_directions") or {})
        stored.update(directions)
        snapshot["metric_directions"] = {k: stored[k] for k in sorted(stored)}

