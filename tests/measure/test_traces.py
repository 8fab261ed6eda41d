"""Profiler trace summaries (envsnap/measure/traces.py, trace_runs.py) on real torch.profiler traces."""
from __future__ import annotations

import gzip
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, load_json, run_envsnap

from envsnap.measure import trace_runs, traces
from envsnap.model import schema

WORKLOAD = str(REPO_ROOT / "tests" / "helpers" / "trace_workload.py")
torch = pytest.importorskip("torch")


def _workload(trace_dir: Path, *extra: str, env=None) -> Path:
    subprocess.run([sys.executable, WORKLOAD, "--trace-dir", str(trace_dir), "--steps", "4", "--width", "64",
                    "--tokens", "16", *extra], check=True, capture_output=True, env=env)
    (path,) = trace_dir.iterdir()
    return path


@pytest.fixture(scope="module")
def real_trace(tmp_path_factory) -> Path:
    return _workload(tmp_path_factory.mktemp("trace"), "--step-spans")


@pytest.mark.slow
def test_summary_of_a_real_torch_trace(real_trace, tmp_path):
    summary = traces.summarize(str(real_trace))
    raw = json.loads(real_trace.read_text())
    ops = [e for e in raw["traceEvents"] if e.get("ph") == "X" and e.get("cat") == "cpu_op"]
    mm = [e for e in ops if e["name"] == "aten::mm"]
    assert summary["steps"] == {"count": 4, "source": "ProfilerStep#"}  # the markers win over step[...] spans
    assert summary["cpu_ops"]["aten::mm"]["count"] == len(mm) > 0
    assert summary["cpu_ops"]["aten::mm"]["total_us"] == pytest.approx(sum(e["dur"] for e in mm), abs=0.01)
    assert summary["kernels"] == {} and summary["launches"]["kernel"] == 0  # a CPU run
    assert 0 < summary["cpu_ops_us"] <= summary["span_us"]
    # the snapshot's schema takes it as a run's trace
    schema.validate({"schema_version": 1, "runs": [{"ok": True, "metrics": {"x": 1.0},
                                                    "trace": {"source": "dir", "files": [summary]}}]})

    # Read in tiny pieces (every event boundary a cut, nested objects waited for) and gzipped: the same answer.
    pieces = [len(batch) for _header, batch in traces.iter_event_batches(str(real_trace), block=97)]
    assert len(pieces) > 10 and sum(pieces) == len(raw["traceEvents"])
    gz = tmp_path / "x-TP-3-DECODE.trace.json.gz"
    gz.write_bytes(gzip.compress(real_trace.read_bytes()))
    zipped = traces.summarize(str(gz))
    assert zipped["rank"] == 3 and zipped["stage"] == "DECODE"
    assert zipped["cpu_ops"] == summary["cpu_ops"]


@pytest.mark.slow
def test_sglang_step_spans_when_there_are_no_profiler_steps(real_trace, tmp_path):
    # SGLang's traces have no ProfilerStep# (sglang 0.5.23 profiler_manager.py starts torch.profiler without a
    # schedule) but its step[...] spans (model_runner.py:1831-1838): the same real trace with the markers removed.
    raw = json.loads(real_trace.read_text())
    raw["traceEvents"] = [e for e in raw["traceEvents"] if not str(e.get("name", "")).startswith("ProfilerStep#")]
    stripped = tmp_path / "stripped.json"
    stripped.write_text(json.dumps(raw))
    steps = traces.summarize(str(stripped))["steps"]
    assert steps["source"] == "sglang step spans" and steps["kind"] == "DECODE"
    assert steps["count"] == 4  # the active steps (warm-up steps are not recorded)
    raw["traceEvents"] = [e for e in raw["traceEvents"] if not str(e.get("name", "")).startswith("step[")]
    stripped.write_text(json.dumps(raw))
    assert traces.summarize(str(stripped))["steps"] == {"count": 1, "source": "whole trace"}
    assert traces.summarize(str(stripped), requested_steps=8)["steps"] == {"count": 8, "source": "requested"}


def test_not_a_trace_is_one_clear_error(tmp_path):
    for text in ('{"schemaVersion": 1}', '{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": 2}', "nope"):
        path = tmp_path / "bad.json"
        path.write_text(text)
        with pytest.raises(traces.TraceError) as err:
            traces.summarize(str(path))
        assert str(err.value).startswith(str(path)) and "\n" not in str(err.value)
    summary = trace_runs.summarize_files([str(path)], "dir")
    assert summary["files"] == [] and "not a Chrome trace" in summary["notes"][0]


def test_a_bare_event_array_and_strings_that_look_like_boundaries(tmp_path):
    # A Chrome trace may be a bare array; "}, {" inside a string is no event boundary.
    events = [{"ph": "X", "cat": "cpu_op", "name": "op}, {" + str(i % 3), "ts": i * 10.0, "dur": 5.0, "pid": 1,
               "tid": 1, "args": {"nested": [{"a": 1}, {"b": "}, {"}]}} for i in range(300)]
    path = tmp_path / "bare.json"
    path.write_text(json.dumps(events))
    total = sum(len(batch) for _h, batch in traces.iter_event_batches(str(path), block=50))
    assert total == 300
    ops = traces.summarize(str(path))["cpu_ops"]
    assert {name: op["count"] for name, op in ops.items()} == {"op}, {0": 100, "op}, {1": 100, "op}, {2": 100}


@pytest.mark.slow
def test_run_and_attach_record_the_traces(tmp_path):
    trace_dir = tmp_path / "traces"
    out = tmp_path / "run.json"
    result = run_envsnap("run", "-o", str(out), "--repeat", "2", "--trace", str(trace_dir), "--timeout", "20", "--",
                         sys.executable, WORKLOAD, "--trace-dir", str(trace_dir), "--steps", "3", "--width", "64",
                         "--tokens", "16", timeout=240)
    assert result.returncode == 0, result.stderr
    runs = load_json(out)["runs"]
    assert [r["trace"]["source"] for r in runs] == ["dir", "dir"]
    # each run summarises the one file it wrote, not the one before it
    files = [r["trace"]["files"] for r in runs]
    assert [len(f) for f in files] == [1, 1] and files[0][0]["file"] != files[1][0]["file"]
    assert files[0][0]["steps"]["count"] == 3

    other = tmp_path / "other"
    made = _workload(other)
    result = run_envsnap("attach", str(out), "--trace", str(made), "--note", "profiled elsewhere")
    assert result.returncode == 0, result.stderr
    last = load_json(out)["runs"][-1]
    assert last["source"] == "attach" and last["trace"]["files"][0]["steps"]["count"] == 4
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    result = run_envsnap("attach", str(out), "--trace", str(bad))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "not a Chrome trace" in result.stderr
    shutil.rmtree(other)
