"""Metric names: which direction is better, and the EAGLE-3 roles of the usual names."""
from __future__ import annotations

from typing import Dict, Optional

HIGHER = "higher"
LOWER = "lower"

# Suffixes/names that mean "lower is better" (times and latencies).
_LOWER_SUFFIXES = ("_ms", "_s", "_sec", "_seconds", "_us", "latency", "itl", "tpot", "ttft", "_time", "duration")

# EAGLE-3 throughput ~ accepted tokens per cycle / cycle time: the names that play each role.
ACCEPT_LENGTH_NAMES = ("accept_length", "acc_length", "accept_len", "avg_spec_accept_length", "spec_accept_length")
# A cycle (verify step) time as measured: a profiler's, `envsnap attach`'s, or the decode log's (parsers.py).
CYCLE_TIME_NAMES = ("verify_ms", "cycle_ms", "cycle_time_ms", "decode_cycle_ms")
# Latencies per generated token (bench_serving's ITL and TPOT): a cycle is one of these x accept length.
# Means first: a mean per-token latency is total time / tokens = cycle / accept length exactly, while a
# median is not when cycles accept varying numbers of tokens (chunks of 1 and 2 tokens: 6, 3, 3 ms).
PER_TOKEN_LATENCY_NAMES = ("mean_itl_ms", "mean_tpot_ms", "itl_ms", "tpot_ms", "itl", "tpot", "median_itl_ms",
                           "median_tpot_ms")
THROUGHPUT_NAMES = ("output_throughput", "tok_s", "tokens_per_s", "gen_throughput", "throughput", "decode_throughput")


def direction(name: str, overrides: Optional[Dict[str, str]] = None) -> str:
    """'higher' or 'lower' is better for this metric; explicit overrides win."""
    if overrides and name in overrides:
        return overrides[name]
    lowered = name.lower()
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
