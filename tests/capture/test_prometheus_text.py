"""envsnap's reader of the Prometheus text format, against what a real prometheus_client writes.

prometheus_client is what SGLang serves /metrics with (sglang 0.5.23 srt/utils/common.py:2843-2853); the
test extra installs it so that the reader is checked against the real producer: every kind of family,
label values that need escaping, NaN and infinities, `_created` samples, the multiprocess collector.
"""
from __future__ import annotations

import math
import subprocess
import sys

import pytest

from envsnap.capture.collectors import prometheus_text, sglang_metrics

prometheus_client = pytest.importorskip("prometheus_client")


def _registry_text():
    from prometheus_client import CollectorRegistry, Counter, Enum, Gauge, Histogram, Info, Summary, generate_latest

    registry = CollectorRegistry()
    tokens = Counter("sglang:generation_tokens_total", "Number of generation tokens processed.",
                     labelnames=["model_name", "is_streaming"], registry=registry)
    tokens.labels(model_name='weird "model"\\path\nnext', is_streaming="true").inc(60)
    tokens.labels(model_name="plain", is_streaming="false").inc(7)
    gauge = Gauge("sglang:spec_accept_length", "Mean acceptance length.\nSecond line \\ of help.",
                  labelnames=["tp_rank"], registry=registry)
    gauge.labels(tp_rank="0").set(2.75)
    gauge.labels(tp_rank="1").set(float("nan"))
    Gauge("sglang:unbounded", "inf", registry=registry).set(float("inf"))
    hist = Histogram("sglang:e2e_request_latency_seconds", "E2E latency.", labelnames=["model_name"],
                     buckets=[0.1, 1.0], registry=registry)
    for value in (0.05, 0.5, 2.0):
        hist.labels(model_name="m").observe(value)
    Summary("sglang:queue_seconds", "Queue time.", registry=registry).observe(0.25)
    Info("sglang:build", "Build info.", registry=registry).info({"version": "0.5.23"})
    Enum("sglang:state", "State.", states=["ready", "busy"], registry=registry).state("busy")
    return generate_latest(registry).decode()


def test_reads_every_family_kind_a_real_registry_writes():
    text = _registry_text()
    families, problems = prometheus_text.parse(text)
    assert problems == []
    counter = families["sglang:generation_tokens_total"]  # the text format names a counter's family x_total
    assert counter.type == "counter"
    samples = {(name, labels): value for name, labels, value in counter.samples}
    weird = (("is_streaming", "true"), ("model_name", 'weird "model"\\path\nnext'))
    assert samples[("sglang:generation_tokens_total", weird)] == 60.0  # escapes undone exactly
    assert families["sglang:generation_tokens_created"].type == "gauge"  # its start time, a family of its own
    gauge = families["sglang:spec_accept_length"]
    assert gauge.type == "gauge" and gauge.help == "Mean acceptance length.\nSecond line \\ of help."
    values = {labels: value for _, labels, value in gauge.samples}
    assert values[(("tp_rank", "0"),)] == 2.75 and math.isnan(values[(("tp_rank", "1"),)])
    assert families["sglang:unbounded"].samples[0][2] == math.inf
    hist = families["sglang:e2e_request_latency_seconds"]
    assert hist.type == "histogram"
    by_name = {}
    for name, labels, value in hist.samples:
        by_name.setdefault(name, []).append((dict(labels).get("le"), value))
    assert by_name["sglang:e2e_request_latency_seconds_bucket"] == [("0.1", 1.0), ("1.0", 2.0), ("+Inf", 3.0)]
    assert by_name["sglang:e2e_request_latency_seconds_count"] == [(None, 3.0)]
    assert by_name["sglang:e2e_request_latency_seconds_sum"] == [(None, pytest.approx(2.55))]
    assert families["sglang:queue_seconds"].type == "summary"
    assert families["sglang:build_info"].type == "gauge"  # an Info is written as a gauge
    state = {dict(labels)["sglang_state"]: value for _, labels, value in families["sglang:state"].samples}
    assert state == {"ready": 0.0, "busy": 1.0}


def test_compact_keeps_what_deltas_need():
    data = sglang_metrics.compact(_registry_text())
    weird = 'sglang:generation_tokens_total{is_streaming="true",model_name="weird \\"model\\"\\\\path\\nnext"}'
    assert data["counters"][weird] == 60.0
    assert sglang_metrics.total(data["counters"], "sglang:generation_tokens_total") == 67.0
    assert not any("_created" in key for key in data["counters"])
    assert data["gauges"]['sglang:spec_accept_length{tp_rank="0"}'] == 2.75
    assert data["skipped"] == 2  # NaN and +Inf: no JSON number, no delta
    assert data["histograms"]['sglang:e2e_request_latency_seconds{model_name="m"}'] == {"count": 3.0,
                                                                                       "sum": pytest.approx(2.55)}
    assert data["histograms"]["sglang:queue_seconds"] == {"count": 1.0, "sum": 0.25}


def test_reads_the_multiprocess_collector_sglang_serves(tmp_path):
    # SGLang's own set-up: PROMETHEUS_MULTIPROC_DIR before prometheus_client is imported, a gauge in
    # "mostrecent" mode, the MultiProcessCollector summing the processes' files (no _created samples).
    code = (
        "import os, sys; os.environ['PROMETHEUS_MULTIPROC_DIR'] = sys.argv[1]\n"
        "from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest, multiprocess\n"
        "Counter('sglang:spec_verify_calls_total', 'calls', labelnames=['model_name']).labels(model_name='m').inc(20)\n"
        "Gauge('sglang:spec_accept_length', 'len', labelnames=['tp_rank'], multiprocess_mode='mostrecent')"
        ".labels(tp_rank='0').set(3)\n"
        "r = CollectorRegistry(); multiprocess.MultiProcessCollector(r)\n"
        "sys.stdout.write(generate_latest(r).decode())\n")
    text = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True,
                          check=True).stdout
    data = sglang_metrics.compact(text)
    assert data["counters"] == {'sglang:spec_verify_calls_total{model_name="m"}': 20.0}
    assert data["gauges"] == {'sglang:spec_accept_length{tp_rank="0"}': 3.0}


def test_a_line_out_of_format_is_one_problem_and_the_rest_is_read():
    text = ("# TYPE a counter\na_total 1\nthis is { not a sample\nb{x=\"1\" 2\nc{x=\"1\"} notanumber\n"
            "d 4 1700000000000\n# EOF\n")
    families, problems = prometheus_text.parse(text)
    assert [p.split(":")[0] for p in problems] == ["line 3", "line 4", "line 5"]
    assert families["a"].samples == [("a_total", (), 1.0)] and families["d"].samples == [("d", (), 4.0)]
