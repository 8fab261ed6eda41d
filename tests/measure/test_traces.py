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


class _ProfilingServer:
    """A stand-in for what cannot run here (an SGLang server on GPUs), shaped like sglang 0.5.23:
    POST /start_profile takes a ProfileReq body (srt/managers/io_struct.py:2374-2400) and answers
    "Start profiling." (srt/entrypoints/http_server.py:1221-1229); with profile_by_stage, after num_steps
    decode steps each TP rank writes `{profile_id}-TP-{rank}-DECODE.trace.json.gz` into output_dir
    (srt/managers/scheduler_components/profiler_manager.py:336-362), in the background of the requests.
    The files it writes are a real torch.profiler trace, gzipped, one copy per rank."""

    def __init__(self, trace: Path, ranks: int = 2, delay: float = 0.5):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.bodies = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - /server_info is not served: the capture records that
                self.send_response(404)
                self.end_headers()

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.bodies.append(body)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(b"Start profiling.\n")

                def write():
                    import time as _time

                    _time.sleep(delay)
                    for rank in range(ranks):
                        name = f"{body['profile_id']}-TP-{rank}-DECODE.trace.json.gz"
                        Path(body["output_dir"], name).write_bytes(gzip.compress(trace.read_bytes()))
                threading.Thread(target=write, daemon=True).start()

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.slow
def test_profile_steps_asks_sglang_and_waits_for_its_rank_files(real_trace, tmp_path):
    server = _ProfilingServer(real_trace)
    try:
        trace_dir = tmp_path / "profiles"
        out = tmp_path / "run.json"
        result = run_envsnap("run", "-o", str(out), "--repeat", "2", "--trace", str(trace_dir), "--profile-steps", "4",
                             "--sglang-url", server.url, "--timeout", "20", "--",
                             sys.executable, "-c", 'print(\'{"tok_s": 100}\')', timeout=120)
        assert result.returncode == 0, result.stderr
    finally:
        server.close()
    assert len(server.bodies) == 2
    body = server.bodies[0]
    assert {k: body[k] for k in ("output_dir", "num_steps", "profile_by_stage", "activities", "with_stack",
                                 "record_shapes")} == {"output_dir": str(trace_dir), "num_steps": 4,
                                                       "profile_by_stage": True, "activities": ["CPU", "GPU"],
                                                       "with_stack": False, "record_shapes": False}
    runs = load_json(out)["runs"]
    for run, sent in zip(runs, server.bodies):
        trace = run["trace"]
        assert trace["source"] == "sglang" and trace["requested_steps"] == 4
        # each run holds its own request's files, one per rank, written after the command had finished
        assert [(f["rank"], f["stage"]) for f in trace["files"]] == [(0, "DECODE"), (1, "DECODE")]
        assert all(f["file"].startswith(sent["profile_id"]) for f in trace["files"])
        assert trace["files"][0]["steps"]["source"] == "ProfilerStep#"  # the markers in the file win


def test_profile_steps_needs_a_server_and_a_directory(tmp_path):
    result = run_envsnap("run", "-o", str(tmp_path / "x.json"), "--profile-steps", "4", "--", "true")
    assert result.returncode == 2 and "--profile-steps needs --sglang-url URL" in result.stderr
    assert result.stderr.count("\n") == 1 and not (tmp_path / "x.json").exists()
