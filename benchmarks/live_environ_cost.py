#!/usr/bin/env python3
"""Does reading a process's environment from its memory stop or slow it? A busy process's throughput
while envsnap reads its `environ` over and over, against the same process left alone.

The target is a separate process (a pure-Python loop, the kind of work a tokenizer or a scheduler's
bookkeeping does, with an environment of ~100 variables, some set in-process). Windows of WINDOW_S
alternate between "read" (envsnap.capture.collectors.live_environ.read_live_environ in a loop, as fast
as it goes or at --rate per second) and "idle" (the reader sleeps), after a warm-up; each window's
loop count comes from a counter the target publishes in shared memory. Reported: medians of the
target's iterations per wall second and per CPU second of its own (the second is what reading could
cost the target itself: a reader that only competes for a CPU on a busy machine moves the first, not
the second), and the read's own latency.

    .venv/bin/python benchmarks/live_environ_cost.py [--rounds 8] [--window 1.0] [--rate 0]

Target: per-CPU-second throughput within noise of idle; never a stop (process_vm_readv takes no lock on
the target and sends it no signal: it keeps running, read).
"""
from __future__ import annotations

import argparse
import ctypes
import multiprocessing as mp
import os
import statistics
import sys
import time
from typing import Dict, List

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from envsnap.capture.collectors.live_environ import read_live_environ  # noqa: E402


def _target(counter: "ctypes.c_long", ready: "mp.synchronize.Event") -> None:
    for i in range(40):
        os.environ[f"TARGET_SET_IN_PROCESS_{i}"] = "x" * 32
    ready.set()
    n = 0
    while True:  # allocation and dict work: what a Python server's own loop does
        d = {"a": n, "b": str(n)}
        n += 1 + (len(d) - 2)
        if not n & 0x3FF:
            counter.value = n


def _cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        fields = handle.read().rsplit(b")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv: List[str] = None) -> int:  # type: ignore[assignment]
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--window", type=float, default=1.0)
    parser.add_argument("--rate", type=float, default=0.0, help="reads per second (0: back to back)")
    args = parser.parse_args(argv)
    for i in range(60):
        os.environ.setdefault(f"BENCH_EXEC_{i}", "v" * 40)
    ctx = mp.get_context("fork")
    counter = ctx.RawValue(ctypes.c_long, 0)
    ready = ctx.Event()
    target = ctx.Process(target=_target, args=(counter, ready), daemon=True)
    target.start()
    ready.wait(30)
    pid = target.pid
    assert pid is not None
    first = read_live_environ(pid)
    if first.status != "ok":
        print(f"cannot read the target's environment: {first.status}: {first.note}")
        return 1
    print(f"target pid {pid}: {len(first.env or {})} variables read from {first.source}")
    rates: Dict[str, List[float]] = {"idle": [], "read": []}
    per_cpu: Dict[str, List[float]] = {"idle": [], "read": []}
    latencies: List[float] = []
    reads = 0
    time.sleep(args.window)  # warm-up
    for round_ in range(args.rounds):
        for mode in (("idle", "read") if round_ % 2 == 0 else ("read", "idle")):
            n0, c0, t0 = counter.value, _cpu_s(pid), time.monotonic()
            end = t0 + args.window
            if mode == "idle":
                time.sleep(args.window)
            else:
                while time.monotonic() < end:
                    started = time.perf_counter()
                    result = read_live_environ(pid)
                    latencies.append(time.perf_counter() - started)
                    reads += 1
                    assert result.status == "ok", result
                    if args.rate:
                        time.sleep(max(0.0, 1.0 / args.rate - latencies[-1]))
            n1, c1, t1 = counter.value, _cpu_s(pid), time.monotonic()
            rates[mode].append((n1 - n0) / (t1 - t0))
            if c1 > c0:
                per_cpu[mode].append((n1 - n0) / (c1 - c0))
    target.kill()
    target.join()

    def med(values: List[float]) -> float:
        return statistics.median(values) if values else float("nan")

    print(f"load: {os.getloadavg()[0]:.1f} (1 min) on {os.cpu_count()} CPUs")
    print(f"reads: {reads}, latency median {med(latencies) * 1e3:.3f} ms, max {max(latencies) * 1e3:.3f} ms")
    for name, table in (("iterations per wall second", rates), ("iterations per CPU second of the target", per_cpu)):
        idle, read = med(table["idle"]), med(table["read"])
        spread = (max(table["idle"]) - min(table["idle"])) / idle * 100 if table["idle"] else float("nan")
        print(f"{name}: idle {idle:,.0f}, read {read:,.0f} ({(read / idle - 1) * 100:+.1f}%; idle windows' own "
              f"spread {spread:.1f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
