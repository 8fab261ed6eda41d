"""A stand-in for `python -m sglang.launch_server` with SGLang's process layout, for envsnap's tests.

What it mirrors, read from SGLang's source (no code copied):
- srt/entrypoints/engine.py `_set_envs_and_config` (0.4.6, 0.5.5, 0.5.23): the main process
  sets NCCL/CUDA variables in os.environ after it started, then
  `mp.set_start_method("spawn", force=True)`; each scheduler is a spawned child.
  Here: NCCL_PROTO=LL set in-process, then spawn-started children.
- The main process keeps its command line (no setproctitle in the launcher); each
  scheduler titles itself `sglang::scheduler_TP<rank>` (srt/managers/scheduler.py, tp_size > 1)
  and the detokenizer `sglang::detokenizer` (srt/managers/detokenizer_manager.py).
- A scheduler changes os.environ in-process too (here NCCL_ALGO=Ring) and then calls
  torch.distributed.init_process_group — with "gloo" here (CPU-only test machines).

Protocol with the test: prints "READY <pid> ..." once every child is up and initialised;
stops its children and exits when its stdin closes (or after --max-seconds).
"""
import argparse
import os
import sys
import time


def _watch_parent(parent_pid, stop, limit):
    """Children leave when the test is done, or their parent died (like SGLang's kill_itself_when_parent_died)."""
    deadline = time.monotonic() + limit
    while not stop.wait(0.2):
        if os.getppid() != parent_pid or time.monotonic() > deadline:
            return


def scheduler(rank, world_size, init_file, ready, stop, parent_pid, limit):
    import setproctitle

    setproctitle.setproctitle(f"sglang::scheduler_TP{rank}")
    os.environ["NCCL_ALGO"] = "Ring"  # in-process, after exec: /proc never shows it
    if init_file is None:  # --no-dist: only the process layout matters to the caller
        ready.put(f"scheduler_TP{rank}")
        _watch_parent(parent_pid, stop, limit)
        return
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world_size)
    ready.put(f"scheduler_TP{rank}")
    _watch_parent(parent_pid, stop, limit)
    dist.destroy_process_group()


def detokenizer(ready, stop, parent_pid, limit):
    import setproctitle

    setproctitle.setproctitle("sglang::detokenizer")
    ready.put("detokenizer")
    _watch_parent(parent_pid, stop, limit)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model-path", default="dummy-model")
    parser.add_argument("--tp-size", type=int, default=2)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--init-file", required=True)
    parser.add_argument("--max-seconds", type=float, default=120.0)
    parser.add_argument("--no-dist", action="store_true", help="schedulers skip torch.distributed (faster)")
    args = parser.parse_args()
    init_file = None if args.no_dist else args.init_file

    os.environ["NCCL_PROTO"] = "LL"  # like engine.py's _set_envs_and_config: after this process started
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    ready = ctx.Queue()
    stop = ctx.Event()
    me = os.getpid()
    children = [ctx.Process(target=scheduler, args=(r, args.tp_size, init_file, ready, stop, me, args.max_seconds))
                for r in range(args.tp_size)]
    children.append(ctx.Process(target=detokenizer, args=(ready, stop, me, args.max_seconds)))
    for child in children:
        child.start()
    names = sorted(ready.get(timeout=args.max_seconds) for _ in children)
    print("READY", me, " ".join(f"{c.pid}" for c in children), " ".join(names), flush=True)

    import threading

    threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait(args.max_seconds)
    stop.set()
    for child in children:
        child.join(30)
        if child.is_alive():
            child.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
