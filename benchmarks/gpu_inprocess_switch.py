"""A launcher that sets one GPU math switch in-process for its worker: the planted cause of
tests/gpu/test_planted_gpu_switch.py, runnable by hand.

    python benchmarks/gpu_inprocess_switch.py [--tf32-off] [--seconds 2] [--size 4096] [--device cuda]

The launcher (this process) sets NVIDIA_TF32_OVERRIDE=0 in its own os.environ when --tf32-off is given --
what an engine's launcher does for its workers (SGLang's _set_envs_and_config sets NCCL and CUDA variables
that way) -- then starts one worker with multiprocessing's spawn, as SGLang starts its TP schedulers. The
worker inherits the variable, so /proc/PID/environ of the launcher never shows it; only the in-process probe
sees the launcher change it and the worker start with it.

The worker allows TF32 the way inference code does (torch.set_float32_matmul_precision("high")) and runs fp32
matrix products back to back for --seconds (a fixed time, so both sides keep the GPU busy for as long).
cuBLAS reads NVIDIA_TF32_OVERRIDE with getenv (cuBLAS docs, "NVIDIA_TF32_OVERRIDE": 0 disables TF32 whatever
the program asked for), so with the switch the products run in full FP32 on the CUDA cores: several times
slower on Hopper, with the GPU just as busy. Prints the worker's {"matmul_per_s": X} as its last line.
`--device cpu` runs the same process structure on the CPU (no TF32 there: no slowdown), for a smoke test.
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import time

SWITCH = ("NVIDIA_TF32_OVERRIDE", "0")


def worker(size: int, seconds: float, device: str) -> None:
    import torch

    torch.set_float32_matmul_precision("high")  # allow TF32, as inference code does
    a = torch.randn(size, size, device=device, dtype=torch.float32)
    b = torch.randn(size, size, device=device, dtype=torch.float32)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    for _ in range(3):
        a @ b  # warm-up: cuBLAS picks its kernel
    sync()
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        for _ in range(10):
            a @ b
        sync()
        done += 10
    elapsed = time.perf_counter() - start
    tflops = 2 * size ** 3 * done / elapsed / 1e12
    print(json.dumps({"matmul_per_s": round(done / elapsed, 3), "tflops": round(tflops, 2)}), flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tf32-off", action="store_true", help="set NVIDIA_TF32_OVERRIDE=0 in-process for the worker")
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    args = parser.parse_args(argv)
    if args.tf32_off:
        os.environ[SWITCH[0]] = SWITCH[1]  # in-process, after start-up: the planted change
    process = mp.get_context("spawn").Process(target=worker, args=(args.size, args.seconds, args.device))
    process.start()
    process.join()
    return process.exitcode or 0


if __name__ == "__main__":
    sys.exit(main())
