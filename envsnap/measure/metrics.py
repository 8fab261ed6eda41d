"""Metric names: which direction is better, and the EAGLE-3 roles of the usual names."""
from __future__ import annotations

from typing import Dict, Optional

HIGHER = "higher"
LOWER = "lower"
NONE = "none"  # neither way is better: a change is a change, never an improvement or a regression
DIRECTIONS = (HIGHER, LOWER, NONE)

# Measurements with no better direction: how many requests ran at once (bench_serving's `concurrency`,
# total latency / duration, and `max_concurrent_requests`, sglang 0.5.23 sglang/benchmark/serving.py
# `benchmark()` result dict) depends on the request pattern as much as on speed, and token/request counts
# describe the workload (`completed`, `total_input_tokens`, `total_output_tokens`, cached tokens).
_NO_DIRECTION = {"concurrency", "max_concurrent_requests", "completed", "num_early_stopped", "batch_size",
                 "input_len", "output_len"}

# Suffixes/names that mean "lower is better" (times and latencies).
_LOWER_SUFFIXES = ("_ms", "_s", "_sec", "_seconds", "_us", "latency", "itl", "tpot", "ttft", "_time", "duration")

# EAGLE-3 throughput ~ accepted tokens per cycle / cycle time: the names that play each role.
ACCEPT_LENGTH_NAMES = ("accept_length", "acc_length", "accept_len", "avg_spec_accept_length", "spec_accept_length")
# Names the SGLang benchmarks give /server_info's lifetime avg_spec_accept_length (sglang 0.5.23
# sglang/benchmark/serving.py:1643-1662 and 1748, sglang/benchmark/one_batch_server.py:963-994): not a run's own.
LIFETIME_ACCEPT_LENGTH_NAMES = ("accept_length", "acc_length")
# A cycle (verify step) time as measured: a profiler's, `envsnap attach`'s, or the decode log's (parsers.py).
CYCLE_TIME_NAMES = ("verify_ms", "cycle_ms", "cycle_time_ms", "decode_cycle_ms")
# Latencies per generated token (bench_serving's ITL and TPOT): a cycle is one of these x accept length.
# Means first: a mean per-token latency is total time / tokens = cycle / accept length exactly, while a
# median is not when cycles accept varying numbers of tokens (chunks of 1 and 2 tokens: 6, 3, 3 ms).
PER_TOKEN_LATENCY_NAMES = ("mean_itl_ms", "mean_tpot_ms", "itl_ms", "tpot_ms", "itl", "tpot", "median_itl_ms",
                           "median_tpot_ms")
THROUGHPUT_NAMES = ("output_throughput", "tok_s", "tokens_per_s", "gen_throughput", "throughput", "decode_throughput")


def direction(name: str, overrides: Optional[Dict[str, str]] = None) -> str:
    """'higher' or 'lower' is better for this metric, or 'none' (neither); explicit overrides win."""
    if overrides and name in overrides:
        return overrides[name]
    lowered = name.lower()
    if lowered in _NO_DIRECTION or (lowered.endswith("_tokens") and ("total_" in lowered or "cached" in lowered)):
        return NONE
    if lowered in ACCEPT_LENGTH_NAMES or "throughput" in lowered or lowered.endswith(("tok_s", "per_s", "_per_sec")):
        return HIGHER
    if lowered.endswith(_LOWER_SUFFIXES) or lowered in ("itl", "tpot", "ttft", "latency"):
        return LOWER
    return HIGHER


def role(name: str) -> Optional[str]:
    """'accept_length', 'cycle_time', 'per_token_latency' or 'throughput' for the EAGLE-3 decomposition."""
    lowered = name.lower()
    if lowered in ACCEPT_LENGTH_NAMES:
        return "accept_length"
    if lowered in CYCLE_TIME_NAMES:
        return "cycle_time"
    if lowered in PER_TOKEN_LATENCY_NAMES:
        return "per_token_latency"
    if lowered in THROUGHPUT_NAMES:
        return "throughput"
    return None


def is_worse(direction: str, change_pct: Optional[float]) -> bool:
    """Does a change of change_pct percent make this metric worse? Never for a metric without a direction."""
    if change_pct is None or direction == NONE:
        return False
    return change_pct < 0 if direction == HIGHER else change_pct > 0
