"""STAND-IN for sglang/srt/entrypoints/engine.py, written for envsnap's illustrative example.

Not SGLang's code: a short text of envsnap's own (see snapshots/illustrative-src/README.md) that
keeps only the facts the example's story rests on, from sglang 0.5.5 sglang/srt/entrypoints/engine.py:
- Engine.__init__ (line 106) builds the ServerArgs and calls _launch_subprocesses (line 768);
- _launch_subprocesses calls _set_envs_and_config (line 676) first, then starts one scheduler process
  per TP rank with multiprocessing, target run_scheduler_process (line 820): the workers inherit
  os.environ as _set_envs_and_config left it;
- _set_envs_and_config (lines 678-690) keeps an NCCL_CUMEM_ENABLE / NCCL_NVLS_ENABLE the operator
  exported unless a server flag overrides it, sets CUDA_DEVICE_MAX_CONNECTIONS=8 every time, and
  picks the "spawn" start method (line 747).
"""
import multiprocessing as mp
import os
import random
import time

from sglang.srt.managers.scheduler import run_scheduler_process
from sglang.srt.server_args import ServerArgs


def _set_envs_and_config(server_args: ServerArgs):
    """Write the environment the TP workers will start with (they are spawned right after)."""
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    symm_mem = server_args.enable_symm_mem
    nvls_wanted = server_args.enable_nccl_nvls or symm_mem
    # An operator's own setting wins, unless a server flag asks for the feature.
    if "NCCL_CUMEM_ENABLE" not in os.environ or symm_mem:
        os.environ["NCCL_CUMEM_ENABLE"] = str(int(symm_mem))
    if "NCCL_NVLS_ENABLE" not in os.environ or nvls_wanted:
        os.environ["NCCL_NVLS_ENABLE"] = str(int(nvls_wanted))
    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"
    os.environ["CUDA_MODULE_LOADING"] = "AUTO"
    os.environ["SGLANG_RUN_ID"] = f"sglang-run-{time.time()}-{random.randint(0, 10**8)}"
    mp.set_start_method("spawn", force=True)


def _launch_subprocesses(server_args: ServerArgs):
    """Environment first, then one scheduler process per TP rank; returns them with their pipes."""
    _set_envs_and_config(server_args)
    schedulers = []
    for tp_rank in range(server_args.tp_size):
        reader, writer = mp.Pipe(duplex=False)
        proc = mp.Process(target=run_scheduler_process, args=(server_args, tp_rank, writer))
        proc.start()
        schedulers.append((proc, reader))
    return schedulers


class Engine:
    """The offline entry point: the same processes as `python -m sglang.launch_server`."""

    def __init__(self, **kwargs):
        self.server_args = ServerArgs(**kwargs)
        self.schedulers = _launch_subprocesses(self.server_args)
        for _proc, reader in self.schedulers:
            reader.recv()  # each scheduler reports once its model is loaded
