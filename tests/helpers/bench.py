"""Benchmarks for the runs/bisect tests, runnable as scripts: `python tests/helpers/bench.py MODE ...`.

Modes:
  env      a deterministic benchmark whose speed is a function of its environment: it
           prints `{"tok_s": X}` where X = base × the factor of every rule that holds.
           No sleeping: the number is computed, so a test is exact and fast.
             --slow NAME=VALUE:FACTOR        factor when os.environ.get(NAME) == VALUE
                                             (VALUE '<unset>' means NAME is not set)
             --together A=1,B=2:FACTOR       factor only when every condition holds
             --jitter F --counter FILE       ±F noise, deterministic per invocation count
             --calls FILE --watch A,B        append one line per invocation with A,B's values
             --fail-on-call N                exit 3 on the N-th invocation (needs --counter)
             --sleep S                       take S seconds (for tests that interrupt a run)
             --sleep-from-call N             only from the N-th invocation on (needs --counter): the
                                             runs before it take no time
             --print TEXT                    also print TEXT (e.g. a line for --metric REGEX)
             --append-log FILE --log-line L  append L to FILE (a server log) during the run
             --nccl-conf                     first apply NCCL's config files as NCCL's initEnv does
                                             (NVIDIA/nccl src/misc/param.cc: NCCL_CONF_FILE, else the
                                             passwd home's .nccl.conf, then /etc/nccl.conf; each NAME=VALUE
                                             with setenv(name, value, 0)): a stand-in for NCCL, which
                                             cannot run here
  matmul   a real numpy matmul: prints `{"gflops": X}` from the best of --reps timings of an
           --size × --size --dtype product, timed in the process's CPU time: with one
           OpenBLAS thread that is the work itself, unchanged when other processes take the
           machine's cores (wall time is not: on a shared 2-core machine it swings 1.6x).
           It honours OpenBLAS's real environment variables (OPENBLAS_NUM_THREADS,
           OMP_NUM_THREADS, OPENBLAS_CORETYPE).
  work     real work whose kind is the point (run telemetry, mechanism tests): --cpu S seconds of
           pure-Python CPU work (measured by CPU time, so load elsewhere does not change the amount)
           split over --procs P processes, then --waits N sleeps of --wait-ms M each; prints
           `{"work_per_s": 1/wall}`.
  gpu      real GPU work (needs torch with CUDA): --iters bf16 matrix products of --size, back to
           back after a --warmup (GPU-bound), or each followed by --gap-ms of host-side waiting after
           a synchronize (launch/CPU-bound when the gap is longer than a product); with --seconds S,
           products for S seconds instead (another job on the GPU); prints
           `{"iters_per_s": X, "loop_s": S}`.
  sglang-serving
           prints a real-format bench_serving summary (tests/data/runs sample) and appends
           the matching JSONL line to --output-file, as sglang.bench_serving does: a stand-in
           for the one thing that cannot run here (an SGLang server on a GPU).

Also helpers for tests: `capture(path, env)` runs the real `envsnap capture` with exactly
the given environment (so GOOD and BAD differ only where the test says).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCRIPT = str(Path(__file__).resolve())
RUNS_DATA = HERE.parent / "data" / "runs"
UNSET = "<unset>"


# ---------------------------------------------------------------------------------------
# helpers for the tests
# ---------------------------------------------------------------------------------------

def bench_cmd(*args: str) -> list:
    return [sys.executable, SCRIPT, *map(str, args)]


def capture(path, env: dict, timeout: float = 120, extra_args=()) -> None:
    """Run the real `envsnap capture -o path` with exactly `env` (None values are unset)."""
    import subprocess  # here, not at the top: a benchmark run (this file as a script) needs none of it

    full = {k: v for k, v in env.items() if v is not None}
    result = subprocess.run(
        [sys.executable, "-m", "envsnap", "capture", "-o", str(path), "--timeout", "30", *extra_args],
        env=full, capture_output=True, text=True, timeout=timeout,
    )
    if result.returncode != 0:
        raise AssertionError(f"capture failed: {result.stderr}")


def base_env(**overrides) -> dict:
    """os.environ without ENVSNAP_DEBUG, plus overrides (None = unset)."""
    env = dict(os.environ)
    env.pop("ENVSNAP_DEBUG", None)
    for key, value in overrides.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def capture_pair(tmp_path, common: dict, good: dict, bad: dict):
    """GOOD and BAD snapshots from real captures whose environments differ as given."""
    good_path, bad_path = tmp_path / "good.json", tmp_path / "bad.json"
    capture(good_path, base_env(**{**common, **good}))
    capture(bad_path, base_env(**{**common, **bad}))
    return good_path, bad_path


def run_cli(*args, env=None, cwd=None, timeout=300):
    import subprocess

    full = base_env()
    if env:
        full = dict(env)
    return subprocess.run([sys.executable, "-m", "envsnap", *map(str, args)], capture_output=True, text=True,
                          env=full, cwd=cwd, timeout=timeout)


# ---------------------------------------------------------------------------------------
# the benchmark modes
# ---------------------------------------------------------------------------------------

def _holds(cond: str) -> bool:
    name, _, value = cond.partition("=")
    if value == UNSET:
        return name not in os.environ
    return os.environ.get(name) == value


def _count(counter: str) -> int:
    """Invocation number (1-based), kept in a file so noise and failures are reproducible."""
    path = Path(counter)
    n = int(path.read_text() or "0") + 1 if path.exists() else 1
    path.write_text(str(n))
    return n


def _apply_nccl_conf() -> None:
    """NCCL's initEnv in this process: the environment wins, then the first file and line setting a name."""
    import pwd

    conf = os.environ.get("NCCL_CONF_FILE")
    paths = [conf] if conf else [os.path.join(pwd.getpwuid(os.getuid()).pw_dir, ".nccl.conf")]
    for path in paths + ["/etc/nccl.conf"]:
        try:
            lines = Path(path).read_text().split("\n")
        except OSError:
            continue
        for line in lines:
            name, sep, value = line.rstrip("\r").partition("=")
            if sep and name and not line.startswith("#"):
                os.environ.setdefault(name, value)


def mode_env(args) -> int:
    if args.nccl_conf:
        _apply_nccl_conf()
    n = _count(args.counter) if args.counter else 0
    if args.calls:
        watched = [w for w in (args.watch or "").split(",") if w]
        with open(args.calls, "a") as handle:
            handle.write(json.dumps({w: os.environ.get(w) for w in watched}, sort_keys=True) + "\n")
    if args.fail_on_call and n == args.fail_on_call:
        print("benchmark crashed (planted failure)", file=sys.stderr)
        return 3
    value = args.base
    for rule in args.slow or []:
        cond, _, factor = rule.rpartition(":")
        if _holds(cond):
            value *= float(factor)
    for rule in args.together or []:
        conds, _, factor = rule.rpartition(":")
        if all(_holds(c) for c in conds.split(",")):
            value *= float(factor)
    if args.jitter:
        # A fixed pseudo-random sequence over invocations: x_{n} in [-1, 1).
        u = ((n * 2654435761) % 2**32) / 2**32 * 2 - 1
        value *= 1 + args.jitter * u
    if args.append_log:
        with open(args.append_log, "a") as handle:
            for line in args.log_line or []:
                handle.write(line + "\n")
    if args.sleep and n >= args.sleep_from_call:
        time.sleep(args.sleep)
    for text in args.print or []:
        print(text)
    print(json.dumps({args.metric: round(value, 6)}))
    return 0


def mode_matmul(args) -> int:
    import numpy as np

    a = np.random.default_rng(0).standard_normal((args.size, args.size)).astype(args.dtype)
    a @ a  # first call pays for thread start-up and page faults
    best = float("inf")
    for _ in range(args.reps):
        start = time.process_time()
        a @ a
        best = min(best, time.process_time() - start)
    print(json.dumps({"gflops": round(2 * args.size ** 3 / best / 1e9, 4)}))
    return 0


def _spin(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def mode_work(args) -> int:
    start = time.perf_counter()
    share = args.cpu / max(args.procs, 1)
    if args.procs > 1:
        import multiprocessing as mp

        workers = [mp.get_context("fork").Process(target=_spin, args=(share,)) for _ in range(args.procs)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    else:
        _spin(share)
    for _ in range(args.waits):
        time.sleep(args.wait_ms / 1000.0)
    print(json.dumps({"work_per_s": round(1.0 / (time.perf_counter() - start), 6)}))
    return 0


def mode_gpu(args) -> int:
    """--iters back-to-back bf16 products, GPU-bound: the host enqueues them without waiting (the
    launch queue holds ~1000, so the host blocks on it while the GPU works) and synchronises once
    at the end. Everything that is not the loop -- the CUDA context, cuBLAS's handle, the operands,
    kernel selection and lazy module loading -- happens before it, in one warm-up of --warmup
    products, so that NVML sees the GPU go from idle to saturated and back once. With --gap-ms the
    host synchronises after each product and waits that long: a launch/CPU-bound loop."""
    import torch

    torch.cuda.init()
    torch.cuda.current_blas_handle()  # cuBLAS initialised before any kernel runs
    # Allocated, not filled: the first kernel is the first warm-up product, after cuBLAS has picked
    # and loaded its kernel; the operands are filled right after it, then the loop follows.
    a = torch.empty(args.size, args.size, device="cuda", dtype=torch.bfloat16)
    b = torch.empty_like(a)
    out = torch.empty_like(a)
    for _ in range(args.warmup):
        torch.matmul(a, b, out=out)
    a.normal_()
    b.normal_()
    torch.cuda.synchronize()
    start = time.perf_counter()
    if args.seconds:  # another job on the GPU (the neighbours tests): products for that long, in chunks
        done = 0
        while time.perf_counter() - start < args.seconds:
            for _ in range(50):
                torch.matmul(a, b, out=out)
            torch.cuda.synchronize()
            done += 50
        args.iters = done
    for _ in range(0 if args.seconds else args.iters):
        torch.matmul(a, b, out=out)  # into one buffer: no allocator work between products
        if args.gap_ms:
            torch.cuda.synchronize()
            time.sleep(args.gap_ms / 1000.0)
    torch.cuda.synchronize()
    loop_s = time.perf_counter() - start
    print(json.dumps({"iters_per_s": round(args.iters / loop_s, 3), "loop_s": round(loop_s, 4)}))
    return 0


def mode_sglang_serving(args) -> int:
    sys.stdout.write((RUNS_DATA / "sglang-0.5.5-bench_serving-eagle3.txt").read_text())
    line = (RUNS_DATA / "sglang-0.5.5-bench_serving-eagle3.jsonl").read_text().strip().splitlines()[-1]
    if args.scale != 1.0:
        obj = json.loads(line)
        obj["output_throughput"] = obj["output_throughput"] * args.scale
        line = json.dumps(obj)
    if args.output_file:
        with open(args.output_file, "a") as handle:
            handle.write(line + "\n")
    return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="mode", required=True)
    env = sub.add_parser("env")
    env.add_argument("--base", type=float, default=1000.0)
    env.add_argument("--metric", default="tok_s")
    env.add_argument("--slow", action="append")
    env.add_argument("--together", action="append")
    env.add_argument("--jitter", type=float, default=0.0)
    env.add_argument("--counter")
    env.add_argument("--calls")
    env.add_argument("--watch")
    env.add_argument("--fail-on-call", type=int, default=0)
    env.add_argument("--sleep", type=float, default=0.0)
    env.add_argument("--sleep-from-call", type=int, default=0)
    env.add_argument("--print", action="append")
    env.add_argument("--append-log")
    env.add_argument("--log-line", action="append")
    env.add_argument("--nccl-conf", action="store_true")
    mm = sub.add_parser("matmul")
    mm.add_argument("--size", type=int, default=1000)
    mm.add_argument("--reps", type=int, default=3)
    mm.add_argument("--dtype", default="float64", choices=["float64", "float32"])
    wk = sub.add_parser("work")
    wk.add_argument("--cpu", type=float, default=0.2)
    wk.add_argument("--procs", type=int, default=1)
    wk.add_argument("--waits", type=int, default=0)
    wk.add_argument("--wait-ms", type=float, default=10.0)
    gp = sub.add_parser("gpu")
    gp.add_argument("--size", type=int, default=8192)
    gp.add_argument("--iters", type=int, default=1000)
    gp.add_argument("--gap-ms", type=float, default=0.0)
    gp.add_argument("--warmup", type=int, default=20)
    gp.add_argument("--seconds", type=float, default=0.0)
    sg = sub.add_parser("sglang-serving")
    sg.add_argument("--output-file")
    sg.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args(argv)
    return {"env": mode_env, "matmul": mode_matmul, "work": mode_work, "gpu": mode_gpu,
            "sglang-serving": mode_sglang_serving}[args.mode](args)


if __name__ == "__main__":
    sys.exit(main())
