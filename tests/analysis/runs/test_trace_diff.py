"""Where the time went (analysis/runs/trace_diff.py): real torch.profiler traces of two workloads that differ in one
setting, compared per step, and the ranking they move; the rules (families, replaced kernels, launches, what
a trace cannot tell) on summaries shaped as measure/traces.py writes them."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from helpers import REPO_ROOT, causes_by_key, has_factor
from helpers.diff import runs, section, snap
from helpers.result_types import mismatches
from helpers.traces import allreduce_pair, trace_file, traced_pair, with_traces

from envsnap.analysis import knowledge, result as result_mod
from envsnap.analysis.runs import trace_diff
from envsnap.measure import trace_runs
from envsnap.model.result_types import DiffResult, SizeInfo

WORKLOAD = str(REPO_ROOT / "tests" / "helpers" / "trace_workload.py")
FAST, SLOW = {"tok_s": [100, 101, 99]}, {"tok_s": [60, 61, 59]}


@pytest.fixture(scope="module")
def cpu_pair(tmp_path_factory):
    """Three real profiled sessions (a run each) of a workload in float32 (GOOD) and in float64 over twice the
    tokens (BAD): its matmuls (aten::mm under aten::matmul) take about four times as long per step, far beyond
    what two busy processes beside the test do to one session's timings (a doubling was seen to overlap)."""
    import os

    pytest.importorskip("torch")
    base = tmp_path_factory.mktemp("cpu-pair")
    traces = {}
    # GOOD and BAD sessions alternate, so load from other processes on a shared machine falls on both alike.
    for _ in range(3):
        for side, dtype, tokens in (("good", "float32", "256"), ("bad", "float64", "512")):
            subprocess.run([sys.executable, WORKLOAD, "--trace-dir", str(base / side), "--steps", "3", "--width",
                            "768", "--tokens", tokens, "--sessions", "1"], check=True, capture_output=True,
                           env=dict(os.environ, TRACE_WORKLOAD_DTYPE=dtype))
    for side in ("good", "bad"):
        traces[side] = [trace_runs.summarize_files([str(p)], "dir") for p in sorted((base / side).iterdir())]
    return traces


@pytest.mark.slow
def test_real_cpu_traces_name_the_op_family_that_moved(cpu_pair):
    good = snap("good", env={"TRACE_WORKLOAD_DTYPE": "float32", "OMP_NUM_THREADS": "4"},
                runs=with_traces(runs(FAST), cpu_pair["good"]))
    bad = snap("bad", env={"TRACE_WORKLOAD_DTYPE": "float64", "OMP_NUM_THREADS": "4"},
               runs=with_traces(runs(SLOW), cpu_pair["bad"]))
    trace = trace_diff.compare(good, bad)
    assert trace is not None and trace["steps"]["good"]["source"] == "ProfilerStep#"
    assert trace["steps"]["good"]["count"] == trace["steps"]["bad"]["count"] == 9  # 3 runs x 3 steps
    top = trace["cpu_ops"][0]
    # A matrix product (which of them moved most depends on the machine's load: float64 slows them all)
    assert top["family"] in ("aten::matmul", "aten::mm", "aten::bmm") and top["moved"] and top["material"]
    # by how much per step: the median over runs of each run's total / its steps, from the summaries
    per_run = [sum(s["total_us"] for f in t["files"] for n, s in f["cpu_ops"].items() if n == top["family"]) / 3 / 1000
               for t in cpu_pair["bad"]]
    assert top["bad_ms"] == pytest.approx(sorted(per_run)[1], rel=1e-6)
    assert top["bad_ms"] > 1.3 * top["good_ms"]
    assert trace["line"].startswith("per step (ProfilerStep#): CPU ops +")
    assert top["family"] in trace["line"]
    assert trace["implicates"] == [knowledge.CPU_HOST]

    result = result_mod.analyze(good, bad)
    assert result["verdict"]["mechanism"]["trace"]["line"] == trace["line"]
    assert trace["line"] in result["verdict"]["mechanism"]["line"]


# ---------------------------------------------------------------- the rules, on summaries


def test_families_drop_templates_parameters_and_tile_shapes():
    assert trace_diff.family("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
                             "execute_segment_k_off_kernel__5x_cublas") == \
        trace_diff.family("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x256x64_warpgroupsize2x1x1_"
                          "execute_segment_k_off_kernel__5x_cublas")
    assert trace_diff.family("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
                             "std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)") \
        == "at::native::vectorized_elementwise_kernel"
    assert trace_diff.family("triton_poi_fused_add_mul_silu_0") == "triton_poi_fused_add_mul_silu"
    assert trace_diff.kernel_component("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)") \
        == "communication"
    assert trace_diff.kernel_component("void sglang::cross_device_reduce_1stage<__nv_bfloat16, 2>(...)") == \
        "communication"
    assert trace_diff.kernel_component("nvjet_tst_128x64_64x8_1x2_h_bz_coopB_TNT") == "gemm"
    assert trace_diff.kernel_component("void flashinfer::BatchDecodeWithPagedKVCacheKernel<...>(...)") == "attention"


def test_a_slower_all_reduce_moves_the_communication_cause_and_nccl_cannot_say_why():
    one_gpu = section({"count": 1, "gpus": {"0": {"name": "NVIDIA H200"}}})
    good, bad = allreduce_pair(nvidia=one_gpu)
    trace = trace_diff.compare(good, bad)
    assert trace["line"].startswith("per decode step (sglang step spans): all-reduce +8.7 ms")
    assert trace["implicates"][0] == knowledge.COMMUNICATION
    assert "cannot say which ran" in trace["notes"][0] and "no NCCL TUNING log lines" in trace["notes"][0]
    result = result_mod.analyze(good, bad)
    causes = causes_by_key(result["causes"])
    proto = causes["env.NCCL_PROTO"]
    assert has_factor(proto, "trace_implicates", "the profiler traces implicate its component (communication)")
    assert proto["rank"] == 1
    # Its size: the traces' all-reduce time per step against the step's growth (analysis/rank/size.py).
    assert proto["size"]["share"] > 0.9 and proto["size"]["line"].startswith("size: its component (communication)")
    met: set = set()
    assert mismatches(json.loads(json.dumps(result)), DiffResult, met=met) == [] and SizeInfo in met

    # With NCCL's TUNING lines captured, the note says what they show.
    nccl = {"ranks": {"0": {"algorithms": ["RING"], "protocols": ["LL"]}}, "env": {}}
    good["sections"]["nccl"] = section(nccl)
    bad["sections"]["nccl"] = section({"ranks": {"0": {"algorithms": ["RING"], "protocols": ["SIMPLE"]}}, "env": {}})
    note = trace_diff.compare(good, bad)["notes"][0]
    assert "GOOD: algorithms RING, protocols LL; BAD: algorithms RING, protocols SIMPLE" in note


def test_graphs_that_stopped_replaying_and_a_replaced_kernel_family():
    flash = "void flash::flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4> >(Flash_fwd_params)"
    math = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, float>(float*, float const*, int)"
    gemm = "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_kernel__5x_cublas"
    good_file = trace_file({flash: (320, 8000.0), gemm: (960, 30000.0)}, span_us=60000.0, idle_us=2000.0,
                      runtime={"cudaGraphLaunch": (10, 60.0)}, launches={"graph": 10})
    bad_file = trace_file({math: (320, 14000.0), gemm: (960, 30500.0)}, span_us=95000.0, idle_us=30000.0,
                     runtime={"cudaLaunchKernel": (1280, 6400.0)}, launches={"kernel": 1280})
    trace = trace_diff.compare(*traced_pair(good_file, bad_file))
    assert trace["replaced"][0]["from"] == "flash::flash_fwd_splitkv_kernel"
    assert trace["replaced"][0]["to"] == "at::native::cunn_SoftMaxForward"
    assert "0 \u2192 128 kernel launches" in trace["line"] and "1 \u2192 0 graph launches" in trace["line"]
    assert "GPU idle 0.2 ms \u2192 3.0 ms" in trace["line"]
    assert knowledge.GRAPHS in trace["implicates"] and knowledge.KERNELS in trace["implicates"]


def test_nothing_moved_says_so_and_implicates_nothing():
    gemm = "nvjet_tst_128x64_64x8_1x2_h_bz_coopB_TNT"
    same = trace_file({gemm: (100, 5000.0)})
    trace = trace_diff.compare(*traced_pair(same, same))
    assert "no component moved beyond the runs' spread" in trace["line"]
    assert trace["implicates"] == [] and trace["held"] == []
    assert trace_diff.compare(snap("g", runs=runs(FAST)), snap("b", runs=runs(SLOW))) is None


def test_one_disturbed_run_moves_no_median():
    # Three runs a side; one GOOD run slowed by something else on the machine (as slow as BAD).
    assert trace_diff.moved([10.0, 10.2, 20.0], [20.1, 20.3, 20.2])["beyond_noise"] is True
    assert trace_diff.moved([10.0, 20.5, 20.0], [20.1, 20.3, 20.2])["beyond_noise"] is False
    assert trace_diff.moved([10.0], [11.0])["beyond_noise"] is False  # single runs: 20% needed


def test_traces_of_every_run_without_a_communication_kernel_rule_out_nccl_settings():
    """What acted, over names: when every run was profiled and no communication kernel ran, NCCL's settings cannot
    have acted (they act through its kernels); one collective kernel in the traces leaves them in play."""
    from helpers.traces import GEMM

    one_gpu = section({"count": 1, "gpus": {"0": {"name": "NVIDIA H200"}}})
    envs = {"env_good": {"NCCL_PROTO": "LL", "NVIDIA_TF32_OVERRIDE": "1"},
            "env_bad": {"NCCL_PROTO": "Simple", "NVIDIA_TF32_OVERRIDE": "0"}}
    good, bad = traced_pair(trace_file({GEMM: (1920, 40000.0)}), trace_file({GEMM: (1920, 90000.0)}), nvidia=one_gpu,
                            **envs)
    causes = causes_by_key(result_mod.analyze(good, bad)["causes"])
    proto = causes["env.NCCL_PROTO"]
    assert proto["reach"]["tier"] == "cannot" and "no communication kernel" in proto["reach"]["observation"]
    assert causes["env.NVIDIA_TF32_OVERRIDE"]["rank"] < proto["rank"]
    good, bad = allreduce_pair(nvidia=one_gpu)  # an all-reduce kernel in every run: NCCL ran
    assert causes_by_key(result_mod.analyze(good, bad)["causes"])["env.NCCL_PROTO"]["reach"]["tier"] != "cannot"
