"""A running SGLang server's own account of itself (`--sglang-url URL`): version, resolved args, live state.

Routes, read from SGLang's source (srt/entrypoints/http_server.py):
- 0.4.6: GET /get_server_info -> one flat object: every ServerArgs field
  (dataclasses.asdict), the scheduler info ("status", "max_total_num_tokens",
  "max_req_input_len"), the first scheduler's internal state merged in
  ("last_gen_throughput", "avg_spec_accept_length", ...) and "version".
- 0.5.5: same route; the internal states become a list, one per DP rank, under
  "internal_states" (each repeats the server args plus "last_gen_throughput",
  "memory_usage", "avg_spec_accept_length" when speculative decoding ran).
- 0.5.23: GET /server_info (and /get_server_info, deprecated, answering the same):
  ServerArgs.resolved_dict() plus "launch_command", the scheduler info, "kv_events",
  "startup_time", "internal_states", "version", "frontend".
So: ask /server_info, fall back to /get_server_info on 404/405 (older servers).
Then `/metrics` (Prometheus, only with --enable-metrics; sglang_metrics.py says what it holds): kept
compact under "metrics", the server's running counters since it started (`envsnap run` records their
change across each run, measure/server_metrics.py).
"""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.format import plural
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    DRAFTER,
    GRAPHS,
    KERNELS,
    MEMORY,
    NONE,
    SectionRules,
    rule,
    volatile,
)
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"url": "str", "endpoint": "str", "version": "str", "server_args": "dict",
         "internal_states": ("list", "dict"),
         "metrics": {"counters": ("map", "num"), "gauges": ("map", "num"),
                     "histograms": ("map", {"count": "num", "sum": "num"}), "skipped": "num"},
         "metrics_unavailable": "str"}
RULES = SectionRules(category="sglang", component=NONE, compares="SGLang server args", rules=(
    volatile("sglang.internal_states*.last_gen_throughput", "a running measurement, not configuration"),
    volatile("sglang.startup_time", "a timestamp"),
    volatile("sglang.internal_states*.memory_usage*", "memory in use"),
    volatile("sglang.server_args.random_seed", "random per launch unless given"),
    # sglang 0.5.23 srt/observability/metrics_collector.py: running counters, gauges of the last decode-log
    # interval and latency histograms since the server started (sglang_metrics.py): measurements, compared
    # per run as deltas (measure/server_metrics.py), never between two captures.
    volatile("sglang.metrics_unavailable", "whether /metrics is served (--enable-metrics): how it is observed"),
    volatile("sglang.metrics*", "the server's running counters and gauges (/metrics), measurements"),

    # --- SGLang server args (line numbers: sglang 0.5.5 sglang/srt/server_args.py, ServerArgs dataclass lines
    # 240-500; sglang 0.5.23 keeps the same names in sglang/srt/arg_groups/fields/{exec_,parallel,spec,schedule,
    # model}.py and splits cuda_graph_max_bs / cuda_graph_bs into *_decode and *_prefill) ---
    # sglang 0.5.5 server_args.py:478 disable_custom_all_reduce: decode all-reduces then go through NCCL.
    rule("sglang.args.disable_custom_all_reduce", "sglang", COMMUNICATION, 0.85, "custom all-reduce on/off: small decode all-reduces switch between SGLang's kernel and NCCL"),
    rule("sglang.args.tp_size", "sglang", COMMUNICATION, 0.9, "a different tensor-parallel size"),
    rule("sglang.args.dp_size", "sglang", COMMUNICATION, 0.7, "a different data-parallel size"),
    rule("sglang.args.ep_size", "sglang", COMMUNICATION, 0.6, "a different expert-parallel size"),
    rule("sglang.args.enable_dp_attention", "sglang", COMMUNICATION, 0.7, "DP attention changes the attention/communication layout"),
    # sglang 0.5.5 server_args.py:472-480 enable_nccl_nvls / enable_symm_mem / enable_mscclpp: alternative all-reduce paths.
    rule("sglang.args.enable_nccl_nvls", "sglang", COMMUNICATION, 0.6, "NCCL NVLS all-reduce on/off"),
    rule("sglang.args.enable_symm_mem", "sglang", COMMUNICATION, 0.55, "symmetric-memory all-reduce on/off"),
    rule("sglang.args.enable_mscclpp", "sglang", COMMUNICATION, 0.55, "MSCCL++ all-reduce on/off"),
    rule("sglang.args.enable_torch_symm_mem", "sglang", COMMUNICATION, 0.5, "torch symmetric-memory all-reduce on/off"),
    rule("sglang.args.enable_flashinfer_allreduce_fusion", "sglang", COMMUNICATION, 0.6, "FlashInfer all-reduce fusion on/off"),
    # sglang 0.5.5 server_args.py:371-382 speculative_*: the EAGLE-3 drafter's shape.
    rule("sglang.args.speculative_algorithm", "sglang", DRAFTER, 0.9, "a different speculative algorithm"),
    rule("sglang.args.speculative_draft_model_path", "sglang", DRAFTER, 0.85, "a different draft model"),
    rule("sglang.args.speculative_draft_model_revision", "sglang", DRAFTER, 0.7, "a different draft model revision"),
    rule("sglang.args.speculative_num_steps", "sglang", DRAFTER, 0.8, "draft steps per cycle changed"),
    rule("sglang.args.speculative_eagle_topk", "sglang", DRAFTER, 0.8, "draft tree width changed"),
    rule("sglang.args.speculative_num_draft_tokens", "sglang", DRAFTER, 0.8, "tokens verified per cycle changed"),
    rule("sglang.args.speculative_accept_threshold*", "sglang", DRAFTER, 0.6, "acceptance threshold changed"),
    rule("sglang.args.speculative_*", "sglang", DRAFTER, 0.5, "a speculative-decoding setting changed"),
    # sglang 0.5.5 server_args.py:361-364: kernel backends.
    rule("sglang.args.attention_backend", "sglang", KERNELS, 0.75, "a different attention backend"),
    rule("sglang.args.decode_attention_backend", "sglang", KERNELS, 0.75, "a different decode attention backend"),
    rule("sglang.args.prefill_attention_backend", "sglang", KERNELS, 0.4, "a different prefill attention backend"),
    rule("sglang.args.sampling_backend", "sglang", KERNELS, 0.35, "a different sampling backend"),
    rule("sglang.args.moe_runner_backend", "sglang", KERNELS, 0.6, "a different MoE kernel backend"),
    # sglang 0.5.5 server_args.py:466-468, 488: CUDA graphs and torch.compile.
    rule("sglang.args.disable_cuda_graph", "sglang", GRAPHS, 0.9, "CUDA graphs on/off (launch overhead of every decode step)"),
    rule("sglang.args.cuda_graph_max_bs_prefill", "sglang", GRAPHS, 0.4, "largest prefill batch captured in CUDA graphs changed"),
    rule("sglang.args.cuda_graph_max_bs*", "sglang", GRAPHS, 0.7, "largest batch captured in CUDA graphs changed"),
    rule("sglang.args.cuda_graph_bs_prefill", "sglang", GRAPHS, 0.35, "captured prefill CUDA-graph batch sizes changed"),
    rule("sglang.args.cuda_graph_bs*", "sglang", GRAPHS, 0.6, "captured CUDA-graph batch sizes changed"),
    rule("sglang.args.disable_cuda_graph_padding", "sglang", GRAPHS, 0.5, "CUDA-graph padding changed"),
    rule("sglang.args.enable_torch_compile", "sglang", GRAPHS, 0.6, "torch.compile on/off"),
    rule("sglang.args.torch_compile_max_bs", "sglang", GRAPHS, 0.4, "torch.compile batch limit changed"),
    rule("sglang.args.enable_piecewise_cuda_graph", "sglang", GRAPHS, 0.5, "piecewise CUDA graphs on/off"),
    rule("sglang.args.disable_overlap_schedule", "sglang", CPU_HOST, 0.6, "CPU/GPU overlap scheduling on/off"),
    rule("sglang.args.num_continuous_decode_steps", "sglang", CPU_HOST, 0.4, "decode steps per scheduling round changed"),
    # sglang 0.5.5 server_args.py:247-263: precision and memory.
    rule("sglang.args.model_path", "sglang", KERNELS, 0.9, "a different model"),
    rule("sglang.args.dtype", "sglang", KERNELS, 0.7, "a different compute dtype"),
    rule("sglang.args.quantization", "sglang", KERNELS, 0.75, "a different quantization"),
    rule("sglang.args.kv_cache_dtype", "sglang", KERNELS, 0.6, "a different KV-cache dtype"),
    rule("sglang.args.mem_fraction_static", "sglang", MEMORY, 0.45, "static memory fraction changed (KV cache size, graph capture)"),
    rule("sglang.args.max_running_requests", "sglang", CPU_HOST, 0.45, "batch size limit changed"),
    rule("sglang.args.chunked_prefill_size", "sglang", CPU_HOST, 0.35, "prefill chunking changed"),
    rule("sglang.args.page_size", "sglang", MEMORY, 0.35, "KV page size changed"),
    rule("sglang.args.schedule_policy", "sglang", CPU_HOST, 0.3, "scheduling policy changed"),
    rule("sglang.args.log_level*", "sglang", NONE, 0.05, "logging verbosity"),
    rule("sglang.args.*", "sglang", NONE, 0.1, "an SGLang server argument changed"),
    rule("sglang.version", "sglang", KERNELS, 0.6, "the running SGLang version changed"),
))

MAX_BYTES = 32 * 1024 * 1024
ENDPOINTS = ("/server_info", "/get_server_info")
# Keys of the answer that are not server arguments.
SCHEDULER_INFO_KEYS = ("status", "max_total_num_tokens", "max_req_input_len")
STATE_KEYS = ("last_gen_throughput", "avg_spec_accept_length", "memory_usage", "step_time_dict",
              "avg_spec_accept_length_per_dp", "spec_accept_length")
META_KEYS = ("version", "internal_states", "launch_command", "startup_time", "frontend", "kv_events")
# An API key for servers started with --api-key (sent as a Bearer token, never recorded).
API_KEY_ENV = "ENVSNAP_SGLANG_API_KEY"


def normalize_url(url: str) -> str:
    from urllib.parse import urlsplit

    from envsnap.errors import EnvsnapError

    text = url.strip()
    if "://" not in text:
        text = "http://" + text
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise EnvsnapError(f"{url!r}: expected http://HOST:PORT")
    if parts.username is not None or parts.password is not None:
        # SGLang authenticates with --api-key (a Bearer token), not HTTP user info; and the URL
        # must not carry a secret into the snapshot. The message names neither part.
        # (Worded so that a redactor never takes what follows "--api-key" for its value.)
        raise EnvsnapError(f"user:password@ in the URL is not supported: pass http://{parts.hostname}:"
                           f"{parts.port or ''} (for a server started with --api-key, set {API_KEY_ENV})")
    path = parts.path.rstrip("/")
    for endpoint in ENDPOINTS:  # a URL that already names the route
        if path.endswith(endpoint):
            path = path[: -len(endpoint)]
    return f"{parts.scheme}://{parts.netloc}{path}"


def fetch(base: str, timeout: float) -> Tuple[Optional[str], Any, Optional[str]]:
    """(endpoint that answered, decoded JSON, error). Proxies are bypassed: the server is
    addressed directly, and an http_proxy meant for the internet must not swallow it."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    headers = {"Accept": "application/json", "User-Agent": "envsnap"}
    if os.environ.get(API_KEY_ENV):
        headers["Authorization"] = f"Bearer {os.environ[API_KEY_ENV]}"
    last_error = None
    for endpoint in ENDPOINTS:
        request = urllib.request.Request(base + endpoint, headers=headers)
        try:
            with opener.open(request, timeout=timeout) as response:
                body = response.read(MAX_BYTES + 1)
        except urllib.error.HTTPError as exc:
            if exc.code in (404, 405):
                last_error = f"{endpoint}: HTTP {exc.code}"
                continue
            if exc.code in (401, 403):
                return None, None, f"{base}{endpoint}: HTTP {exc.code} (server has an API key: set {API_KEY_ENV})"
            return None, None, f"{base}{endpoint}: HTTP {exc.code} {exc.reason}"
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            return None, None, f"cannot reach {base}: {reason}"
        if len(body) > MAX_BYTES:
            return None, None, f"{base}{endpoint}: answer larger than {MAX_BYTES >> 20} MiB"
        try:
            return endpoint, json.loads(body.decode("utf-8", "replace")), None
        except ValueError as exc:
            return None, None, f"{base}{endpoint}: not JSON ({exc})"
    return None, None, f"{base}: neither {' nor '.join(ENDPOINTS)} answered ({last_error})"


def shape(answer: Dict[str, Any]) -> Dict[str, Any]:
    """Split the answer into version, server args, scheduler info and per-DP internal states."""
    server_args: Dict[str, Any] = {}
    scheduler_info: Dict[str, Any] = {}
    flat_state: Dict[str, Any] = {}
    for key, value in answer.items():
        if key in META_KEYS:
            continue
        if key in SCHEDULER_INFO_KEYS:
            scheduler_info[key] = value
        elif key in STATE_KEYS:
            flat_state[key] = value  # 0.4.6 merges the internal state into the top level
        else:
            server_args[key] = value
    states = answer.get("internal_states")
    if isinstance(states, dict):
        states = [states]
    internal: List[Dict[str, Any]] = []
    if isinstance(states, list):
        for state in states:
            if not isinstance(state, dict):
                continue
            # Each state repeats the server args: keep only what is its own or differs.
            internal.append({k: v for k, v in state.items() if k not in server_args or server_args[k] != v})
    elif flat_state:
        internal.append(flat_state)
    data: Dict[str, Any] = {"version": answer.get("version"), "server_args": server_args,
                            "scheduler_info": scheduler_info, "internal_states": internal}
    if answer.get("launch_command") is not None:
        data["launch_command"] = answer["launch_command"]
    for key in ("startup_time", "frontend", "kv_events"):
        if key in answer:
            data[key] = answer[key]
    return data


def collect(ctx: CaptureContext) -> Section:
    if not ctx.sglang_url:
        return unavailable("not requested: use --sglang-url http://HOST:PORT")
    from envsnap.errors import EnvsnapError
    from envsnap.redact import redact_argv, redact_text, scrub

    try:
        base = normalize_url(ctx.sglang_url)
    except EnvsnapError as exc:
        return failed(str(exc))
    endpoint, answer, error = fetch(base, timeout=ctx.remaining(10.0))
    if error is not None:
        return unavailable(error, {"url": base})
    if not isinstance(answer, dict):
        return failed(f"{base}{endpoint}: expected a JSON object, got {type(answer).__name__}", {"url": base})
    data = shape(answer)
    data["url"] = base
    data["endpoint"] = endpoint
    from envsnap.capture.collectors import sglang_metrics

    text, error, _ = sglang_metrics.fetch(base, ctx.remaining(10.0), API_KEY_ENV)
    if text is None:
        data["metrics_unavailable"] = str(error)
    else:
        data["metrics"] = scrub(sglang_metrics.compact(text), redact=ctx.redact)
    if ctx.redact:
        data["server_args"] = scrub(data["server_args"], redact=True)
        command = data.get("launch_command")
        if isinstance(command, list):
            data["launch_command"] = redact_argv(command)
        elif isinstance(command, str):
            data["launch_command"] = redact_text(command)
    return ok(data)


def summarize(data: Dict[str, Any]) -> List[str]:
    args = data.get("server_args") or {}
    head = f"SGLang {data.get('version', '?')} at {data.get('url')}"
    model = args.get("model_path")
    if model:
        head += f": {model}"
    parts = [f"{name}={args[name]}" for name in ("tp_size", "dp_size", "speculative_algorithm", "attention_backend")
             if args.get(name) not in (None, "")]
    if parts:
        head += " (" + ", ".join(parts) + ")"
    lines = [head]
    for index, state in enumerate(data.get("internal_states") or []):
        facts = [f"{k}={state[k]:.4g}" if isinstance(state.get(k), float) else f"{k}={state[k]}"
                 for k in ("avg_spec_accept_length", "last_gen_throughput") if k in state]
        if "avg_spec_accept_length" in state:  # the scheduler's lifetime total, warm-up included
            facts[0] += " (since the server started)"
        if facts:
            lines.append(f"DP{index}: " + ", ".join(facts))
    lines.extend(_metrics_lines(data))
    if data.get("launch_command"):
        command = data["launch_command"]
        lines.append("launched as: " + (" ".join(command) if isinstance(command, list) else str(command)))
    return lines


def _metrics_lines(data: Dict[str, Any]) -> List[str]:
    """`show`'s lines about /metrics: what it holds, and the accept length it tells, each named for
    the span it covers (sglang_metrics.py)."""
    from envsnap.capture.collectors import sglang_metrics
    from envsnap.format import num

    if data.get("metrics_unavailable"):
        return [f"/metrics: {data['metrics_unavailable']}"]
    metrics = data.get("metrics")
    if not isinstance(metrics, dict):
        return []
    counters, gauges = metrics.get("counters") or {}, metrics.get("gauges") or {}
    line = (f"/metrics: {plural(len(counters), 'counter')}, {plural(len(gauges), 'gauge')}, "
            f"{plural(len(metrics.get('histograms') or {}), 'histogram')}")
    if metrics.get("skipped"):
        line += f" ({metrics['skipped']} samples skipped)"
    lines = [line]
    lifetime = sglang_metrics.accept_length(counters)
    if lifetime is not None:
        lines.append(f"accept length since the server started: {num(lifetime)} "
                     f"(generation tokens / verify calls; `envsnap run` records each run's own)")
    interval = [f"{sglang_metrics.short(k)} {num(v)}" for k, v in sorted(gauges.items())
                if k.split("{", 1)[0] in (sglang_metrics.ACCEPT_LENGTH_GAUGE, sglang_metrics.ACCEPT_RATE_GAUGE)]
    if interval:
        lines.append("last decode-log interval: " + ", ".join(interval))
    return lines
