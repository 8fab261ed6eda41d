"""`envsnap run --sglang-url`: each run records what the server counted during it (its /metrics before
and after), and the run's accept length is the run's own, not /server_info's lifetime figure.

The server is tests/helpers/sglang_metrics_server.py in a process of its own: a real prometheus_client
multiprocess registry with SGLang 0.5.23's metric names, types and labels (cited there), warmed up at
another accept length first, as a real server is before anyone measures it. The benchmark is a real
process that sends requests and prints bench_serving's result block, "Accept length:" from /server_info.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO_ROOT, load_json, run_envsnap

from envsnap.measure import server_metrics

pytest.importorskip("prometheus_client")  # the test extra has it (setup.cfg): SGLang's own producer

STAND_IN = REPO_ROOT / "tests" / "helpers" / "sglang_metrics_server.py"
LABELS = '{engine_type="unified",is_streaming="true",model_name="meta-llama/Llama-3.1-8B-Instruct"}'
GEN = "sglang:generation_tokens_total" + LABELS
E2E = "sglang:e2e_request_latency_seconds" + LABELS


@pytest.fixture
def stand_in():
    def start(*args):
        proc = subprocess.Popen([sys.executable, str(STAND_IN), "serve", *args], stdout=subprocess.PIPE, text=True)
        started.append(proc)
        return f"http://127.0.0.1:{int(proc.stdout.readline())}"

    started = []
    yield start
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


def _bench(url, accept):
    return [sys.executable, str(STAND_IN), "bench", "--url", url, "--requests", "4", "--tokens", "60",
            "--accept", str(accept)]


def _outputs(good, bad, tmp_path):
    """What `diff` says as text and JSON, and what `report` writes: the three must agree."""
    text = run_envsnap("diff", good, bad)
    data = run_envsnap("diff", "--format", "json", good, bad)
    report = tmp_path / "report.html"
    html = run_envsnap("report", good, bad, "-o", report)
    assert html.returncode == 0, html.stderr
    return text.stdout, json.loads(data.stdout), report.read_text()


@pytest.mark.slow
def test_each_run_records_its_own_accept_length_from_metrics(stand_in, tmp_path):
    # warm-up: 10 requests of 60 tokens at accept length 1.5 (400 verify calls) before anyone measures
    url = stand_in("--warmup-requests", "10", "--warmup-accept", "1.5")
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    for out, accept in ((good, 3.0), (bad, 2.0)):
        result = run_envsnap("run", "-o", out, "--repeat", "2", "--sglang-url", url, "--timeout", "20", "--",
                             *_bench(url, accept))
        assert result.returncode == 0, result.stderr
    snap = load_json(good)
    sglang = snap["sections"]["sglang"]["data"]
    assert sglang["metrics"]["counters"][GEN] == 600.0  # the capture saw the warm-up's counters
    runs = snap["runs"]
    assert [r["ok"] for r in runs] == [True, True]
    for number, run in enumerate(runs, 1):
        # 4 requests x 60 tokens in 20 verify calls each: 3.0, whatever the server did before
        assert run["metrics"]["spec_accept_length"] == 3.0
        # bench_serving's "Accept length:" is /server_info's lifetime figure (1.75 after run 1, 1.93 after
        # run 2): not a metric of the run, its value kept in the note
        assert "accept_length" not in run["metrics"]
        lifetime = (600 + 240 * number) / (400 + 80 * number)
        assert f"accept_length {round(lifetime, 2):.4g} left out: the server's lifetime average" in run["note"]
        assert "sglang_metrics" in run["parsers"] and "bench_serving" in run["parsers"]
        server = run["server_metrics"]
        assert server["url"] == url + "/metrics"
        assert server["counters"][GEN] == 240.0
        assert server["histograms"][E2E] == pytest.approx({"count": 4, "sum": 4 * 20 * 0.004, "mean": 0.08})
        gauge = [v for k, v in server["gauges"].items() if k.startswith("sglang:spec_accept_length{")]
        assert gauge == [3.0] or number == 2  # run 2 leaves the gauge where run 1 left it: not moved
    assert [r["metrics"]["spec_accept_length"] for r in load_json(bad)["runs"]] == [2.0, 2.0]
    shown = run_envsnap("show", "-v", good)
    assert shown.returncode == 0, shown.stderr
    assert "DP0: avg_spec_accept_length=1.5 (since the server started)" in shown.stdout
    assert "accept length since the server started: 1.5 (generation tokens / verify calls" in shown.stdout
    assert "last decode-log interval: spec_accept_length (pp_rank 0, tp_rank 0) 1.5" in shown.stdout
    # diff: the runs' own accept lengths (3 -> 2) drive the EAGLE-3 decomposition, with no lifetime warning
    text, data, html = _outputs(good, bad, tmp_path)
    decomposition = data["verdict"]["decomposition"]
    assert decomposition["accept_length"]["metric"] == "spec_accept_length"
    assert (decomposition["accept_length"]["good"], decomposition["accept_length"]["bad"]) == (3.0, 2.0)
    assert decomposition["side"] == "drafter"
    assert not any("running average" in w for w in data["warnings"])
    assert "running average" not in text and "running average" not in html
    assert "spec_accept_length" in text and "spec_accept_length" in html


@pytest.mark.slow
def test_without_metrics_the_lifetime_figure_stays_with_its_caveat(stand_in, tmp_path):
    url = stand_in("--warmup-requests", "10", "--warmup-accept", "1.5", "--no-metrics")
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    for out, accept in ((good, 3.0), (bad, 2.0)):
        result = run_envsnap("run", "-o", out, "--repeat", "1", "--sglang-url", url, "--timeout", "20", "--",
                             *_bench(url, accept))
        assert result.returncode == 0, result.stderr
    snap = load_json(good)
    assert "--enable-metrics" in snap["sections"]["sglang"]["data"]["metrics_unavailable"]
    (run,) = snap["runs"]
    assert run["metrics"]["accept_length"] == 1.75 and "spec_accept_length" not in run["metrics"]
    assert "accept_length is the server's running average" in run["note"]
    assert "server_metrics" not in run
    shown = run_envsnap("show", good).stdout
    assert "accept_length                median 1.75  (n=1, min 1.75, max 1.75)  (the server's running average " \
           "since it started, not each run's own)" in shown
    text, data, html = _outputs(good, bad, tmp_path)
    warning = ("accept_length from bench_serving is the server's running average since start, not this run's "
               "alone")
    assert any(w.startswith(warning) for w in data["warnings"])
    assert warning in text and warning.replace("'", "&#39;") in html


def test_deltas_take_counters_histograms_and_moved_gauges():
    before = {"counters": {"a_total": 10.0, "b_total": 5.0}, "gauges": {"g": 1.0, "h": 2.0},
              "histograms": {"lat": {"count": 3.0, "sum": 0.3}}}
    after = {"counters": {"a_total": 16.0, "b_total": 5.0, "c_total": 2.0}, "gauges": {"g": 1.0, "h": 4.0},
             "histograms": {"lat": {"count": 5.0, "sum": 0.7}}}
    assert server_metrics.deltas(before, after) == {
        "counters": {"a_total": 6.0, "c_total": 2.0}, "gauges": {"h": 4.0},
        "histograms": {"lat": {"count": 2.0, "sum": pytest.approx(0.4), "mean": pytest.approx(0.2)}}}
    restarted = server_metrics.deltas(after, before)
    assert restarted["reset"] == ["a_total", "lat"]
