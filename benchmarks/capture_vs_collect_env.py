#!/usr/bin/env python3
"""Time `envsnap capture` against `python -m torch.utils.collect_env` in the same environment.

Both run as the user would run them, as fresh processes of the same interpreter,
alternating (envsnap first in odd rounds, collect_env first in even ones, so neither
always inherits a cache the other warmed), after one unmeasured warm-up each. Prints
the median wall time of each, the ratio, and the median time of every envsnap
section (elapsed_s inside the capture), plus the python + packages collectors alone.

    .venv/bin/python benchmarks/capture_vs_collect_env.py [--runs 5] [--python PATH] [--deep]

Target (issue 35): a warm capture <= 0.12 x collect_env on a 2-core VM and <= 0.1 x on a GPU machine,
while recording a superset of its fields
(it also hashes every installed .py file against RECORD).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

TIMEOUT_S = 600

_COLLECTORS_ALONE = r"""
import json, sys, time
t0 = time.perf_counter()
from envsnap.capture.runner import capture
from envsnap.capture.base import CaptureContext
ctx = CaptureContext(deep=%(deep)r, timeout=60.0)
snap = capture(ctx, only=["python", "packages"])
print(json.dumps({"in_process_s": time.perf_counter() - t0,
                  "sections": {n: s.get("elapsed_s") for n, s in snap["sections"].items()},
                  "checked_files": snap["sections"]["packages"].get("data", {}).get("integrity", {}).get("checked_files")}))
"""


def bytecode_env(tmp: str) -> Optional[Dict[str, str]]:
    """Where PYTHONDONTWRITEBYTECODE is set (some containers set it), an environment for both commands that keeps
    their byte code in a cache of this benchmark's own (PYTHONPYCACHEPREFIX), filled by the warm-up: as in daily
    use, neither compiles its modules at every start. None where nothing needs changing."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        return None
    env = dict(os.environ)
    del env["PYTHONDONTWRITEBYTECODE"]
    env["PYTHONPYCACHEPREFIX"] = os.path.join(tmp, "pycache")
    return env


def timed(argv: List[str], cwd: Optional[str] = None, env: Optional[Dict[str, str]] = None) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S, cwd=cwd, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise SystemExit(f"{' '.join(argv[:4])} failed with exit {proc.returncode}: {' | '.join(tail)}")
    return elapsed


def envsnap_argv(python: str, output: str, deep: bool) -> List[str]:
    """The console script next to the interpreter when there is one (what users type)."""
    script = os.path.join(os.path.dirname(python), "envsnap")
    head = [script] if os.access(script, os.X_OK) else [python, "-m", "envsnap"]
    return head + ["capture", "-o", output, "--force"] + (["--deep"] if deep else [])


def fmt(values: List[float]) -> str:
    return f"median {statistics.median(values):6.3f} s  (min {min(values):.3f}, max {max(values):.3f}, n={len(values)})"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured runs of each command (default 5)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the environment (default: this one)")
    parser.add_argument("--deep", action="store_true", help="time `envsnap capture --deep` (hashes every file)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    with tempfile.TemporaryDirectory(prefix="envsnap-bench-") as tmp:
        output = os.path.join(tmp, "snap.json")
        capture_cmd = envsnap_argv(args.python, output, args.deep)
        collect_env_cmd = [args.python, "-m", "torch.utils.collect_env"]
        env = bytecode_env(tmp)
        # Warm-up (not measured): both start from a warm page cache and their byte code, as in daily use.
        timed(capture_cmd, cwd=tmp, env=env)
        timed(collect_env_cmd, cwd=tmp, env=env)
        captures: List[float] = []
        collect_envs: List[float] = []
        sections: Dict[str, List[float]] = {}
        for i in range(args.runs):
            order = [("capture", capture_cmd), ("collect_env", collect_env_cmd)]
            for name, cmd in (order if i % 2 == 0 else order[::-1]):
                elapsed = timed(cmd, cwd=tmp, env=env)
                if name == "capture":
                    captures.append(elapsed)
                    with open(output) as handle:
                        snap = json.load(handle)
                    for section, body in snap.get("sections", {}).items():
                        if isinstance(body.get("elapsed_s"), (int, float)):
                            sections.setdefault(section, []).append(body["elapsed_s"])
                else:
                    collect_envs.append(elapsed)
        alone: List[float] = []
        alone_sections: Dict[str, List[float]] = {}
        checked = None
        for _ in range(args.runs):
            proc = subprocess.run([args.python, "-c", _COLLECTORS_ALONE % {"deep": args.deep}],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=TIMEOUT_S, cwd=tmp, env=env)
            if proc.returncode != 0:
                raise SystemExit("python+packages alone failed: " + proc.stderr.decode()[-500:])
            result = json.loads(proc.stdout.decode().strip().splitlines()[-1])
            alone.append(result["in_process_s"])
            checked = result["checked_files"]
            for name, value in result["sections"].items():
                alone_sections.setdefault(name, []).append(value)

    capture_median = statistics.median(captures)
    collect_median = statistics.median(collect_envs)
    print(f"environment: {args.python}")
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        print("PYTHONDONTWRITEBYTECODE is set here: both commands kept their byte code in a cache of the benchmark's "
              "own (PYTHONPYCACHEPREFIX), filled by the warm-up")
    print(f"envsnap capture{' --deep' if args.deep else ''}: {fmt(captures)}   [{' '.join(capture_cmd[:2])} ...]")
    print(f"torch.utils.collect_env: {fmt(collect_envs)}")
    print(f"ratio capture / collect_env: {capture_median / collect_median:.3f}  (targets: <= 0.12 here, <= 0.1 with a GPU)")
    print("sections inside the full capture (median elapsed_s):")
    for name, values in sorted(sections.items(), key=lambda kv: -statistics.median(kv[1])):
        print(f"  {name:<10} {statistics.median(values):6.3f} s")
    print(f"python + packages collectors alone (in one process, imports included): {fmt(alone)}")
    for name, values in sorted(alone_sections.items()):
        print(f"  {name:<10} {statistics.median(values):6.3f} s")
    print(f"  integrity: {checked} RECORD entries hashed and compared")
    return 0


if __name__ == "__main__":
    sys.exit(main())
