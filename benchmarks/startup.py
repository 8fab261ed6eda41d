#!/usr/bin/env python3
"""Start-up budget: what `envsnap` costs before and around its work, next to `python -c pass`.

Fresh processes in rounds, each round in a rotated order, medians (after one unmeasured warm-up
of each, which also leaves every module's byte code cached: children run without
PYTHONDONTWRITEBYTECODE, as an installed envsnap would):

    python -c pass                    the floor
    python -c "import click"          the CLI framework alone
    envsnap --version                 answered before click is imported
    envsnap <cmd> --help              the CLI's own start for a command: click + that command's module
    envsnap capture -o F              a whole capture ...
    collectors' work                  ... and the same work in one process without the CLI (imports
                                      of the runner and collectors, runner.capture, store.save)
    envsnap diff A B                  a whole diff of two small snapshots

and, per command, the import cost from `python -X importtime` (sum of the top-level imports,
minus what `python -c pass` imports) with the five biggest top-level imports.

Targets: `envsnap --version` <= 1.5 x `python -c pass`; `envsnap capture` <= 1.5 x `python -c pass`
+ the collectors' work.

    python benchmarks/startup.py [--runs 15] [--python PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional, Tuple

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_COLLECTORS_WORK = r"""
import sys, time
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.model import store
store.save(runner.capture(CaptureContext()), sys.argv[1], force=True)
"""


def child_env(cache_home: str) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env["XDG_CACHE_HOME"] = cache_home  # captures reuse one (warm) hash cache, as on a user's machine
    return env


def timed(argv: List[str], env: Dict[str, str], cwd: str) -> float:
    start = time.perf_counter()
    proc = subprocess.run(argv, capture_output=True, env=env, cwd=cwd, timeout=300, check=False)
    elapsed = time.perf_counter() - start
    if proc.returncode not in (0, 1):  # diff exits 1 when the snapshots differ
        tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-2:]
        raise SystemExit(f"{' '.join(argv[:5])} failed ({proc.returncode}): {' | '.join(tail)}")
    return elapsed


_IMPORT_LINE = re.compile(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)")


def import_profile(argv: List[str], env: Dict[str, str], cwd: str) -> Tuple[float, List[Tuple[str, float]]]:
    """(total ms of top-level imports, [(module, ms)] of the biggest) from one -X importtime run."""
    proc = subprocess.run([argv[0], "-X", "importtime", *argv[1:]], capture_output=True, env=env, cwd=cwd,
                          timeout=300, check=False)
    top: List[Tuple[str, float]] = []
    for line in proc.stderr.decode("utf-8", "replace").splitlines():
        match = _IMPORT_LINE.match(line)
        if match and len(match.group(3)) == 1:  # one space: a top-level import
            top.append((match.group(4), int(match.group(2)) / 1000.0))
    return sum(ms for _, ms in top), sorted(top, key=lambda kv: -kv[1])[:5]


def median_profile(argv: List[str], env: Dict[str, str], cwd: str, runs: int) -> Tuple[float, List[Tuple[str, float]]]:
    """import_profile's run with the median total out of `runs`."""
    profiles = sorted((import_profile(argv, env, cwd) for _ in range(runs)), key=lambda p: p[0])
    return profiles[len(profiles) // 2]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="measured rounds (default 15)")
    parser.add_argument("--python", default=sys.executable, help="interpreter envsnap runs in (default: this one)")
    parser.add_argument("--import-runs", type=int, default=5, help="-X importtime runs per command (median)")
    args = parser.parse_args(argv)

    work = tempfile.mkdtemp(prefix="envsnap-startup-")
    try:
        env = child_env(os.path.join(work, "cache"))
        py = args.python
        envsnap = [py, "-m", "envsnap"]
        snap_a, snap_b = os.path.join(work, "a.json"), os.path.join(work, "b.json")
        subprocess.run(envsnap + ["capture", "-o", snap_a, "--label", "a"], env=env, cwd=work, check=True,
                       capture_output=True)
        with open(snap_a) as handle:
            other = json.load(handle)
        other["label"] = "b"
        other["sections"].setdefault("env", {"status": "ok", "data": {"vars": {}}}).setdefault(
            "data", {}).setdefault("vars", {})["NCCL_PROTO"] = "LL-benchmark"
        with open(snap_b, "w") as handle:
            json.dump(other, handle)
        rows: List[Tuple[str, List[str]]] = [
            ("python -c pass", [py, "-c", "pass"]),
            ("python -c 'import click'", [py, "-c", "import click"]),
            ("envsnap --version", envsnap + ["--version"]),
            ("envsnap capture --help", envsnap + ["capture", "--help"]),
            ("envsnap diff --help", envsnap + ["diff", "--help"]),
            ("envsnap capture -o F", envsnap + ["capture", "-o", os.path.join(work, "c.json"), "--force"]),
            ("collectors' work (no CLI)", [py, "-c", _COLLECTORS_WORK, os.path.join(work, "w.json")]),
            ("envsnap diff A B", envsnap + ["diff", snap_a, snap_b]),
            ("envsnap show A", envsnap + ["show", snap_a]),
        ]
        times: Dict[str, List[float]] = {name: [] for name, _ in rows}
        for _name, cmd in rows:  # warm-up: byte code, hash cache
            timed(cmd, env, work)
        for i in range(args.runs):
            shift = i % len(rows)
            for name, cmd in rows[shift:] + rows[:shift]:
                times[name].append(timed(cmd, env, work))
        floor_imports = median_profile([py, "-c", "pass"], env, work, args.import_runs)[0]
        imports = {name: median_profile(cmd, env, work, args.import_runs) for name, cmd in rows
                   if name.startswith("envsnap") and "--help" not in name}
    finally:
        shutil.rmtree(work, ignore_errors=True)

    med = {name: statistics.median(values) for name, values in times.items()}
    floor = med["python -c pass"]
    print(f"interpreter: {py}  ({args.runs} rounds, rotated order, medians; {os.cpu_count()} CPUs)")
    print(f"{'command':<28} {'median ms':>10} {'min ms':>8} {'x python -c pass':>17}")
    for name, _ in rows:
        print(f"{name:<28} {med[name] * 1e3:>10.1f} {min(times[name]) * 1e3:>8.1f} {med[name] / floor:>17.2f}")
    print(f"\nimports per command (python -X importtime, top-level imports minus python -c pass's "
          f"{floor_imports:.1f} ms):")
    for name, (total, biggest) in imports.items():
        parts = ", ".join(f"{mod} {ms:.1f}" for mod, ms in biggest)
        print(f"  {name:<26} {total - floor_imports:7.1f} ms   biggest: {parts}")
    print(f"\ntarget: envsnap --version <= 1.5 x python -c pass: {med['envsnap --version'] / floor:.2f} x")
    budget = 1.5 * floor + med["collectors' work (no CLI)"]
    print(f"target: envsnap capture <= 1.5 x python -c pass + collectors' work = {budget * 1e3:.0f} ms: "
          f"{med['envsnap capture -o F'] * 1e3:.0f} ms ({med['envsnap capture -o F'] / budget:.2f} of the budget)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
