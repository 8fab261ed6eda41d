"""A stand-in SGLang server with `--enable-metrics`, and a benchmark client, as real processes.

No SGLang server can run here (no GPU). This one keeps what envsnap reads from a real one, as
sglang 0.5.23 serves it:

* `/metrics` is a real prometheus_client registry over a multiprocess directory, exactly as SGLang
  builds it (srt/utils/common.py:2843-2853: `MultiProcessCollector` + `make_asgi_app`, with
  PROMETHEUS_MULTIPROC_DIR set before prometheus_client is imported); the families below carry
  SGLang's names, types, label names and multiprocess modes (srt/observability/metrics_collector.py:
  scheduler gauges lines 364-545 with labels model_name, engine_type, tp_rank, pp_rank, moe_ep_rank
  (1382-1388); tokenizer counters 1856-1870 and histograms 2040-2072 with labels model_name,
  engine_type [+ is_streaming]), updated as SGLang updates them: per finished request the counters
  (`observe_one_finished_request`, lines 2092-2112: completion tokens, verify calls) and the
  histograms; the spec gauges per decode-log interval (scheduler_components/metrics_reporter.py:
  973, 1093);
* `/server_info` answers `internal_states[0].avg_spec_accept_length`, the scheduler's lifetime
  accept tokens / verify calls (scheduler_components/internal_state.py:243-254), warm-up included;
* POST `/generate` {"max_new_tokens": N, "accept": A} finishes one request of N tokens in N / A
  verify calls (the stand-in takes the accept length from the request so that a test can vary it).

`serve [--warmup-requests K --warmup-accept A] [--no-metrics]` prints the port and serves;
`bench --url URL --requests K --tokens N --accept A` sends K requests then prints bench_serving's
result block with "Accept length:" read from /server_info, as sglang 0.5.23 sglang/benchmark/serving.py
does (lines 1643-1662 and 1748); its throughput and per-token ITL are those of a 4 ms verify cycle that
accepts A tokens (computed, not timed: the numbers are exact).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


def serve(warmup_requests: int, warmup_accept: float, tokens: int, metrics: bool) -> None:
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="sgl-prom-")
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, multiprocess

    sched = {"model_name": MODEL, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    tok = {"model_name": MODEL, "engine_type": "unified"}
    gauge = {name: Gauge(f"sglang:{name}", doc, labelnames=list(sched), multiprocess_mode="mostrecent")
             for name, doc in (("spec_accept_length", "Mean acceptance length of speculative decoding."),
                               ("spec_accept_rate", "Speculative acceptance rate."),
                               ("gen_throughput", "The generation throughput (token/s)."),
                               ("num_running_reqs", "The number of running requests."))}
    generation = Counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                         labelnames=list(tok) + ["is_streaming"])
    prompt = Counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
                     labelnames=list(tok) + ["is_streaming"])
    requests = Counter("sglang:num_requests_total", "Number of requests processed.",
                       labelnames=list(tok) + ["is_streaming"])
    verify = Counter("sglang:spec_verify_calls_total", "Number of speculative decoding verification calls.",
                     labelnames=list(tok))
    e2e = Histogram("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds",
                    labelnames=list(tok) + ["is_streaming"], buckets=[0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 5.0])
    itl = Histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                    labelnames=list(tok), buckets=[0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.050])
    totals = {"accept_tokens": 0.0, "forward_ct": 0.0}
    lock = threading.Lock()

    def finish_request(n: int, accept: float) -> None:
        calls = math.ceil(n / accept)
        with lock:
            totals["accept_tokens"] += n
            totals["forward_ct"] += calls
        streaming = {**tok, "is_streaming": "true"}
        prompt.labels(**streaming).inc(128)
        generation.labels(**streaming).inc(n)
        requests.labels(**streaming).inc()
        verify.labels(**tok).inc(calls)
        e2e.labels(**streaming).observe(0.004 * calls)
        itl.labels(**tok).observe(0.004 / accept)
        gauge["spec_accept_length"].labels(**sched).set(n / calls)
        gauge["spec_accept_rate"].labels(**sched).set((n / calls - 1) / 3)
        gauge["gen_throughput"].labels(**sched).set(n / (0.004 * calls))

    for _ in range(warmup_requests):
        finish_request(tokens, warmup_accept)
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):  # noqa: N802 (http.server's name)
            if self.path == "/metrics" and metrics:
                self._send(200, generate_latest(registry), "text/plain; version=0.0.4; charset=utf-8")
            elif self.path in ("/server_info", "/get_server_info"):
                with lock:
                    lifetime = totals["accept_tokens"] / totals["forward_ct"] if totals["forward_ct"] else None
                state = {"last_gen_throughput": 1234.5, "avg_spec_accept_length": lifetime}
                info = {"model_path": MODEL, "tp_size": 1, "speculative_algorithm": "EAGLE3",
                        "enable_metrics": metrics, "status": "ready", "internal_states": [state],
                        "version": "0.5.23"}
                self._send(200, json.dumps(info).encode(), "application/json")
            else:
                self._send(404, b'{"detail":"Not Found"}', "application/json")

        def do_POST(self):  # noqa: N802
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length) or b"{}")
            finish_request(int(body.get("max_new_tokens", tokens)), float(body.get("accept", 1.0)))
            self._send(200, json.dumps({"text": "x", "meta_info": {}}).encode(), "application/json")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    print(server.server_address[1], flush=True)
    server.serve_forever()


def bench(url: str, requests: int, tokens: int, accept: float) -> None:
    started = time.perf_counter()
    for _ in range(requests):
        data = json.dumps({"max_new_tokens": tokens, "accept": accept}).encode()
        request = urllib.request.Request(url + "/generate", data=data, headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=10).read()
    duration = time.perf_counter() - started
    with urllib.request.urlopen(url + "/server_info", timeout=10) as response:
        info = json.loads(response.read())
    accept_length = info["internal_states"][0].get("avg_spec_accept_length")
    print("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print("{:<40} {:<10}".format("Successful requests:", requests))
    print("{:<40} {:<10.2f}".format("Benchmark duration (s):", duration))
    print("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", 250.0 * accept))
    print("{:<40} {:<10.2f}".format("Mean ITL (ms):", 4.0 / accept))
    if accept_length:
        print("{:<40} {:<10.2f}".format("Accept length:", accept_length))
    print("=" * 50)


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    s = sub.add_parser("serve")
    s.add_argument("--warmup-requests", type=int, default=0)
    s.add_argument("--warmup-accept", type=float, default=1.5)
    s.add_argument("--tokens", type=int, default=60)
    s.add_argument("--no-metrics", action="store_true")
    b = sub.add_parser("bench")
    b.add_argument("--url", required=True)
    b.add_argument("--requests", type=int, default=4)
    b.add_argument("--tokens", type=int, default=60)
    b.add_argument("--accept", type=float, default=3.0)
    args = parser.parse_args()
    if args.mode == "serve":
        serve(args.warmup_requests, args.warmup_accept, args.tokens, not args.no_metrics)
    else:
        bench(args.url, args.requests, args.tokens, args.accept)


if __name__ == "__main__":
    sys.exit(main())
