#!/usr/bin/env python3
"""What the hash cache buys: warm and cold `envsnap capture` against `python -m torch.utils.collect_env`.

Every command runs as a user would run it, as a fresh process, in rounds: each round runs all
of them in a rotated order (so none always follows the same one), after one unmeasured warm-up
each; medians are reported. Rows:

    collect_env          python -m torch.utils.collect_env (the reference)
    capture warm         envsnap capture, second and later captures of an unchanged environment
    capture cold (empty) envsnap capture with an empty XDG_CACHE_HOME (a first capture: hashes all, writes the cache)
    capture --no-cache   envsnap capture --no-cache (hashes all, cache untouched)
    baseline             --baseline CMD (e.g. the pre-change code: its own `envsnap`), if given
    deep warm / cold     the same with --deep (every installed file hashed; torch imported in a subprocess)

For each capture row the table also gives the median `packages` section time (the hashing) and
the `torch` section time (with --deep: the torch import), and the cache's hits/misses.

Byte code: children run without PYTHONDONTWRITEBYTECODE, so after the warm-up every module
loads from its .pyc, as in an installed envsnap (a baseline runs with PYTHONPYCACHEPREFIX in a
temporary directory, so nothing is written into its tree). Needs only the standard library,
envsnap and torch (no network): it runs on the GPU machine as is.

    python benchmarks/capture_cache.py [--runs 5] [--python PATH] [--no-deep] [--baseline "/other/envsnap"]
                                       [--describe PYTHON]

With --baseline, add --describe (e.g. this venv's python) so that both envsnaps describe the same
interpreter (its packages, its editable installs' git checkouts): otherwise each describes its own.

Targets: warm <= 0.12 x collect_env here (2 cores), <= 0.1 x on the H200; cold no
slower than the pre-change code; --deep warm <= 1 s on the H200.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMEOUT_S = 900
RACY_WINDOW_S = 3.0  # envsnap/capture/filestat.py RACY_WINDOW_NS


def child_env(extra: Optional[Dict[str, str]] = None) -> Dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure what an installed envsnap does: .pyc files
    env["PYTHONPATH"] = REPO + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra or {})
    return env


class Row:
    def __init__(self, name: str, argv: List[str], env: Dict[str, str], output: Optional[str] = None,
                 fresh_cache: bool = False):
        self.name, self.argv, self.env, self.output, self.fresh_cache = name, argv, env, output, fresh_cache
        self.times: List[float] = []
        self.sections: Dict[str, List[float]] = {}
        self.cache: List[str] = []

    def run(self, measured: bool) -> None:
        env = dict(self.env)
        tmp_cache = None
        if self.fresh_cache:
            tmp_cache = tempfile.mkdtemp(prefix="envsnap-empty-cache-")
            env["XDG_CACHE_HOME"] = tmp_cache
        try:
            start = time.perf_counter()
            proc = subprocess.run(self.argv, capture_output=True, check=False, env=env,
                                  timeout=TIMEOUT_S, cwd=tempfile.gettempdir())
            elapsed = time.perf_counter() - start
        finally:
            if tmp_cache:
                shutil.rmtree(tmp_cache, ignore_errors=True)
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
            raise SystemExit(f"{self.name}: {' '.join(self.argv[:4])} failed with exit {proc.returncode}: "
                             f"{' | '.join(tail)}")
        if not measured:
            return
        self.times.append(elapsed)
        if self.output:
            with open(self.output) as handle:
                sections = json.load(handle).get("sections", {})
            for name in ("packages", "torch"):
                value = (sections.get(name) or {}).get("elapsed_s")
                if isinstance(value, (int, float)):
                    self.sections.setdefault(name, []).append(value)
            cache = ((sections.get("packages") or {}).get("data") or {}).get("hash_cache") or {}
            if cache:
                self.cache.append(f"{cache.get('hits', '?')}/{cache.get('misses', '?')}")


def packages_alone(python: str, cache_home: str, runs: int) -> Dict[str, float]:
    """The warm packages collector without the rest of the capture (no other collector holds the
    GIL meanwhile), and the floor under it: one os.stat of every file its verdicts list."""
    sys.path.insert(0, REPO)
    from envsnap.capture import filestat, hashcache
    from envsnap.capture.collectors import packages

    facts = json.loads(subprocess.run([python, "-c", "import json, site, sys; print(json.dumps([sys.path, "
                                       "site.getsitepackages()]))"], capture_output=True, text=True,
                                      check=True).stdout)
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = cache_home
    try:
        path, sites = [p for p in facts[0] if p], set(facts[1])
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            data = packages.describe(path, sites)
            times.append(time.perf_counter() - start)
        skipped = data["integrity"]["unverifiable"]
        cache = hashcache.HashCache.open(d["location"] for k, d in data["dists"].items() if k not in skipped)
        paths = [p for verdict in cache._verdict_table("py").values() for p in verdict.paths]
        start = time.perf_counter()
        filestat.packed_stats(paths)
        stat_s = time.perf_counter() - start
    finally:
        if old is None:
            os.environ.pop("XDG_CACHE_HOME", None)
        else:
            os.environ["XDG_CACHE_HOME"] = old
    return {"describe_s": statistics.median(times), "files": len(paths), "stat_s": stat_s,
            "stat_us": stat_s / max(1, len(paths)) * 1e6}


def envsnap_argv(python: str) -> List[str]:
    return [python, "-m", "envsnap"]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="measured rounds (default 5)")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the environment (default: this one)")
    parser.add_argument("--no-deep", action="store_true", help="leave out the --deep rows")
    parser.add_argument("--baseline", default=None,
                        help="another envsnap to compare cold captures with, e.g. '/work/main/.venv/bin/envsnap'")
    parser.add_argument("--describe", default=None, metavar="PYTHON",
                        help="every capture describes this interpreter (--python PYTHON)")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be at least 1")

    work = tempfile.mkdtemp(prefix="envsnap-bench-cache-")
    try:
        warm_home = os.path.join(work, "warm-cache")
        env = child_env({"XDG_CACHE_HOME": warm_home})
        head = envsnap_argv(args.python)
        described = ["--python", args.describe] if args.describe else []
        out = os.path.join(work, "snap-{}.json")
        rows = [Row("collect_env", [args.python, "-m", "torch.utils.collect_env"], env)]
        def capture(name: str, *extra: str) -> List[str]:
            return head + ["capture", *extra, "-o", out.format(name), "--force", *described]

        rows.append(Row("capture warm", capture("warm"), env, out.format("warm")))
        rows.append(Row("capture cold (empty cache)", capture("cold"), env, out.format("cold"), fresh_cache=True))
        rows.append(Row("capture --no-cache", capture("nocache", "--no-cache"), env, out.format("nocache")))
        if args.baseline:
            base_env = child_env({"PYTHONPYCACHEPREFIX": os.path.join(work, "pyc-baseline")})
            base_env.pop("PYTHONPATH", None)
            baseline = shlex.split(args.baseline) + ["capture", "-o", out.format("base"), "--force", *described]
            rows.append(Row("baseline capture", baseline, base_env, out.format("base")))
        if not args.no_deep:
            rows.append(Row("capture --deep warm", head + ["capture", "--deep", "-o", out.format("dwarm"), "--force", *described],
                            env, out.format("dwarm")))
            rows.append(Row("capture --deep --no-cache", head + ["capture", "--deep", "-o", out.format("dcold"),
                                                                  "--force", "--no-cache", *described], env, out.format("dcold")))
        # Warm-up: byte code for every row, and the warm cache (deep first: it holds the default
        # capture's files too). Files changed within the racy window are not cached yet: let
        # anything the warm-up itself wrote settle, then capture once more.
        for row in rows[::-1]:
            row.run(measured=False)
        time.sleep(RACY_WINDOW_S)
        for row in rows:
            if row.name.endswith("warm"):
                row.run(measured=False)
        for i in range(args.runs):
            shift = i % len(rows)
            for row in rows[shift:] + rows[:shift]:
                row.run(measured=True)
        alone = packages_alone(args.describe or args.python, warm_home, args.runs)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    reference = statistics.median(rows[0].times)
    print(f"environment: {args.python}  ({args.runs} rounds, rotated order, medians; {os.cpu_count()} CPUs)")
    print(f"{'command':<28} {'median s':>9} {'min s':>7} {'x collect_env':>14} {'packages s':>11} "
          f"{'torch s':>8} {'cache hits/misses':>18}")
    for row in rows:
        median = statistics.median(row.times)
        pk = statistics.median(row.sections["packages"]) if row.sections.get("packages") else None
        tc = statistics.median(row.sections["torch"]) if row.sections.get("torch") else None
        hits = row.cache[-1] if row.cache else "-"
        print(f"{row.name:<28} {median:>9.3f} {min(row.times):>7.3f} {median / reference:>14.3f} "
              f"{'-' if pk is None else f'{pk:.3f}':>11} {'-' if tc is None else f'{tc:.3f}':>8} {hits:>18}")
    warm = statistics.median(rows[1].times)
    print(f"target: warm <= 0.12 x collect_env here, <= 0.1 x on the H200: {warm / reference:.3f}")
    if args.baseline:
        base = statistics.median(next(r for r in rows if r.name == "baseline capture").times)
        for row in rows[2:4]:
            print(f"target: {row.name} no slower than the baseline: {statistics.median(row.times) / base:.3f} x")
    print(f"packages collector alone, warm, in this process (median of {args.runs}): {alone['describe_s']:.3f} s; "
          f"of it one stat of each of the {alone['files']} files checked: {alone['stat_s']:.3f} s "
          f"({alone['stat_us']:.1f} us a file)")
    if not args.no_deep:
        deep = next(r for r in rows if r.name == "capture --deep warm")
        print(f"target: --deep warm <= 1 s on the H200: {statistics.median(deep.times):.3f} s "
              f"(packages {statistics.median(deep.sections.get('packages') or [0]):.3f} s, "
              f"torch import subprocess {statistics.median(deep.sections.get('torch') or [0]):.3f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
