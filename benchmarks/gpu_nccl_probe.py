#!/usr/bin/env python3
"""A 1-rank torch.distributed job (NCCL on a GPU, gloo on CPU) doing one all-reduce.

It exists to show envsnap's in-process probe and NCCL log parsing under a real communicator
(step 5 of benchmarks/gpu_check.sh): run it with ENVSNAP_PROBE_DIR set (probe installed) and
NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV with its output going to a log, then
`envsnap capture --probe-dir DIR --log LOG`.

`--late-env NAME=VALUE` sets a variable in os.environ after the interpreter started and
before init_process_group, the way an engine.py patch or SGLang's own _set_envs_and_config
does: /proc/PID/environ never shows it, the probe's init-time record does.

Prints one final JSON line of numbers: {"allreduce_ok": 1|0, "world_size": 1, "init_s": ..., "allreduce_ms": ...}.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from typing import List, Optional

# Never let this job turn NVLink multicast on (shared hosts: see the device notes).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def parse_args(argv: Optional[List[str]] = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl",
                   help="nccl (needs a CUDA GPU) or gloo (CPU, for tests)")
    p.add_argument("--late-env", action="append", default=[], metavar="NAME=VALUE",
                   help="set in os.environ after start, before init_process_group (repeatable)")
    p.add_argument("--numel", type=int, default=1 << 20, help="elements in the all-reduced tensor")
    args = p.parse_args(argv)
    for item in args.late_env:
        if "=" not in item or not item.split("=", 1)[0]:
            p.error(f"--late-env wants NAME=VALUE, got {item!r}")
    return args


def main(argv: Optional[List[str]] = None) -> int:
    args = parse_args(argv)
    os.environ.update(SAFE_ENV)
    for item in args.late_env:
        name, value = item.split("=", 1)
        os.environ[name] = value

    import torch
    import torch.distributed as dist

    if args.backend == "nccl" and not torch.cuda.is_available():
        print("gpu_nccl_probe: error: backend nccl needs a CUDA GPU (use --backend gloo on CPU)", file=sys.stderr)
        return 2
    device = torch.device("cuda", 0) if args.backend == "nccl" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)

    t0 = time.perf_counter()
    kwargs = {"device_id": device} if device.type == "cuda" else {}  # eager NCCL communicator init
    dist.init_process_group(args.backend, init_method=f"tcp://127.0.0.1:{free_port()}", rank=0, world_size=1, **kwargs)
    init_s = time.perf_counter() - t0

    x = torch.arange(args.numel, dtype=torch.float32, device=device)
    t1 = time.perf_counter()
    dist.all_reduce(x)
    if device.type == "cuda":
        torch.cuda.synchronize()
    allreduce_ms = (time.perf_counter() - t1) * 1000.0
    ok = bool(torch.equal(x.cpu(), torch.arange(args.numel, dtype=torch.float32)))  # 1 rank: sum = itself
    nccl_version = ""
    if args.backend == "nccl":
        try:
            nccl_version = ".".join(map(str, torch.cuda.nccl.version()))
        except Exception as exc:  # report, don't fail: the log says it too
            nccl_version = f"unknown ({type(exc).__name__})"
    dist.destroy_process_group()
    print(f"gpu_nccl_probe: backend={args.backend} device={device} pid={os.getpid()} nccl={nccl_version or '-'} "
          f"late_env={[i.split('=', 1)[0] for i in args.late_env]} all_reduce {'ok' if ok else 'WRONG'}", flush=True)
    print(json.dumps({"allreduce_ok": int(ok), "world_size": 1, "init_s": round(init_s, 4),
                      "allreduce_ms": round(allreduce_ms, 4)}, sort_keys=True), flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
