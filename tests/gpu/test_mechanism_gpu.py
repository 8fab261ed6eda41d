"""On a real NVIDIA GPU (skipped elsewhere): run telemetry samples NVML while real GPU work runs, and the
mechanism tells GPU-bound slowdowns (more GPU work, the GPU never idle) from launch/CPU-bound ones (the
GPU left waiting between kernels). The benchmark is tests/helpers/bench.py's `gpu` mode (bf16 matrix
products with torch); nothing here hard-codes a GPU's clocks or speed."""
from __future__ import annotations

import importlib.util

import pytest
from helpers.bench import bench_cmd

from envsnap.analysis import knowledge
from envsnap.analysis.runs.mechanism import mechanism
from envsnap.measure import runs

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if importlib.util.find_spec("torch") is None:  # pragma: no cover - the GPU machine has torch
    pytest.skip("torch is not installed", allow_module_level=True)

RUNS = 3


def measured(*args: str) -> dict:
    session = runs.RunSession(runs.RunOptions(command=bench_cmd("gpu", *args), repeat=RUNS, telemetry=True))
    session.execute()
    assert all(r["ok"] for r in session.records), [r.get("error") for r in session.records]
    return {"runs": session.records}


@pytest.fixture(scope="module")
def good():
    return measured("--iters", "3000")


def test_telemetry_sees_the_gpu_busy_at_its_working_clock(good):
    for run in good["runs"]:
        usage = run["telemetry"]
        assert usage["gpu"] == "nvml"
        gpu = usage["gpus"]["0"]
        assert gpu["active_samples"] >= 5, gpu  # the loop lasts seconds: readings every 0.5 s
        # Inside its active span the loop never leaves the GPU idle (the span's edge readings, where
        # the loop began and ended within NVML's sample period, are left out of the steady figure).
        assert gpu["util_pct_steady_mean"] >= 90.0, gpu
        # The GPU-busy seconds (utilisation x interval) account for the loop the benchmark timed.
        loop_s = run["metrics"]["loop_s"]
        assert 0.7 * loop_s <= gpu["busy_s"] <= 1.3 * loop_s + 0.5, (gpu, loop_s)
        assert gpu["sm_clock_mhz_active_median"] > gpu["sm_clock_mhz_min"] or gpu["sm_clock_mhz_min"] > 1000, gpu
        assert usage["sampler_cpu_s"] < 0.1 * usage["wall_s"]  # 10x guard on the 1% target (benchmarks measure it)


def test_more_gpu_work_with_the_gpu_never_idle_is_gpu_work(good):
    result = mechanism(good, measured("--iters", "6000"))
    assert result["kind"] == "gpu_work", (result["line"], result["factors"])
    assert result["line"].startswith("GPU busy ") and "on both sides" in result["line"]
    # Twice the products: about twice the GPU-busy time per run (what the mechanism rests on).
    busy = result["factors"]["gpu_busy_s"]
    assert busy["beyond_noise"] and 1.6 <= busy["bad"] / busy["good"] <= 2.4, busy
    assert knowledge.KERNELS in result["components"]["matches"]
    assert knowledge.GRAPHS in result["components"]["contradicts"]


def test_waiting_on_the_host_between_kernels_is_launch_bound(good):
    result = mechanism(good, measured("--iters", "600", "--gap-ms", "6"))
    assert result["kind"] == "launch_bound", (result["line"], result["factors"])
    assert result["line"].startswith("GPU idle ") and "launch/CPU bound" in result["line"]
    assert result["components"]["contradicts"] == [knowledge.KERNELS]
