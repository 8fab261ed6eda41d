"""Metric parsers: turn a benchmark's output (and the files it wrote) into {name: float}.

Built in, no options needed; each recognises one real output format, read from SGLang's
own source (the wheel paths are `sglang/...`, the repository paths `python/sglang/...`):

  bench_serving          the summary table `python -m sglang.bench_serving` prints
                         (sglang 0.4.6 and 0.5.5 sglang/bench_serving.py, 0.5.23
                         sglang/benchmark/serving.py, `benchmark()`: the "{:<40} {:<10.2f}" lines
                         under " Serving Benchmark Result "), each number under the name the
                         JSONL line gives it ("Peak output token throughput" is max_output_tokens_per_s).
  bench_serving_jsonl    the line it appends to `--output-file`, or without it to
                         `<backend>_<MMDD>_....jsonl` in its working directory (same function, the
                         `result` dict; runs.result_files finds that file).
  bench_one_batch_server the lines `python -m sglang.bench_one_batch_server` prints per case
                         (0.4.6 / 0.5.5 sglang/bench_one_batch_server.py `run_one_case`;
                         0.5.23 sglang/benchmark/one_batch_server.py).
  bench_one_batch_server_jsonl
                         the line it appends to `--result-filename` (default result.jsonl;
                         0.5.23 `BenchOneCaseResult.dump_to_jsonl` adds acc_length).
  decode_log             the scheduler's periodic "Decode batch" log line, in its three forms:
                         "Decode batch. #running-req: ..." (0.4.6 srt/managers/scheduler.py
                         `log_decode_stats`), "Decode batch, #running-req: ..." and, with
                         SGLANG_LOG_FORWARD_ITERS=1, "Decode batch [1234], ..." (0.5.5
                         srt/managers/scheduler_metrics_mixin.py `log_decode_stats`).
  json_line              the last line of the output that is a JSON object: its top-level numbers.
  regex                  `--metric NAME=REGEX`: the first group of the last match.

When several parsers find the same name, the more exact source wins:
regex > JSONL files > printed summaries > decode log > JSON line.

One module, as one concept: one parser per benchmark output format, each citing the upstream code that prints
it.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import dataclass, field
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.errors import EnvsnapError
from envsnap.model.schema import metric_problem

Metrics = Dict[str, float]

# bench_serving's accept length is not a per-run number: it reads the server's
# `avg_spec_accept_length` from /get_server_info, which sglang 0.5.5
# srt/managers/scheduler.py `get_internal_state` computes over every request since the
# server started (reset only by /flush_cache). A before/after comparison on one server
# therefore mixes runs; the decode log's `accept len` covers its own interval only.
ACCEPT_LENGTH_CAVEAT = (
    "{name} is the server's running average since it started or last flushed its cache "
    "(/get_server_info avg_spec_accept_length), not this run alone"
)


@dataclass
class ParseResult:
    metrics: Metrics = field(default_factory=dict)
    parsers: List[str] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)


def _number(text: str) -> Optional[float]:
    """A finite float from text like '1234.56', '1,234.5' or '12%'; None otherwise."""
    cleaned = text.strip().rstrip("%").replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _finite(value) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        value = float(value)
    except OverflowError:  # a JSON integer of 400 digits
        return None
    return value if math.isfinite(value) else None


# ---------------------------------------------------------------------------------------
# bench_serving: printed summary
# ---------------------------------------------------------------------------------------

_SERVING_HEADER = "Serving Benchmark Result"
# Printed labels -> the key the same number has in the --output-file JSONL, so that a run
# parsed from stdout and one parsed from the file name their metrics alike.
_SERVING_LABELS = {
    "Successful requests": "completed",
    "Benchmark duration (s)": "duration",
    "Total input tokens": "total_input_tokens",
    "Total input text tokens": "total_input_text_tokens",
    "Total input vision tokens": "total_input_vision_tokens",
    "Total generated tokens": "total_output_tokens",
    "Total generated tokens (retokenized)": "total_output_tokens_retokenized",
    "Request throughput (req/s)": "request_throughput",
    "Input token throughput (tok/s)": "input_throughput",
    "Output token throughput (tok/s)": "output_throughput",
    "Total token throughput (tok/s)": "total_throughput",
    "Concurrency": "concurrency",
    "Accept length": "accept_length",
    # sglang 0.5.23 sglang/benchmark/serving.py prints these two as "Peak ..."; its result dict (the JSONL)
    # names them max_output_tokens_per_s and max_concurrent_requests: one metric, one name.
    "Peak output token throughput (tok/s)": "max_output_tokens_per_s",
    "Peak concurrent requests": "max_concurrent_requests",
    # --cache-report (0.5.23): the JSONL's cache_report dict names it cache_hit_rate_pct.
    "Cache hit rate": "cache_hit_rate_pct",
}
# Labels that echo the benchmark's arguments, not results.
_SERVING_ARGUMENT_LABELS = {"Backend", "Traffic request rate", "Max request concurrency"}
# Printed in percent, stored in the JSONL as a fraction (sglang 0.5.23 sglang/benchmark/goodput.py
# print_goodput: `slo_attainment * 100`): stored as the fraction, under the JSONL's name.
_PERCENT_OF_FRACTION = " SLO attainment (%)"
_SUMMARY_LINE = re.compile(r"^(?P<label>[A-Za-z][^:\n]*?):\s+(?P<value>\S+)\s*$")


def _slug(label: str) -> str:
    """'P95 ITL (ms)' -> 'p95_itl_ms', 'Mean E2E Latency (ms)' -> 'mean_e2e_latency_ms'."""
    text = label.lower().replace("(tok/s)", "").replace("(req/s)", "")
    text = re.sub(r"\((ms|s)\)", r"_\1", text)
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def parse_bench_serving(text: str) -> Tuple[Metrics, List[str]]:
    """Metrics from the last " Serving Benchmark Result " block of bench_serving's stdout."""
    start = text.rfind(_SERVING_HEADER)
    if start < 0:
        return {}, []
    blocks = text.count(_SERVING_HEADER)
    metrics: Metrics = {}
    for line in text[start:].splitlines()[1:]:
        stripped = line.strip()
        if stripped.startswith("=" * 10):  # the closing rule of the table
            break
        if line[:1].isspace():
            continue  # "  Device:" / "  Host:" breakdowns of the cache report, once as counts, once as %
        match = _SUMMARY_LINE.match(stripped)
        if not match:
            continue  # section rules like "-----Time to First Token-----"
        label = match.group("label").strip()
        if label in _SERVING_ARGUMENT_LABELS:
            continue
        value = _number(match.group("value"))
        if value is None:
            continue
        if (" " + label).endswith(_PERCENT_OF_FRACTION):
            key, value = _slug(label[: -len(" (%)")]), value / 100.0
        else:
            key = _SERVING_LABELS.get(label) or _slug(label)
        metrics[key] = value
    notes = []
    if blocks > 1 and metrics:
        notes.append(f"bench_serving printed {blocks} result tables; metrics are from the last")
    return metrics, notes


# ---------------------------------------------------------------------------------------
# JSONL files (bench_serving --output-file, bench_one_batch_server --result-filename)
# ---------------------------------------------------------------------------------------

# bench_serving `result` keys that echo arguments rather than measure anything.
_SERVING_JSONL_ARGUMENTS = {"request_rate", "max_concurrency", "sharegpt_output_len", "random_input_len",
                            "random_output_len", "random_range_ratio"}
# bench_one_batch_server keys that describe the case rather than measure it (its token counts are
# kept: metrics.direction gives counts no better direction).
_ONE_BATCH_CASE_KEYS = ("batch_size", "input_len", "output_len")
_ONE_BATCH_NOT_METRICS = set(_ONE_BATCH_CASE_KEYS) | {"steady_state_window_s"}


def _json_objects(text: str) -> List[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


def _is_serving_result(obj: dict) -> bool:
    return "output_throughput" in obj and ("median_ttft_ms" in obj or "mean_itl_ms" in obj)


def _is_one_batch_result(obj: dict) -> bool:
    return "output_throughput" in obj and "batch_size" in obj and "latency" in obj


def parse_bench_serving_jsonl(text: str) -> Tuple[Metrics, List[str]]:
    results = [o for o in _json_objects(text) if _is_serving_result(o)]
    if not results:
        return {}, []
    last = results[-1]
    metrics = {}
    for key, value in last.items():
        number = _finite(value)
        if number is not None and key not in _SERVING_JSONL_ARGUMENTS:
            metrics[key] = number
    # Nested results (sglang 0.5.23 sglang/benchmark/serving.py): --cache-report's numbers, and the goodput
    # attainment per SLO metric, under the names the printed table gives them.
    for key, value in (last.get("cache_report") or {}).items() if isinstance(last.get("cache_report"), dict) else ():
        number = _finite(value)
        if number is not None:
            metrics[str(key)] = number
    by_metric = last.get("slo_attainment_by_metric")
    for name, value in (by_metric.items() if isinstance(by_metric, dict) else ()):
        number = _finite(value)
        if number is not None:
            metrics[f"{_slug(str(name))}_slo_attainment"] = number
    notes = [f"bench_serving wrote {len(results)} results; metrics are from the last"] if len(results) > 1 else []
    return metrics, notes


def _one_batch_metrics(obj: Mapping) -> Metrics:
    metrics = {}
    for key, value in obj.items():
        number = _finite(value)
        if number is None or key in _ONE_BATCH_NOT_METRICS:
            continue
        # -1 is the script's "not available" (no speculative decoding, vLLM backend).
        if key in ("acc_length", "last_gen_throughput") and number < 0:
            continue
        metrics[key] = number
    return metrics


def parse_one_batch_server_jsonl(text: str) -> Tuple[Metrics, List[str]]:
    results = [o for o in _json_objects(text) if _is_one_batch_result(o) and not _is_serving_result(o)]
    if not results:
        return {}, []
    last = results[-1]
    notes = []
    cases = {tuple(r.get(k) for k in _ONE_BATCH_CASE_KEYS) for r in results}
    if len(cases) > 1:
        case = ", ".join(f"{k}={last.get(k)}" for k in _ONE_BATCH_CASE_KEYS)
        notes.append(f"bench_one_batch_server measured {len(cases)} cases; metrics are from the last ({case})")
    return _one_batch_metrics(last), notes


# ---------------------------------------------------------------------------------------
# bench_one_batch_server: printed lines
# ---------------------------------------------------------------------------------------

# "<label>: <number> [unit]" lines printed by run_one_case, label -> JSONL key.
_ONE_BATCH_LINES = {
    "latency": "latency",
    "ttft": "ttft",
    "last_ttft": "last_ttft",
    "input throughput": "input_throughput",
    "output throughput": "output_throughput",
    "(input + output) throughput": "overall_throughput",  # 0.4.6
    "last generation throughput": "last_gen_throughput",
    "acc_length": "acc_length",
    "cache hit rate": "cache_hit_rate",
}
_ONE_BATCH_LINE = re.compile(r"^(?P<label>[a-z_()+ ]+?):\s+(?P<value>-?[0-9][0-9.,eE+-]*)\s*(?:tok/s|token/s|s)?\s*$")
_BATCH_SIZE_LINE = re.compile(r"^batch size:\s+\d+\s*$", re.M)


def parse_one_batch_server(text: str) -> Tuple[Metrics, List[str]]:
    """Metrics from the last case bench_one_batch_server printed (its warm-up prints the same lines first)."""
    starts = [m.start() for m in _BATCH_SIZE_LINE.finditer(text)]
    if not starts:
        return {}, []
    metrics: Metrics = {}
    for line in text[starts[-1]:].splitlines()[1:]:
        match = _ONE_BATCH_LINE.match(line.strip())
        if not match:
            if metrics:
                break
            continue
        key = _ONE_BATCH_LINES.get(match.group("label").strip())
        value = _number(match.group("value"))
        if key and value is not None:
            metrics[key] = value
    metrics = _one_batch_metrics(metrics)
    notes = []
    if len(starts) > 1 and metrics:
        notes.append(f"bench_one_batch_server printed {len(starts)} cases (warm-up included); metrics are from the last")
    return metrics, notes


# ---------------------------------------------------------------------------------------
# The scheduler's decode log
# ---------------------------------------------------------------------------------------

_DECODE_LINE = re.compile(r"Decode batch(?:\.|,| \[\d+\],)(?P<rest>[^\n]*)")
_ACCEPT_LEN = re.compile(r"accept len: (?P<v>[0-9]+(?:\.[0-9]+)?)")
_GEN_THROUGHPUT = re.compile(r"gen throughput \(token/s\): (?P<v>[0-9]+(?:\.[0-9]+)?)")
_RUNNING_REQ = re.compile(r"#running-req: (?P<v>[0-9]+)")


def parse_decode_log(text: str) -> Tuple[Metrics, List[str]]:
    """Median over the "Decode batch" lines of `gen throughput (token/s)` and `accept len`.

    Each line covers the scheduler's last decode_log_interval steps (40 by default); the
    median keeps the ramp-up and drain at the edges of a run from dominating.
    """
    throughputs: List[float] = []
    accept: List[float] = []
    cycles: List[float] = []
    lines = 0
    for match in _DECODE_LINE.finditer(text):
        rest = match.group("rest")
        running = _RUNNING_REQ.search(rest)
        if running and running.group("v") == "0":
            continue  # an idle interval says nothing about decode speed
        lines += 1
        t = _GEN_THROUGHPUT.search(rest)
        if t:
            throughputs.append(float(t.group("v")))
        a = _ACCEPT_LEN.search(rest)
        if a:
            accept.append(float(a.group("v")))
        if t and a and running and float(t.group("v")) > 0:
            # gen throughput is the whole batch's tokens per second and accept len the tokens each
            # request gains per verify cycle (sglang 0.5.23 srt/managers/scheduler_components/
            # metrics_reporter.py), so one cycle takes #running-req x accept len / throughput.
            cycles.append(1000.0 * float(running.group("v")) * float(a.group("v")) / float(t.group("v")))
    metrics: Metrics = {}
    if throughputs:
        metrics["gen_throughput"] = float(statistics.median(throughputs))
    if accept:
        metrics["accept_len"] = float(statistics.median(accept))
    if cycles:
        metrics["decode_cycle_ms"] = float(statistics.median(cycles))
    notes = [f"decode log: median over {lines} 'Decode batch' lines"] if metrics else []
    return metrics, notes


# ---------------------------------------------------------------------------------------
# A final JSON object line, and --metric NAME=REGEX
# ---------------------------------------------------------------------------------------

def parse_json_line(text: str) -> Tuple[Metrics, List[str]]:
    """Top-level numbers of the last line that is a JSON object (e.g. `{"tok_s": 812.5}`)."""
    for obj in reversed(_json_objects(text)):
        metrics = {str(k): v for k, v in ((k, _finite(v)) for k, v in obj.items()) if v is not None}
        if metrics:
            return metrics, []
    return {}, []


MetricSpec = Tuple[str, "re.Pattern[str]"]
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:\-]*$")


def check_metric_name(name: str, where: str) -> str:
    if not _NAME.match(name or ""):
        raise EnvsnapError(f"{where}: metric name {name!r} must be letters, digits, '_', '.', ':' or '-'")
    return name


def parse_metric_specs(specs: Sequence[str], option: str = "--metric") -> List[MetricSpec]:
    """`NAME=REGEX` strings -> [(name, compiled regex)]; the regex needs one capturing group."""
    out: List[MetricSpec] = []
    for spec in specs:
        name, sep, pattern = spec.partition("=")
        if not sep or not pattern:
            raise EnvsnapError(f"{option} {spec!r}: expected NAME=REGEX")
        check_metric_name(name.strip(), f"{option} {spec!r}")
        try:
            regex = re.compile(pattern, re.M)
        except re.error as exc:
            raise EnvsnapError(f"{option} {spec!r}: invalid regular expression: {exc}") from None
        if regex.groups < 1:
            raise EnvsnapError(f"{option} {spec!r}: the regular expression needs a (group) around the number")
        out.append((name.strip(), regex))
    return out


def parse_custom(texts: Sequence[str], specs: Sequence[MetricSpec]) -> Tuple[Metrics, List[str]]:
    """First group of the last match, searched in the texts in order (output first, then logs)."""
    metrics: Metrics = {}
    notes: List[str] = []
    for name, regex in specs:
        for text in texts:
            matches = list(regex.finditer(text))
            if not matches:
                continue
            raw = matches[-1].group(1)
            value = _number(raw) if raw is not None else None
            if value is None:
                notes.append(f"--metric {name}: last match {str(raw)[:40]!r} is not a number")
            else:
                metrics[name] = value
            break
    return metrics, notes


# ---------------------------------------------------------------------------------------
# Everything together
# ---------------------------------------------------------------------------------------

def parse_run(
    output: str,
    log_text: str = "",
    files: Optional[Mapping[str, str]] = None,
    custom: Sequence[MetricSpec] = (),
    json_texts: Optional[Sequence[str]] = None,
) -> ParseResult:
    """All metrics of one run: its output, what it appended to --log files and to result files.

    `json_texts`: where to look for the final JSON line, in order (stdout before stderr, so
    a structured log line on stderr does not hide the benchmark's result); default `output`.
    """
    result = ParseResult()
    file_text = "\n".join((files or {}).values())

    def json_line() -> Tuple[Metrics, List[str]]:
        for text in (json_texts if json_texts is not None else [output]):
            found = parse_json_line(text)
            if found[0]:
                return found
        return {}, []

    # Lowest priority first: later updates win on a name clash.
    steps = [
        ("json_line", json_line),
        ("decode_log", lambda: parse_decode_log(output + "\n" + log_text)),
        ("bench_one_batch_server", lambda: parse_one_batch_server(output)),
        ("bench_serving", lambda: parse_bench_serving(output)),
        ("bench_one_batch_server_jsonl", lambda: parse_one_batch_server_jsonl(file_text)),
        ("bench_serving_jsonl", lambda: parse_bench_serving_jsonl(file_text)),
        ("regex", lambda: parse_custom([output, log_text], custom)),
    ]
    for name, step in steps:
        metrics, notes = step()
        result.notes.extend(notes)
        if metrics:
            result.metrics.update(metrics)
            result.parsers.append(name)
    for name in ("accept_length", "acc_length"):
        source_is_server = any(p.startswith("bench_") for p in result.parsers)
        if name in result.metrics and source_is_server:
            result.notes.append(ACCEPT_LENGTH_CAVEAT.format(name=name))
    for name in sorted(result.metrics):
        problem = metric_problem(result.metrics[name])
        if problem:  # kept, the snapshot could not be loaded again: said, not stored
            result.notes.append(f"{name} = {result.metrics.pop(name):g} not kept: a metric {problem}")
    return result
