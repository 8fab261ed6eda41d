"""Composes sglang-0.5.23-bench_serving-eagle3.{txt,jsonl}: the format calls of sglang 0.5.23
sglang/benchmark/serving.py `benchmark()` (the summary table, lines 1681-1845) and its `result` dict (lines
1855-1911, appended to the output file at 1961), with illustrative numbers (an EAGLE-3 TP-8 server around
94 tok/s at concurrency 1; ITL per token, as the sglang backend's adjust_itl makes it). Run from this
directory to rebuild them.
"""
import json
from pathlib import Path

R = {
 "tag": None, "backend": "sglang", "dataset_name": "random", "request_rate": float("inf"), "max_concurrency": 1,
 "sharegpt_output_len": None, "random_input_len": 1024, "random_output_len": 512, "random_range_ratio": 1.0,
 "server_info": {"version": "0.5.23", "tp_size": 8, "speculative_algorithm": "EAGLE3",
                 "internal_states": [{"avg_spec_accept_length": 3.1904, "last_gen_throughput": 95.02}]},
 "duration": 173.951264, "completed": 32, "total_input_tokens": 32768, "total_input_text_tokens": 32768,
 "total_input_vision_tokens": 0, "total_output_tokens": 16384, "total_output_tokens_retokenized": 16381,
 "request_throughput": 0.183960, "input_throughput": 188.375219, "output_throughput": 94.187609,
 "total_throughput": 282.562828,
 "mean_e2e_latency_ms": 5436.2197, "median_e2e_latency_ms": 5430.1082, "std_e2e_latency_ms": 58.9175,
 "p90_e2e_latency_ms": 5502.3361, "p95_e2e_latency_ms": 5531.0472, "p99_e2e_latency_ms": 5580.4118,
 "mean_ttft_ms": 63.9014, "median_ttft_ms": 62.9377, "std_ttft_ms": 3.1085, "p90_ttft_ms": 67.5219,
 "p95_ttft_ms": 69.2043, "p99_ttft_ms": 71.1986,
 "mean_tpot_ms": 10.5134, "median_tpot_ms": 10.5027, "std_tpot_ms": 0.1199, "p90_tpot_ms": 10.6611,
 "p95_tpot_ms": 10.7102, "p99_tpot_ms": 10.8093,
 "mean_itl_ms": 10.5139, "median_itl_ms": 10.5208, "std_itl_ms": 0.9312, "p90_itl_ms": 10.9041,
 "p95_itl_ms": 11.1187, "p99_itl_ms": 11.8022,
 "concurrency": 0.999851, "accept_length": 3.1904, "max_output_tokens_per_s": 98.0, "max_concurrent_requests": 1,
}
MAX_ITL = 33.6154
out = []
p = out.append
p("\n{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
p("{:<40} {:<10}".format("Backend:", R["backend"]))
p("{:<40} {:<10}".format("Traffic request rate:", R["request_rate"]))
p("{:<40} {:<10}".format("Max request concurrency:", R["max_concurrency"]))
p("{:<40} {:<10}".format("Successful requests:", R["completed"]))
p("{:<40} {:<10.2f}".format("Benchmark duration (s):", R["duration"]))
p("{:<40} {:<10}".format("Total input tokens:", R["total_input_tokens"]))
p("{:<40} {:<10}".format("Total input text tokens:", R["total_input_text_tokens"]))
p("{:<40} {:<10}".format("Total generated tokens:", R["total_output_tokens"]))
p("{:<40} {:<10}".format("Total generated tokens (retokenized):", R["total_output_tokens_retokenized"]))
p("{:<40} {:<10.2f}".format("Request throughput (req/s):", R["request_throughput"]))
p("{:<40} {:<10.2f}".format("Input token throughput (tok/s):", R["input_throughput"]))
p("{:<40} {:<10.2f}".format("Output token throughput (tok/s):", R["output_throughput"]))
p("{:<40} {:<10.2f}".format("Peak output token throughput (tok/s):", R["max_output_tokens_per_s"]))
p("{:<40} {:<10}".format("Peak concurrent requests:", R["max_concurrent_requests"]))
p("{:<40} {:<10.2f}".format("Total token throughput (tok/s):", R["total_throughput"]))
p("{:<40} {:<10.2f}".format("Concurrency:", R["concurrency"]))
p("{:<40} {:<10.2f}".format("Accept length:", R["accept_length"]))
p("{s:{c}^{n}}".format(s="End-to-End Latency", n=50, c="-"))
for lab, k in (("Mean E2E Latency (ms):", "mean_e2e_latency_ms"), ("Median E2E Latency (ms):", "median_e2e_latency_ms"),
               ("P90 E2E Latency (ms):", "p90_e2e_latency_ms"), ("P95 E2E Latency (ms):", "p95_e2e_latency_ms"),
               ("P99 E2E Latency (ms):", "p99_e2e_latency_ms")):
    p("{:<40} {:<10.2f}".format(lab, R[k]))  # noqa: UP032 (the source's own call)
p("{s:{c}^{n}}".format(s="Time to First Token", n=50, c="-"))
for w in ("mean", "median", "p90", "p95", "p99"):
    p("{:<40} {:<10.2f}".format(f"{w.capitalize() if w in ('mean','median') else w.upper()} TTFT (ms):", R[f"{w}_ttft_ms"]))
p("{s:{c}^{n}}".format(s="Time per Output Token (excl. 1st token)", n=50, c="-"))
for w in ("mean", "median", "p90", "p95", "p99"):
    p("{:<40} {:<10.2f}".format(f"{w.capitalize() if w in ('mean','median') else w.upper()} TPOT (ms):", R[f"{w}_tpot_ms"]))
p("{s:{c}^{n}}".format(s="Inter-Token Latency", n=50, c="-"))
for w in ("mean", "median", "p90", "p95", "p99"):
    p("{:<40} {:<10.2f}".format(f"{w.capitalize() if w in ('mean','median') else w.upper()} ITL (ms):", R[f"{w}_itl_ms"]))
p("{:<40} {:<10.2f}".format("Max ITL (ms):", MAX_ITL))
p("=" * 50)
head = ("#Input tokens: 32768\n#Output tokens: 16384\nStarting warmup with 1 sequences...\n"
        "Warmup completed with 1 sequences. Starting main benchmark run...\n")
Path("sglang-0.5.23-bench_serving-eagle3.txt").write_text(head + "\n".join(out) + "\n")
Path("sglang-0.5.23-bench_serving-eagle3.jsonl").write_text(json.dumps(R) + "\n")
