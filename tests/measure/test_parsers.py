"""Metric parsers against outputs in SGLang's real formats (tests/data/runs, see its README)."""
from __future__ import annotations

import json

import pytest
from helpers import TEST_DATA

from envsnap.errors import EnvsnapError
from envsnap.measure import metrics as metrics_mod
from envsnap.measure import parsers

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
    # arguments echoed in the table and dataset token counts are not measurements
    assert "max_request_concurrency" not in m and "backend" not in m and "total_input_tokens" not in m
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
