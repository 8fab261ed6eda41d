"""Metric parsers against outputs in SGLang's real formats (tests/data/runs, see its README)."""
from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA

from envsnap.errors import EnvsnapError
from envsnap.measure import metrics as metrics_mod, parsers

RUNS = TEST_DATA / "runs"


def read(name: str) -> str:
    return (RUNS / name).read_text()


def test_bench_serving_summary_055_eagle3():
    result = parsers.parse_run(read("sglang-0.5.5-bench_serving-eagle3.txt"))
    m = result.metrics
    assert result.parsers == ["bench_serving"]
    assert m["output_throughput"] == 94.11
    assert m["accept_length"] == 3.19
    assert m["median_itl_ms"] == 33.73 and m["median_ttft_ms"] == 62.94 and m["p95_itl_ms"] == 36.04
    assert m["mean_e2e_latency_ms"] == 5440.28 and m["duration"] == 174.09
    # arguments echoed in the table are not measurements; token counts are kept (with no better direction)
    assert "max_request_concurrency" not in m and "backend" not in m
    assert m["total_input_tokens"] == 32768 and metrics_mod.direction("total_input_tokens") == metrics_mod.NONE
    # the caveat about the server's running average is kept with the result
    assert any("accept_length is the server's running average" in n for n in result.notes)


def test_bench_serving_summary_046_has_no_accept_length_and_no_caveat():
    result = parsers.parse_run(read("sglang-0.4.6-bench_serving.txt"))
    assert result.metrics["output_throughput"] == 1830.55
    assert "accept_length" not in result.metrics
    assert not any("running average" in n for n in result.notes)


def test_bench_serving_last_table_wins():
    text = read("sglang-0.4.6-bench_serving.txt") + read("sglang-0.5.5-bench_serving-eagle3.txt")
    metrics, notes = parsers.parse_bench_serving(text)
    assert metrics["output_throughput"] == 94.11
    assert "2 result tables" in notes[0]


def test_bench_serving_jsonl_full_precision_and_wins_over_summary():
    jsonl = read("sglang-0.5.5-bench_serving-eagle3.jsonl")
    result = parsers.parse_run(read("sglang-0.5.5-bench_serving-eagle3.txt"), files={"bench.jsonl": jsonl})
    m = result.metrics
    assert m["output_throughput"] == pytest.approx(94.11015)
    assert m["median_tpot_ms"] == pytest.approx(10.5106)  # only in the JSONL
    assert m["accept_length"] == pytest.approx(3.1904)
    assert "random_input_len" not in m and "max_concurrency" not in m  # arguments, not results
    assert result.parsers == ["bench_serving", "bench_serving_jsonl"]


def test_one_batch_server_stdout_skips_warmup_case():
    metrics, notes = parsers.parse_one_batch_server(read("sglang-0.5.23-one_batch_server-eagle3.txt"))
    assert metrics["output_throughput"] == 94.33  # the measured case, not the warm-up's 165.72
    assert metrics["acc_length"] == 3.21 and metrics["latency"] == 5.47 and metrics["last_ttft"] == 0.15
    assert "warm-up included" in notes[0]


def test_one_batch_server_046_token_per_s_units():
    metrics, _ = parsers.parse_one_batch_server(read("sglang-0.4.6-one_batch_server.txt"))
    assert metrics["output_throughput"] == 975.24 and metrics["overall_throughput"] == 16579.05


def test_one_batch_server_jsonl():
    result = parsers.parse_run("", files={"result.jsonl": read("sglang-0.5.23-one_batch_server-eagle3.jsonl")})
    m = result.metrics
    assert result.parsers == ["bench_one_batch_server_jsonl"]
    assert m["acc_length"] == 3.21 and m["output_throughput"] == 94.33
    assert "batch_size" not in m and "cache_hit_rate" not in m  # a case parameter; null
    assert any("acc_length is the server's running average" in n for n in result.notes)
    multi, notes = parsers.parse_one_batch_server_jsonl(read("sglang-0.4.6-one_batch_server.jsonl"))
    assert multi["output_throughput"] == 975.24 and "batch_size=16" in notes[0]


def test_one_batch_server_minus_one_means_unavailable():
    line = json.dumps({"run_name": "x", "batch_size": 1, "input_len": 8, "output_len": 8, "latency": 1.0,
                       "output_throughput": 10.0, "acc_length": -1, "last_gen_throughput": -1})
    metrics, _ = parsers.parse_one_batch_server_jsonl(line)
    assert metrics == {"latency": 1.0, "output_throughput": 10.0}


@pytest.mark.parametrize("name, throughput, accept", [
    ("sglang-0.4.6-server-decode.log", 94.6, 3.2),           # "Decode batch."
    ("sglang-0.5.5-server-decode.log", 60.02, 2.1),          # "Decode batch,"
    ("sglang-0.5.5-server-decode-iters.log", 1819.325, None),  # "Decode batch [N]," ; idle line skipped
])
def test_decode_log_forms(name, throughput, accept):
    result = parsers.parse_run("", log_text=read(name))
    assert result.parsers == ["decode_log"]
    assert result.metrics["gen_throughput"] == pytest.approx(throughput)
    assert result.metrics.get("accept_len") == (pytest.approx(accept) if accept else None)
    # these names play their EAGLE-3 roles for the ranking
    assert metrics_mod.role("gen_throughput") == "throughput" and metrics_mod.role("accept_len") == "accept_length"


def test_decode_log_ignores_prefill_and_other_lines():
    text = ("[2026-11-29 10:02:11 TP0] Prefill batch, #new-seq: 1, #new-token: 1024, #cached-token: 0, "
            "#token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, \nDecode batches are great: 5\n")
    assert parsers.parse_decode_log(text) == ({}, [])


def test_json_line_last_object_wins_and_ignores_non_numbers():
    text = 'starting\n{"tok_s": 1.0}\nnoise {not json}\n{"tok_s": 812.5, "name": "x", "ok": true, "bad": NaN}\ndone\n'
    metrics, _ = parsers.parse_json_line(text)
    assert metrics == {"tok_s": 812.5}


def test_custom_regex_last_match_first_group():
    specs = parsers.parse_metric_specs([r"it_s=speed: ([0-9.]+) it/s", r"loss=loss=(\S+)"])
    result = parsers.parse_run("speed: 10.5 it/s\nspeed: 12.25 it/s\nloss=abc\n", custom=specs)
    assert result.metrics == {"it_s": 12.25}
    assert any("loss" in n and "not a number" in n for n in result.notes)
    assert result.parsers == ["regex"]


def test_custom_regex_falls_back_to_log_and_beats_builtins():
    specs = parsers.parse_metric_specs([r"output_throughput=my tput ([0-9.]+)"])
    result = parsers.parse_run(read("sglang-0.5.5-bench_serving-eagle3.txt"), log_text="my tput 77.5\n", custom=specs)
    assert result.metrics["output_throughput"] == 77.5


@pytest.mark.parametrize("spec, fragment", [
    ("noequals", "NAME=REGEX"), ("x=(", "invalid regular expression"), ("x=[0-9]+", "(group)"),
    ("bad name=(\\d+)", "metric name"), ("=(\\d)", "metric name"),
])
def test_bad_metric_specs(spec, fragment):
    with pytest.raises(EnvsnapError) as info:
        parsers.parse_metric_specs([spec])
    assert fragment in str(info.value)


def test_nothing_recognised_in_unrelated_output():
    result = parsers.parse_run("hello\nworld: 12\nbatch size: big\n", log_text="INFO started\n")
    assert result.metrics == {} and result.parsers == []


def test_json_line_prefers_stdout_over_a_later_stderr_log_line():
    stdout, stderr = '{"tok_s": 812.5}\n', '{"level": 20, "msg": "shutdown"}\n'
    result = parsers.parse_run(stdout + stderr, json_texts=[stdout, stderr])
    assert result.metrics == {"tok_s": 812.5}
    only_stderr = parsers.parse_run(stderr, json_texts=["plain text\n", '{"tok_s": 3}\n'])
    assert only_stderr.metrics == {"tok_s": 3.0}


# --- sglang 0.5.23: the same metric under one name, printed or written; std_* and counts kept ---

def test_bench_serving_0523_one_name_per_metric_and_nothing_dropped():
    printed, _ = parsers.parse_bench_serving(read("sglang-0.5.23-bench_serving-eagle3.txt"))
    written, _ = parsers.parse_bench_serving_jsonl(read("sglang-0.5.23-bench_serving-eagle3.jsonl"))
    # 0.5.23 prints "Peak output token throughput" / "Peak concurrent requests"; its result dict names them
    # max_output_tokens_per_s / max_concurrent_requests: one name each, whichever was read.
    assert not [name for name in printed if name.startswith("peak_")], sorted(printed)
    assert printed["max_output_tokens_per_s"] == 98.0 and printed["max_concurrent_requests"] == 1
    # Every printed number is stored under the JSONL's name for it, with the same value (2 decimals printed);
    # Max ITL is printed only.
    assert set(printed) - set(written) == {"max_itl_ms"}, sorted(set(printed) - set(written))
    for name in set(printed) & set(written):
        assert printed[name] == pytest.approx(written[name], abs=0.006), name
    # std_* and token counts from the file are kept; arguments are not metrics.
    assert written["std_itl_ms"] == pytest.approx(0.9312) and written["std_ttft_ms"] == pytest.approx(3.1085)
    assert written["total_output_tokens"] == 16384 and written["total_output_tokens_retokenized"] == 16381
    assert written["completed"] == 32 and "request_rate" not in written and "max_concurrency" not in written
    both = parsers.parse_run(read("sglang-0.5.23-bench_serving-eagle3.txt"),
                             files={"sglang_1201_32_1024_512.jsonl": read("sglang-0.5.23-bench_serving-eagle3.jsonl")})
    assert not [n for n in both.metrics if n.startswith("peak_")] and both.metrics["std_e2e_latency_ms"] == 58.9175


def test_goodput_and_cache_report_keep_one_name_and_one_scale():
    """--goodput / --cache-report (0.5.23 goodput.py print_goodput, serving.py cache report): the table prints
    the attainment in percent and the file stores a fraction; the cache breakdown is printed twice (tokens, %)."""
    table = "\n".join([
        "============ Serving Benchmark Result ============",
        "{:<40} {:<10.2f}".format("Output token throughput (tok/s):", 94.19),
        "{s:{c}^{n}}".format(s="Goodput", n=50, c="-"),
        "{:<40} {:<10}".format("SLOs (ms):", "ttft:200 tpot:20"),
        "{:<40} {:<10.2f}".format("Request goodput (req/s):", 0.17),
        "{:<40} {:<10.2f}".format("SLO attainment (%):", 93.75),
        "{:<40} {:<10.2f}".format("TTFT SLO attainment (%):", 100.0),
        "{s:{c}^{n}}".format(s="Cache Hit Details", n=50, c="-"),
        "{:<40} {:<10}".format("Total prompt tokens:", 32768),
        "{:<40} {:<10}".format("Total cached tokens:", 8192),
        "{:<40} {:<10}".format("  Device:", 8192),
        "{:<40} {:.1f}%".format("Cache hit rate:", 25.0),
        "{:<40} {:.1f}%".format("  Device:", 100.0),
        "=" * 50])
    printed, _ = parsers.parse_bench_serving(table)
    line = json.dumps({"output_throughput": 94.187, "median_ttft_ms": 62.9, "request_goodput": 0.1713,
                       "slo_attainment": 0.9375, "slo_attainment_by_metric": {"ttft": 1.0, "tpot": 0.9375},
                       "goodput_slos_ms": {"ttft": 200.0, "tpot": 20.0},
                       "cache_report": {"total_prompt_tokens": 32768, "total_cached_tokens": 8192,
                                        "cache_hit_rate_pct": 25.0, "device_cached_tokens": 8192,
                                        "host_cached_tokens": None, "storage_cached_tokens": None,
                                        "storage_backend": None}})
    written, _ = parsers.parse_bench_serving_jsonl(line)
    assert printed == pytest.approx({"output_throughput": 94.19, "request_goodput": 0.17, "slo_attainment": 0.9375,
                                     "ttft_slo_attainment": 1.0, "total_prompt_tokens": 32768,
                                     "total_cached_tokens": 8192, "cache_hit_rate_pct": 25.0})
    assert set(printed) <= set(written), sorted(set(printed) - set(written))
    assert written["device_cached_tokens"] == 8192 and written["tpot_slo_attainment"] == 0.9375


def test_directions_none_for_concurrency_and_counts():
    for name in ("concurrency", "max_concurrent_requests", "total_output_tokens", "total_input_text_tokens",
                 "completed", "total_cached_tokens"):
        assert metrics_mod.direction(name) == metrics_mod.NONE, name
    assert metrics_mod.direction("max_output_tokens_per_s") == metrics_mod.HIGHER
    assert metrics_mod.direction("std_itl_ms") == metrics_mod.LOWER
    from envsnap import format as fmt

    assert fmt.direction(metrics_mod.NONE) == "no better direction"
    assert not metrics_mod.is_worse(metrics_mod.NONE, -50.0) and not metrics_mod.is_worse(metrics_mod.NONE, 50.0)
