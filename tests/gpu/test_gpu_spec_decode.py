"""benchmarks/gpu_spec_decode.py (the EAGLE-3-like GPU workload of gpu_check.sh step 4) and the helpers of
benchmarks/gpu_check.sh, on CPU with tiny sizes; GPU-marked tests repeat the key checks on CUDA."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import REPO_ROOT, run_envsnap

from envsnap.measure.metrics import role

torch = pytest.importorskip("torch")

BENCH = REPO_ROOT / "benchmarks"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sd = _load("gpu_spec_decode")
tools = _load("gpu_check_tools")


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tiny models: one intra-op thread is fastest, and never oversubscribes a shared CI machine."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def _models(extra=(), device="cpu", dtype=torch.float64):
    args = sd.parse_args(["--tiny", "--steps", "16", *extra])
    target, draft = sd.build_models(args, torch.device(device), dtype)
    return args, target, draft, sd.make_prompt(args, torch.device(device))


def _run_script(*args, env=None, timeout=120):
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, str(BENCH / "gpu_spec_decode.py"), *args], capture_output=True,
                          text=True, timeout=timeout, env=full_env)


# ---------------------------------------------------------------- speculative decoding is exact

@pytest.mark.parametrize("k", [1, 3, 6])
def test_speculative_output_equals_plain_greedy(k):
    # float64: no near-tie of two logits can flip between the verify forward and the greedy one.
    args, target, draft, prompt = _models()
    tokens, accepted = sd.speculative_generate(target, draft, prompt, k, 16)
    assert tokens.shape[1] == sum(accepted)
    assert all(1 <= a <= k + 1 for a in accepted)
    reference = sd.greedy_generate(target, prompt, tokens.shape[1])
    assert torch.equal(tokens, reference)


def test_a_wrong_draft_still_gives_greedy_output_but_accepts_less():
    # A draft with heavy noise disagrees more: accept length drops, the output stays the target's.
    _, target, draft, prompt = _models()
    _, _, noisy, _ = _models(["--draft-noise", "3.0"])
    tokens, accepted = sd.speculative_generate(target, noisy, prompt, 4, 16)
    assert torch.equal(tokens, sd.greedy_generate(target, prompt, tokens.shape[1]))
    _, good_accepted = sd.speculative_generate(target, draft, prompt, 4, 16)
    assert sum(accepted) / len(accepted) < sum(good_accepted) / len(good_accepted)


def test_accept_length_is_high_but_not_full_and_deterministic():
    _, target, draft, prompt = _models(dtype=torch.float32)
    first = sd.speculative_generate(target, draft, prompt, 4, 16)[1]
    _, target2, draft2, prompt2 = _models(dtype=torch.float32)  # rebuilt from the same seed
    second = sd.speculative_generate(target2, draft2, prompt2, 4, 16)[1]
    assert first == second
    mean = sum(first) / len(first)
    assert 2.0 <= mean < 5.0, first  # k=4: most drafts accepted, never all of them


# ---------------------------------------------------------------- the script's output

def test_cli_prints_a_final_json_line_with_the_eagle3_roles():
    t0 = time.monotonic()
    proc = _run_script("--device", "cpu", "--tiny", "--steps", "12", "--check", "--threads", "1")
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - t0 < 60
    assert "speculative output == plain greedy decoding" in proc.stdout
    last = _last_json(proc.stdout)
    assert {role(name) for name in last} >= {"throughput", "accept_length", "cycle_time"}
    assert all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in last.values())
    assert 1.0 <= last["accept_length"] <= 5.0
    # throughput = accept length / cycle time (the decomposition envsnap relies on), up to rounding
    assert last["output_throughput"] == pytest.approx(last["accept_length"] / last["cycle_ms"] * 1000, rel=0.01)


def test_cli_rejects_bad_sizes_and_missing_cuda():
    proc = _run_script("--dim", "10", "--heads", "4")
    assert proc.returncode == 2 and "multiple of --heads" in proc.stderr
    if not torch.cuda.is_available():
        proc = _run_script("--device", "cuda", "--tiny")
        assert proc.returncode == 2 and "no CUDA device" in proc.stderr


@pytest.mark.slow
def test_envsnap_run_parses_the_benchmark(tmp_path):
    out = tmp_path / "run.json"
    proc = run_envsnap("run", "-o", out, "--repeat", "2", "--warmup", "0", "--timeout", "30", "--",
                       sys.executable, BENCH / "gpu_spec_decode.py", "--device", "cpu", "--tiny", "--steps", "8",
                       "--threads", "1", cwd=tmp_path, timeout=240)
    assert proc.returncode == 0, proc.stderr
    runs = json.loads(out.read_text())["runs"]
    assert len(runs) == 2 and all(r["ok"] for r in runs)
    for run in runs:
        assert set(run["metrics"]) >= {"output_throughput", "accept_length", "cycle_ms"}
    assert runs[0]["metrics"]["accept_length"] == runs[1]["metrics"]["accept_length"]  # deterministic


# ---------------------------------------------------------------- gpu_check.sh helpers

def _nvidia_snapshot(tmp_path, dump=None):
    """The real nvidia collector over a stand-in pynvml answering like the H200 (tests/helpers/nvml.py)."""
    from helpers.nvml import make_fake_pynvml

    from envsnap.capture.base import CaptureContext
    from envsnap.capture.collectors import nvidia

    ctx = CaptureContext(timeout=10)
    ctx.deadline = time.monotonic() + 10
    module = make_fake_pynvml(dump=dump) if dump is not None else make_fake_pynvml()
    path = tmp_path / "snap.json"
    path.write_text(json.dumps({"sections": {"nvidia": nvidia.collect_from(module, ctx, nvidia_smi="")}}))
    return path


def test_compare_nvidia_matches_the_real_h200_xml(tmp_path):
    from helpers.nvml import NVIDIA_DATA

    snap = _nvidia_snapshot(tmp_path)
    figures = tmp_path / "fig.json"
    rc = tools.main(["compare-nvidia", str(snap), str(NVIDIA_DATA / "nvidia-smi-q.xml"),
                     "--topo", str(NVIDIA_DATA / "nvidia-smi-topo-m.txt"), "--figures", str(figures)])
    assert rc == 0
    fig = json.loads(figures.read_text())
    assert fig["nvidia.mismatches"] == 0 and fig["nvidia.missing"] == 0 and fig["nvidia.matches"] >= 20
    assert "gpus.0.nvlink" in fig["nvidia.not_supported"]  # the VM's NVLink calls answer Not Supported


def test_compare_nvidia_flags_a_value_nvidia_smi_contradicts(tmp_path):
    from helpers.nvml import NVIDIA_DATA, h200_dump

    dump = h200_dump()
    dump["gpus"][0]["nvmlDeviceGetPowerManagementLimit"] = 450000  # a capped card (mW)
    snap = _nvidia_snapshot(tmp_path, dump=dump)
    result = tools.compare_nvidia(json.loads(snap.read_text()), (NVIDIA_DATA / "nvidia-smi-q.xml").read_text())
    bad = {r["field"] for r in result["rows"] if r["result"] == "MISMATCH"}
    assert bad == {"gpu0.power_limit_w"}


def test_capture_bench_and_summaries_read_real_outputs(tmp_path):
    text = ("envsnap capture: median  0.812 s  (min 0.7, max 0.9, n=5)   [envsnap capture ...]\n"
            "torch.utils.collect_env: median  4.100 s  (min 4.0, max 4.3, n=5)\n"
            "ratio capture / collect_env: 0.198  (target <= 0.4)\n  integrity: 41234 RECORD entries hashed and compared\n")
    assert tools.parse_capture_bench(text) == {"capture_median_s": 0.812, "collect_env_median_s": 4.1,
                                               "ratio": 0.198, "integrity_files": 41234.0}
    assert tools.last_json_line('noise\n{"a": 1}\n{"b": 2}\ntrailer') == {"b": 2}


@pytest.mark.slow
def test_diff_and_bisect_summaries_on_real_envsnap_output(tmp_path):
    """envsnap run on both sides (one variable apart), diff, and the summariser finds that variable."""
    bench = [sys.executable, BENCH / "gpu_spec_decode.py", "--device", "cpu", "--tiny", "--steps", "6", "--threads", "1"]
    for side, extra in (("good", {}), ("bad", {"CUDA_LAUNCH_BLOCKING": "1"})):
        proc = run_envsnap("run", "-o", tmp_path / f"{side}.json", "--label", side, "--repeat", "2", "--warmup", "0",
                           "--timeout", "30", "--", *bench, env=extra, cwd=tmp_path, timeout=240)
        assert proc.returncode == 0, proc.stderr
    proc = run_envsnap("diff", tmp_path / "good.json", tmp_path / "bad.json", "--format", "json",
                       "-o", tmp_path / "diff.json", cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    figures = tmp_path / "fig.json"
    tools.main(["diff-summary", str(tmp_path / "diff.json"), "--expect", "CUDA_LAUNCH_BLOCKING",
                "--figures", str(figures)])
    fig = json.loads(figures.read_text())
    assert fig["diff.expected_rank"] is not None  # present among the causes (on CPU it slows nothing)
    assert fig["diff.metric"] == "output_throughput"
    assert fig["diff.accept_length_holds"] is True  # same seed, same tokens on both sides


def test_gpu_check_sh_with_no_budget_still_packs_results(tmp_path):
    """Every step skipped for lack of time: the script still ends with a summary and <= 8 files under $OUT."""
    out = tmp_path / "out"
    env = dict(os.environ, OUT=str(out), GPU_CHECK_BUDGET_S="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(["bash", str(BENCH / "gpu_check.sh"), "1,4"], capture_output=True, text=True,
                          env=env, timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "SKIPPED" in proc.stdout and proc.stdout.rstrip().endswith("=" * 78)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert 3 <= len(files) <= 8
    assert all(re.fullmatch(r"[A-Za-z0-9._-]+", p.name) and len(p.relative_to(out).parts) <= 3 for p in files)
    summary = json.loads((out / "summary_s14.json").read_text())
    assert {s["result"] for s in summary["steps"]} == {"skipped"}


# ---------------------------------------------------------------- on a real GPU

def _need_cuda():
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")


@pytest.mark.gpu
def test_gpu_speculative_output_equals_plain_greedy():
    _need_cuda()
    # float32 (TF32 off by default for matmuls): argmax ties between shapes are vanishingly rare.
    args, target, draft, prompt = _models(["--dim", "256", "--heads", "8", "--layers", "6", "--vocab", "4096"],
                                          device="cuda", dtype=torch.float32)
    tokens, accepted = sd.speculative_generate(target, draft, prompt, 4, 24)
    assert torch.equal(tokens.cpu(), sd.greedy_generate(target, prompt, tokens.shape[1]).cpu())
    assert 1.0 < sum(accepted) / len(accepted) < 5.0


@pytest.mark.gpu
def test_gpu_cli_runs_and_reports():
    _need_cuda()
    proc = _run_script("--device", "cuda", "--steps", "16", "--dtype", "float32", "--check", timeout=300)
    assert proc.returncode == 0, proc.stderr
    last = _last_json(proc.stdout)
    assert last["output_throughput"] > 0 and last["verify_phase_ms"] > 0 and last["draft_phase_ms"] > 0


def _last_json(text):
    """The last output line that is a JSON object: NCCL prints INFO lines to stdout even at shutdown."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output: {text[-500:]!r}")
