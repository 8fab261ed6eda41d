"""On a real NVIDIA GPU (skipped elsewhere): real CUDA traces of a GOOD/BAD pair whose kernels change.

The workload (tests/helpers/trace_workload.py, --device cuda) runs float32 matmuls that may use TF32 tensor
cores (--tf32); BAD sets NVIDIA_TF32_OVERRIDE=0, which makes cuBLAS run its plain FP32 kernels instead
(cuBLAS documentation, "NVIDIA_TF32_OVERRIDE"). Each step is replayed from a CUDA graph. The diff must see
kernels and graph launches, name the GEMM family that moved and its time per step, and implicate the kernels
component; the ranking must move NVIDIA_TF32_OVERRIDE (component kernels) up with the trace factor."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest
from helpers import REPO_ROOT, causes_by_key, has_factor
from helpers.diff import runs, section, snap
from helpers.planted import assert_communication_below
from helpers.traces import with_traces

from envsnap.analysis import knowledge, result as result_mod
from envsnap.analysis.runs import trace_diff
from envsnap.measure import trace_runs

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if importlib.util.find_spec("torch") is None:  # pragma: no cover - the GPU machine has torch
    pytest.skip("torch is not installed", allow_module_level=True)

WORKLOAD = str(REPO_ROOT / "tests" / "helpers" / "trace_workload.py")
ARGS = ["--device", "cuda", "--tf32", "--width", "4096", "--tokens", "2048", "--steps", "5", "--sessions", "3"]


def _traces(tmp_path, name, **env):
    out = tmp_path / name
    proc = subprocess.run([sys.executable, WORKLOAD, "--trace-dir", str(out), *ARGS], capture_output=True, text=True,
                          env=dict(os.environ, TRACE_WORKLOAD_DTYPE="float32", **env), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return [trace_runs.summarize_files([str(p)], "dir") for p in sorted(out.iterdir())]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("gpu-traces")
    good_traces = _traces(tmp, "good")
    bad_traces = _traces(tmp, "bad", NVIDIA_TF32_OVERRIDE="0")
    one_gpu = section({"count": 1, "gpus": {"0": {"name": "NVIDIA GPU"}}})
    fast, slow = {"steps_per_s": [100, 101, 99]}, {"steps_per_s": [60, 61, 59]}
    good = snap("good", env={"OMP_NUM_THREADS": "4", "NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"},
                runs=with_traces(runs(fast), good_traces), nvidia=one_gpu)
    bad = snap("bad", env={"OMP_NUM_THREADS": "8", "NCCL_PROTO": "Simple", "NCCL_ALGO": "Tree", "NCCL_P2P_DISABLE": "1",
                           "NVIDIA_TF32_OVERRIDE": "0"},
               runs=with_traces(runs(slow), bad_traces), nvidia=one_gpu)
    return good, bad, good_traces, bad_traces


def test_cuda_traces_carry_kernels_graph_launches_and_steps(pair):
    _good, _bad, good_traces, _ = pair
    summary = good_traces[0]["files"][0]
    assert summary["steps"] == {"count": 5, "source": "ProfilerStep#"}
    assert summary["kernels"] and summary["gpu"]["busy_us"] > 0
    assert summary["launches"]["graph"] >= 5  # one replay per step


def test_the_diff_names_the_gemm_family_and_moves_the_tf32_setting(pair):
    good, bad, _, _ = pair
    trace = trace_diff.compare(good, bad)
    gemm = next(r for r in trace["components"] if r["name"] == "gemm")
    assert gemm["moved"] and gemm["bad_ms"] > gemm["good_ms"]
    assert trace["implicates"][0] == knowledge.KERNELS
    top = trace["kernels"][0]
    assert top["component"] == "gemm" and top["change_ms"] > 0
    assert "GEMM +" in trace["line"]
    result = result_mod.analyze(good, bad)
    causes = causes_by_key(result["causes"])
    tf32 = causes["env.NVIDIA_TF32_OVERRIDE"]
    assert tf32["rank"] == 1 and tf32["tied"] == 0
    assert_communication_below("GPU traces, TF32 off", result, lambda c: c.get("variable") == "NVIDIA_TF32_OVERRIDE")
    assert has_factor(tf32, "trace_implicates", "the profiler traces implicate its component (attention/kernels)")
    assert has_factor(causes["env.OMP_NUM_THREADS"], "trace_held", "the profiler traces measured its component")
