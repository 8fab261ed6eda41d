"""Snapshots whose runs carry profiler trace summaries shaped as envsnap/measure/traces.py writes them, for the
rules of analysis/runs/trace_diff.py and its rendering (real traces: tests/measure/test_traces.py,
tests/analysis/runs/test_trace_diff.py's CPU pair, benchmarks/gpu_trace_check.sh on a GPU)."""
from __future__ import annotations

import copy

from helpers.diff import runs, snap

FAST, SLOW = {"tok_s": [100, 101, 99]}, {"tok_s": [60, 61, 59]}
ALLREDUCE = "void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(sglang::RankData*)"
GEMM = "nvjet_tst_128x64_64x8_1x2_h_bz_coopB_TNT"


def with_traces(side_runs, traces):
    out = copy.deepcopy(side_runs)
    for run, trace in zip(out, traces):
        run["trace"] = trace
    return out


def trace_file(kernels=None, runtime=None, steps=10, span_us=20000.0, idle_us=1000.0, cpu_ops=None, launches=None):
    """One rank's decode-stage summary: kernels {name: (count, total_us)}, runtime the same, launches {kind: n}."""
    return {"file": "x-TP-0-DECODE.trace.json.gz", "rank": 0, "stage": "DECODE",
            "steps": {"count": steps, "source": "sglang step spans", "kind": "DECODE"}, "span_us": span_us,
            "kernels": {n: {"count": c, "total_us": t, "stream": 7} for n, (c, t) in (kernels or {}).items()},
            "memcpy": {}, "cpu_ops": {n: {"count": c, "total_us": t} for n, (c, t) in (cpu_ops or {}).items()},
            "runtime": {n: {"count": c, "total_us": t} for n, (c, t) in (runtime or {}).items()},
            "launches": dict({"kernel": 0, "graph": 0, "memcpy": 0, "sync": 0}, **(launches or {})),
            "gpu": {"busy_us": span_us - idle_us, "span_us": span_us, "idle_us": idle_us}, "cpu_ops_us": 500.0}


def traced_pair(good_file, bad_file, n=3, env_good=None, env_bad=None, **sections):
    good = snap("good", env=env_good or {},
                runs=with_traces(runs(FAST), [{"source": "sglang", "files": [good_file]}] * n), **copy.deepcopy(sections))
    bad = snap("bad", env=env_bad or {},
               runs=with_traces(runs(SLOW), [{"source": "sglang", "files": [bad_file]}] * n), **copy.deepcopy(sections))
    return good, bad


def allreduce_pair(**sections):
    """A pair whose all-reduce got 8.7 ms slower per step (GEMM 0.4 ms), NCCL_PROTO and OMP_NUM_THREADS changed."""
    good_file = trace_file({ALLREDUCE: (960, 9000.0), GEMM: (1920, 40000.0)}, span_us=150000.0)
    bad_file = trace_file({ALLREDUCE: (960, 96000.0), GEMM: (1920, 44000.0)}, span_us=240000.0)
    return traced_pair(good_file, bad_file, env_good={"NCCL_PROTO": "LL", "OMP_NUM_THREADS": "4"},
                       env_bad={"NCCL_PROTO": "Simple", "OMP_NUM_THREADS": "8"}, **sections)
