"""How many benchmark configurations `envsnap bisect` needs, against one-at-a-time subtraction.

Two measurements:

1. The search alone (envsnap.bisect.ddmin with an exact oracle): for n deltas and every
   possible position of one cause, the configurations run, GOOD and BAD baselines included;
   also two interacting causes (slow only together) at every pair of positions for n = 32.
2. End to end, n = 32: two real `envsnap capture` snapshots whose environments differ in 32
   variables, then the real `envsnap bisect` CLI running a benchmark process whose speed
   depends on one of them (tests/helpers/bench.py `env`); configurations and runs as the
   result reports them, and wall time.
3. Files and variables together: the real checkout of tests/helpers/bisect_files.py (13 file
   changes: edits on both sides, a deletion, a rename, a stash, untracked files) plus 10
   variables, captured for real; the cause planted in each of the 23 deltas in turn (a
   benchmark slow exactly when that file holds BAD's bytes, or that variable BAD's value).

One-at-a-time subtraction (revert everything, re-apply one change, re-run) needs n
configurations plus the GOOD baseline. The goal for one cause among n = 32 is
<= 2*log2(n) + 4 = 14 configurations.

    .venv/bin/python benchmarks/bisect_runs.py
"""
from __future__ import annotations

import itertools
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from envsnap.analysis.bisect.ddmin import BAD, GOOD, ddmin  # noqa: E402


def configs_for(names, bad_when):
    seen = {}

    def test(key):
        if key not in seen:
            seen[key] = BAD if bad_when(set(key)) else GOOD
        return seen[key]

    found = ddmin(names, test)
    return found, len(seen) + 2  # + GOOD and BAD baselines


def search_table():
    print("1. search alone (exact oracle), configurations incl. GOOD and BAD baselines")
    print(f"   {'n':>4}  {'one cause: worst':>16}  {'mean':>6}  {'goal 2log2(n)+4':>15}  {'one-at-a-time (n + GOOD)':>24}")
    for n in (8, 16, 32, 64, 128):
        names = [f"V{i:03d}" for i in range(n)]
        counts = []
        for cause in names:
            found, count = configs_for(names, lambda s, c=cause: c in s)
            assert found == [cause]
            counts.append(count)
        print(f"   {n:>4}  {max(counts):>16}  {statistics.mean(counts):>6.1f}  {2 * math.log2(n) + 4:>15.0f}  "
              f"{n + 1:>24}")
    names = [f"V{i:03d}" for i in range(32)]
    pair_counts = []
    for a, b in itertools.combinations(names, 2):
        found, count = configs_for(names, lambda s, a=a, b=b: a in s and b in s)
        assert found == [a, b]
        pair_counts.append(count)
    print(f"   two interacting causes among 32 (all {len(pair_counts)} pairs): worst {max(pair_counts)}, "
          f"mean {statistics.mean(pair_counts):.1f} configurations (one-at-a-time cannot find them: "
          "each alone changes nothing)")


def end_to_end():
    from helpers.bench import base_env, bench_cmd, capture_pair

    names = [f"BISECT_BENCH_V{i:02d}" for i in range(32)]
    print("2. end to end, n = 32: real captures, real `envsnap bisect`, real benchmark processes")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        good, bad = capture_pair(tmp, {}, {n: "g" for n in names}, {n: "b" for n in names})
        env = base_env(**{n: None for n in names})
        for cause, repeat in ((names[0], 1), (names[21], 1), (names[31], 3)):
            journal = tmp / f"j-{cause}-{repeat}.jsonl"
            start = time.perf_counter()
            result = subprocess.run(
                [sys.executable, "-m", "envsnap", "bisect", str(good), str(bad), "--repeat", str(repeat),
                 "--format", "json", "--journal", str(journal), "--",
                 *bench_cmd("env", "--slow", f"{cause}=b:0.5", "--jitter", "0.05" if repeat > 1 else "0",
                            "--counter", tmp / f"c-{cause}")],
                env=env, capture_output=True, text=True, cwd=ROOT)
            wall = time.perf_counter() - start
            out = json.loads(result.stdout)
            found = [d["name"] for d in out["minimal"]]
            print(f"   cause {cause} (--repeat {repeat}{', ±5% jitter' if repeat > 1 else ''}): exit "
                  f"{result.returncode}, found {found}, {out['configurations_run']} configurations, "
                  f"{out['runs']['total']} runs, {wall:.1f} s wall (one-at-a-time: 33 configurations, "
                  f"{33 * repeat} runs)")


MIXED_BENCH = """\
import hashlib, json, os, pathlib, sys
kind, name, bad = sys.argv[1:4]
if kind == "file":
    path = pathlib.Path(name)
    now = hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "absent"
    slow = now == bad
else:
    slow = os.environ.get(name, "<unset>") == bad
print(json.dumps({"tok_s": 500.0 if slow else 1000.0}))
"""


def mixed_table():
    from helpers.bisect_files import INNOCENT_ENV, base_env, mixed_checkout

    print("3. files and variables together: one cause among 13 files + 10 variables, each position in turn")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        co = mixed_checkout(tmp)
        env = base_env(PYTHONDONTWRITEBYTECODE="1", **{k: None for k in INNOCENT_ENV})
        plan = subprocess.run([sys.executable, "-m", "envsnap", "bisect", str(co.good), str(co.bad), "--dry-run",
                               "--format", "json"], env=env, capture_output=True, text=True, check=True, cwd=co.repo)
        deltas = json.loads(plan.stdout)["deltas"]
        causes = [("file", d["name"], d["bad_sha256"] or "absent") for d in deltas["files"]]
        causes += [("env", d["name"], d["bad"] if d["bad"] is not None else "<unset>") for d in deltas["applied"]]
        n = len(causes)
        counts, runs = [], []
        for i, (kind, name, bad) in enumerate(causes):
            result = subprocess.run(
                [sys.executable, "-m", "envsnap", "bisect", str(co.good), str(co.bad), "--repeat", "1", "--format",
                 "json", "--journal", str(tmp / f"j{i}.jsonl"), "--", sys.executable, "-c", MIXED_BENCH, kind,
                 name, bad], env=env, capture_output=True, text=True, cwd=co.repo)
            out = json.loads(result.stdout)
            assert [d["name"] for d in out["minimal"]] == [name], (name, result.stderr[-500:])
            counts.append(out["configurations_run"])
            runs.append(out["runs"]["total"])
        print(f"   n = {n} ({len(deltas['files'])} files, {len(deltas['applied'])} variables): configurations "
              f"worst {max(counts)}, mean {statistics.mean(counts):.1f} (goal 2log2(n)+4 = "
              f"{2 * math.log2(n) + 4:.0f}); one at a time: {n + 1}")


if __name__ == "__main__":
    os.chdir(ROOT)
    search_table()
    end_to_end()
    mixed_table()
