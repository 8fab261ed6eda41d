"""SGLang's Prometheus `/metrics` (servers started with `--enable-metrics`), read and made compact.

What SGLang serves, read from sglang 0.5.23 (the wheel's paths):
  * srt/utils/common.py:2843-2853 `add_prometheus_middleware`: `/metrics` is prometheus_client's
    `make_asgi_app` over a `MultiProcessCollector` (one registry summed over the server's processes);
    srt/entrypoints/http_server.py:314-315 mounts it only with `--enable-metrics` (else 404).
  * srt/observability/metrics_collector.py, `SchedulerMetricsCollector` (labels model_name, engine_type,
    tp_rank, pp_rank, moe_ep_rank [, dp_rank], set at lines 1382-1392): gauges with
    multiprocess_mode "mostrecent", among them `sglang:spec_accept_length` (line 512) and
    `sglang:spec_accept_rate` (line 518), `sglang:gen_throughput` (383). The scheduler sets them from
    its decode log interval (srt/managers/scheduler_components/metrics_reporter.py:973 and 1093:
    accept tokens / forward count since the last decode log line): the value of the *last interval*,
    neither the run's nor the server's lifetime.
  * same file, `TokenizerMetricsCollector` (labels model_name, engine_type [+ is_streaming]):
    counters `sglang:generation_tokens_total` (line 1861) and `sglang:spec_verify_calls_total`
    (line 1866), both increased once per finished request by `observe_one_finished_request`
    (lines 2092-2112: the request's completion tokens and its verify calls), and the latency
    histograms `sglang:time_to_first_token_seconds` (2041), `sglang:inter_token_latency_seconds`
    (2051), `sglang:request_time_per_output_token_seconds` (2058),
    `sglang:e2e_request_latency_seconds` (2068).
  * `/server_info`'s `avg_spec_accept_length` is the scheduler's lifetime total
    (srt/managers/scheduler_components/internal_state.py:243-254, totals reset only by /flush_cache,
    metrics_reporter.py:708-716), warm-up included.
So a run's own accept length is the change of the two counters across the run:
Δ generation tokens / Δ verify calls, SGLang's own per-request `spec_accept_length`
(srt/managers/tokenizer_manager.py:3166-3167: completion_tokens / spec_verify_ct) summed over the
requests that finished during the run.
"""
from __future__ import annotations

import math
import os
from typing import Any, Dict, Optional, Tuple

from envsnap.capture.collectors import prometheus_text

PREFIX = "sglang:"
GENERATION_TOKENS = "sglang:generation_tokens_total"
VERIFY_CALLS = "sglang:spec_verify_calls_total"
ACCEPT_LENGTH_GAUGE = "sglang:spec_accept_length"
ACCEPT_RATE_GAUGE = "sglang:spec_accept_rate"
MAX_BYTES = 16 * 1024 * 1024
# The classic text format: prometheus_client answers it unless OpenMetrics is asked for
# (prometheus_client exposition.choose_encoder).
ACCEPT = "text/plain; version=0.0.4"


def fetch(base: str, timeout: float, api_key_env: str) -> Tuple[Optional[str], Optional[str], bool]:
    """(exposition text, error, served): served is False when the server has no /metrics
    (404: started without --enable-metrics). Proxies are bypassed like sglang.fetch does."""
    import urllib.error
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    headers = {"Accept": ACCEPT, "User-Agent": "envsnap"}
    if os.environ.get(api_key_env):
        headers["Authorization"] = f"Bearer {os.environ[api_key_env]}"
    url = base + "/metrics"
    try:
        with opener.open(urllib.request.Request(url, headers=headers), timeout=timeout) as response:
            body = response.read(MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        if exc.code in (404, 405):
            return None, f"{url}: HTTP {exc.code} (start the server with --enable-metrics)", False
        return None, f"{url}: HTTP {exc.code} {exc.reason}", True
    except (urllib.error.URLError, OSError) as exc:
        return None, f"cannot reach {url}: {getattr(exc, 'reason', exc)}", True
    if len(body) > MAX_BYTES:
        return None, f"{url}: answer larger than {MAX_BYTES >> 20} MiB", True
    return body.decode("utf-8", "replace"), None, True


def compact(text: str) -> Dict[str, Any]:
    """SGLang's series as plain data: {"counters": {series: value}, "gauges": {series: value},
    "histograms": {series: {"count", "sum"}}} (histograms and summaries by their labels without
    `le`/`quantile`; buckets, quantiles and `_created` start times left out), plus "skipped" lines."""
    families, problems = prometheus_text.parse(text)
    counters: Dict[str, float] = {}
    gauges: Dict[str, float] = {}
    histograms: Dict[str, Dict[str, float]] = {}
    dropped = 0
    for family, sample, labels, value in prometheus_text.iter_samples(families, PREFIX):
        if sample.endswith("_created"):
            continue
        if not math.isfinite(value):  # JSON carries no NaN/Inf, and no delta can be taken of one
            dropped += 1
            continue
        if family.type in ("histogram", "summary"):
            part = sample[len(family.name):]
            if part in ("_count", "_sum"):
                key = prometheus_text.series(family.name, tuple(kv for kv in labels if kv[0] not in ("le", "quantile")))
                histograms.setdefault(key, {})[part[1:]] = value
            continue
        key = prometheus_text.series(sample, labels)
        if family.type == "counter" or sample.endswith("_total"):
            counters[key] = value
        else:
            gauges[key] = value
    out: Dict[str, Any] = {"counters": counters, "gauges": gauges, "histograms": histograms}
    if problems or dropped:
        out["skipped"] = len(problems) + dropped
    return out


def short(series: str) -> str:
    """A series named for people: without the `sglang:` prefix, with only its rank labels
    ('spec_accept_length (pp_rank 0, tp_rank 0)')."""
    import re

    name, _, labels = series.partition("{")
    ranks = re.findall(r'(?:^|,)((?:tp|dp|pp)_rank)="([^"]*)"', labels)
    name = name[len(PREFIX):] if name.startswith(PREFIX) else name
    return f"{name} ({', '.join(f'{k} {v}' for k, v in ranks)})" if ranks else name


def total(values: Dict[str, float], name: str) -> Optional[float]:
    """The sum of one counter's series (every label set), None when the server has none."""
    found = [v for k, v in values.items() if k == name or k.startswith(name + "{")]
    return sum(found) if found else None


def accept_length(counters: Dict[str, float]) -> Optional[float]:
    """Generation tokens per verify call over these counters (lifetime values or a run's deltas)."""
    tokens, calls = total(counters, GENERATION_TOKENS), total(counters, VERIFY_CALLS)
    if tokens is None or not calls or calls <= 0:
        return None
    return tokens / calls
