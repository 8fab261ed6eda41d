#!/usr/bin/env python3
"""Each collector of a capture alone, one after the other, in one warm process: where a capture's time goes.

A capture runs its collectors side by side (capture/runner.py), so the per-section elapsed_s of a full capture
mixes each one's own work with the GIL and CPUs it waited for. Here each runs alone (best of --runs, after one
warm full capture that fills the hash cache and imports everything), with its wall time and the CPU time of this
process and of its children; then the whole capture in the same process, and the first NVML call alone.

    python benchmarks/capture_sections.py [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import resource
import time


def _cpu() -> tuple:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    began = time.perf_counter()
    try:
        import pynvml

        pynvml.nvmlInit()
        print(f"nvmlInit (first, in a fresh process): {time.perf_counter() - began:.3f} s")
        pynvml.nvmlShutdown()
    except Exception as exc:  # no NVML here
        print(f"nvmlInit: {type(exc).__name__}: {exc}")
    from envsnap.capture.base import CaptureContext
    from envsnap.capture.runner import COLLECTORS, capture

    capture(CaptureContext(timeout=60.0))  # warm: imports, hash cache
    print(f"cwd {os.getcwd()}; each collector alone, best of {args.runs}:")
    rows = []
    for name, _ in COLLECTORS:
        best = None
        for _ in range(args.runs):
            (own0, kids0), t0 = _cpu(), time.perf_counter()
            capture(CaptureContext(timeout=60.0), only=[name])
            wall = time.perf_counter() - t0
            own1, kids1 = _cpu()
            if best is None or wall < best[0]:
                best = (wall, own1 - own0, kids1 - kids0)
        rows.append((name, *best))
    for name, wall, own, kids in sorted(rows, key=lambda r: -r[1]):
        print(f"  {name:12s} wall {wall:.3f} s  cpu {own:.3f} s  children {kids:.3f} s")
    walls = []
    for _ in range(args.runs):
        t0 = time.perf_counter()
        capture(CaptureContext(timeout=60.0))
        walls.append(time.perf_counter() - t0)
    print(f"whole capture in this process: best {min(walls):.3f} s, median {sorted(walls)[len(walls) // 2]:.3f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
