"""One worker of a multi-node torchrun job (tests/e2e/test_multinode_torchrun.py).

Started by torchrun on each node; joins the job's process group over gloo (the CPU stand-in for
NCCL: torchrun's MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE, the env:// rendezvous), all-reduces one
tensor across the nodes and leaves. The in-process probe records its environment at start, at
init_process_group and at exit; it prints "ALLREDUCE <rank> <sum>".
"""
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
value = torch.ones(1)
dist.all_reduce(value)
print("ALLREDUCE", dist.get_rank(), int(value.item()), flush=True)
dist.destroy_process_group()
