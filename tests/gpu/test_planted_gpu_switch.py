"""On a real NVIDIA GPU (skipped elsewhere): a GPU-side switch set in-process by a launcher for its worker
must rank first, with a margin, among 27 innocent differences.

benchmarks/gpu_inprocess_switch.py: the launcher sets NVIDIA_TF32_OVERRIDE=0 in its own os.environ on BAD
only (--tf32-off) and spawns a worker that allows TF32 and runs fp32 matrix products for a fixed time; cuBLAS
then runs them in full FP32, several times slower, with the GPU as busy as before. Both sides are measured by
the real `envsnap run` (5 runs, run telemetry with NVML, the in-process probe in a real venv) and compared by
the real `envsnap diff` (text, JSON, HTML). The innocent differences (tests/helpers/planted.py) include thread
counts (OMP_NUM_THREADS 4 -> 1, MKL_NUM_THREADS) on this pure-GPU workload, NCCL settings where no process
initialises NCCL, SGLang settings where SGLang is not installed, the CUDA allocator and module loading, and
everyday shell variables. Self-contained: stdlib, torch and envsnap; about 2 minutes on an H200. Prints the
planted cause's rank and margin and the test's wall time (`pytest -s`).
"""
from __future__ import annotations

import importlib.util
import time

import pytest
from helpers import REPO_ROOT, causes_by_key, has_factor
from helpers.planted import (
    INNOCENT,
    assert_communication_below,
    assert_first_with_margin,
    assert_outputs_agree,
    envsnap_run,
    make_venv,
    outputs,
    side_env,
)

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if importlib.util.find_spec("torch") is None:  # pragma: no cover - the GPU machine has torch
    pytest.skip("torch is not installed", allow_module_level=True)

BENCH = REPO_ROOT / "benchmarks" / "gpu_inprocess_switch.py"
PLANTED = "NVIDIA_TF32_OVERRIDE"
# On a GPU these two could really slow the work (CUDA_LAUNCH_BLOCKING) or are the planted switch itself:
# every other innocent difference of the CPU scenarios stays.
NOT_INNOCENT_ON_A_GPU = ("CUDA_LAUNCH_BLOCKING", PLANTED)


def gpu_env(bad: bool) -> dict:
    env = side_env(bad)
    for name, good_value, _ in INNOCENT:
        if name in NOT_INNOCENT_ON_A_GPU:
            env.pop(name, None)
            if good_value is not None:
                env[name] = good_value
    return env


def _planted(cause: dict) -> bool:
    return cause.get("variable") == PLANTED or cause["key"] == "run.flag.--tf32-off" or any(
        f["key"].endswith(PLANTED) for f in cause.get("folded") or [])


def run_flow(tmp_path, device: str = "cuda", seconds: float = 2.0):
    """GOOD and BAD measured and compared: (result, text, page)."""
    venv = make_venv(tmp_path / "venv", probe=True)
    command = [venv["python"], BENCH, "--seconds", str(seconds), "--device", device]
    good = envsnap_run(venv, tmp_path / "good.json", command, gpu_env(False), tmp_path / "probe-good", cwd=tmp_path)
    bad = envsnap_run(venv, tmp_path / "bad.json", [*command, "--tf32-off"], gpu_env(True), tmp_path / "probe-bad",
                      cwd=tmp_path)
    return outputs(good, bad, tmp_path)


def test_gpu_switch_set_in_process_by_the_launcher_ranks_first(tmp_path):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    started = time.monotonic()
    result, text, page = run_flow(tmp_path)
    verdict = result["verdict"]
    print(f"\n{verdict['summary']}\nmechanism: {verdict['mechanism']['line']}")
    assert verdict["change_pct"] < -30 and verdict["outcome"] == "worse", verdict["summary"]
    assert verdict["mechanism"]["kind"] in ("gpu_work", "gpu_clock"), verdict["mechanism"]
    # The switch is the benchmark command's --tf32-off, which makes the launcher set the variable in-process:
    # the flag the command was started with and the variable it set are both the planted change. Innocent
    # variables the measured processes read (OMP_NUM_THREADS, read by torch) acted too: inside the acted band
    # (0.5..1) the 0.15 margin of before the tiers is 0.075.
    assert_first_with_margin("GPU switch set in-process by a launcher (NVIDIA_TF32_OVERRIDE=0)", result,
                             _planted, margin=0.075)
    # The variable the flag made the launcher set: a difference of the measured processes (some ran with it, some
    # did not: the benchmark's own client), never ruled out.
    faces = [c for c in causes_by_key(result["causes"]).values() if c["key"].endswith(PLANTED)]
    assert faces and all(c["reach"]["tier"] != "cannot" for c in faces), faces
    # A thread count on a workload the GPU bounds: the mechanism argues against host threads, or the runs'
    # thread count held.
    omp = next(c for c in result["causes"] if c.get("variable") == "OMP_NUM_THREADS")
    assert has_factor(omp, "mechanism_contradicts") or has_factor(omp, "series_held"), omp
    # NCCL's settings where no probed process initialised NCCL.
    nccl = next(c for c in causes_by_key(result["causes"]).values() if c["key"].endswith("env.NCCL_ALGO"))
    assert has_factor(nccl, "not_seen_in_play", "not seen in play"), nccl
    # What acted, over names: no communicator was created, so NCCL's settings cannot have acted.
    assert nccl["reach"]["tier"] == "cannot", nccl["reach"]
    assert_communication_below("GPU switch set in-process", result, _planted)
    assert_outputs_agree(result, text, page)
    print(f"wall time of the GPU test: {time.monotonic() - started:.0f} s")
