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

4. Bisect that starts from the evidence (search.guided_search), side by side with plain ddmin
   (--no-guess): (a) the search alone for n = 20, the guess right (the cause ranked first) and
   wrong (every other delta ranked first), for every position of the cause; (b) the real CLI on
   real captures of 20 differing variables, one of them a known setting the ranking puts first;
   (c) the planted causes of tests/e2e/test_planted_cause.py (an edited installed file, a
   sitecustomize.py that pins OpenBLAS's kernels, among 20+ innocent changes: variables, a watched
   file, a dirty and an untracked file) re-run through the real `envsnap bisect`, with and without
   the guess: configurations and runs of each; (d) the same for the planted causes of
   tests/e2e/test_planted_evidence.py that bisect can switch (an interpreter switch, start-up code,
   an unknown variable read by the benchmark, with the probe and without it).

One-at-a-time subtraction (revert everything, re-apply one change, re-run) needs n
configurations plus the GOOD baseline. The goal for one cause among n = 32 is
<= 2*log2(n) + 4 = 14 configurations; from the evidence, <= 3 when the first cause is the
culprit, never more than ddmin + 2 when it is not.

    PYTHONPATH=tests:tests/e2e .venv/bin/python benchmarks/bisect_runs.py [1 2 3 4]   (sections; all by default)

(tests/ for the test helpers, the package `helpers`, as pytest's `pythonpath` gives them to the tests;
tests/e2e for section 4, which re-runs the planted-cause tests' own scenes.)
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
sys.path.insert(0, str(ROOT))  # envsnap from this tree

from envsnap.bisect.ddmin import BAD, GOOD, ddmin  # noqa: E402


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
    from helpers.bench import base_env
    from helpers.bisect_files import INNOCENT_ENV, mixed_checkout

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


class _Oracle:
    """The search alone with an exact oracle (envsnap.bisect.search's Bisector, its test() answered by a rule)."""

    def __init__(self, names, bad_when):
        from envsnap.bisect.search import Bisector

        class Oracle(Bisector):
            def __init__(inner):  # noqa: N805 - no journal, no command
                inner.names, inner.current, inner.seen = list(names), list(names), {}
                inner.path = {"guided": False, "steps": []}

            def test(inner, key):  # noqa: N805
                if key not in inner.seen:
                    inner.seen[key] = BAD if bad_when(set(key)) else GOOD
                return inner.seen[key]
        self.bisector = Oracle()

    def run(self, first=()):
        found = self.bisector.search(first)
        return found, len(self.bisector.seen) + 2


def guided_tables():
    names = [f"V{i:02d}" for i in range(20)]
    print("4a. search alone, n = 20 (exact oracle), configurations incl. GOOD and BAD baselines")
    plain, right, wrong, extra = [], [], [], []
    for cause in names:
        def rule(s, c=cause):
            return c in s
        plain_count = _Oracle(names, rule).run()[1]
        plain.append(plain_count)
        right.append(_Oracle(names, rule).run([cause])[1])
        for other in names:
            if other != cause:
                found, count = _Oracle(names, rule).run([other])
                assert found == [cause]
                wrong.append(count)
                extra.append(count - plain_count)
    print(f"   plain ddmin: worst {max(plain)}, mean {statistics.mean(plain):.1f}")
    print(f"   guess right (cause ranked first): worst {max(right)}, mean {statistics.mean(right):.1f}")
    print(f"   guess wrong (another delta first, all {len(wrong)} cases): worst {max(wrong)}, mean "
          f"{statistics.mean(wrong):.1f}; over plain ddmin: worst +{max(extra)}, mean +{statistics.mean(extra):.1f}")


def guided_end_to_end():
    from helpers.bench import base_env, bench_cmd, capture_pair

    names = [f"GUESS_B_V{i:02d}" for i in range(19)]
    print("4b. end to end, n = 20: real captures, real `envsnap bisect` with and without the guess (--repeat 1)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        good, bad = capture_pair(tmp, {}, {**{n: "g" for n in names}, "OPENBLAS_CORETYPE": "Haswell"},
                                 {**{n: "b" for n in names}, "OPENBLAS_CORETYPE": "Prescott"})
        env = base_env(**{n: None for n in names}, OPENBLAS_CORETYPE=None)
        for cause, value in (("OPENBLAS_CORETYPE", "Prescott"), (names[7], "b"), (names[18], "b")):
            row = []
            for flag in ([], ["--no-guess"]):
                start = time.perf_counter()
                result = subprocess.run(
                    [sys.executable, "-m", "envsnap", "bisect", str(good), str(bad), "--repeat", "1", "--format",
                     "json", "--journal", str(tmp / f"j-{cause}-{len(flag)}.jsonl"), *flag, "--",
                     *bench_cmd("env", "--slow", f"{cause}={value}:0.5")],
                    env=env, capture_output=True, text=True, cwd=ROOT)
                out = json.loads(result.stdout)
                assert [d["name"] for d in out["minimal"]] == [cause], result.stderr[-500:]
                row.append(f"{'plain' if flag else 'guided'} {out['configurations_run']} configurations, "
                           f"{out['runs']['total']} runs, {time.perf_counter() - start:.1f} s")
            first = "ranked first" if cause == "OPENBLAS_CORETYPE" else "not ranked first"
            print(f"   cause {cause} ({first}): " + "; ".join(row))


def planted_through_bisect():
    import test_planted_cause as planted

    print("4c. the planted causes of tests/e2e/test_planted_cause.py through the real `envsnap bisect` (--repeat 1)")
    for name, plant in (("edited installed file fastlib/core.py", "core"), ("sitecustomize.py pinning OpenBLAS", "hook")):
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            repo = tmp / "repo"
            repo.mkdir()
            git_env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com", GIT_COMMITTER_NAME="t",
                           GIT_COMMITTER_EMAIL="t@example.com")
            for args in (["init", "-q", "-b", "main"], ["add", "a.py"], ["commit", "-q", "-m", "first"]):
                if args[0] == "add":
                    (repo / "a.py").write_text("x = 1\n")
                subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, env=git_env)
            site = planted._venv(tmp)
            good = planted._side(tmp, repo, "good", planted._base_env())
            env = planted._innocent_changes(tmp, repo)
            if plant == "core":
                (site / "fastlib" / "core.py").write_text(planted.SLOW_CORE)
            else:
                (site / "sitecustomize.py").write_text(planted.BLAS_HOOK)
            bad = planted._side(tmp, repo, "bad", env)
            python = str(tmp / "venv" / "bin" / "python")
            row = []
            for flag in ([], ["--no-guess"]):
                start = time.perf_counter()
                result = subprocess.run(
                    [python, "-m", "envsnap", "bisect", str(good), str(bad), "--repeat", "1", "--format", "json",
                     "--journal", str(tmp / f"j{len(flag)}.jsonl"), *flag, "--", python, str(tmp / "bench.py")],
                    env=planted._base_env(), capture_output=True, text=True, cwd=repo, timeout=900)
                try:
                    out = json.loads(result.stdout)
                except ValueError:
                    row.append(f"{'plain' if flag else 'guided'}: exit {result.returncode}: "
                               f"{result.stderr.strip().splitlines()[-1:]}")
                    continue
                found = [d["name"] for d in out["minimal"]]
                row.append(f"{'plain' if flag else 'guided'}: {out['status']}, found {found}, "
                           f"{out['configurations_run']} configurations, {out['runs']['total']} runs, "
                           f"{time.perf_counter() - start:.0f} s ({out['deltas']['total']} deltas; path: "
                           f"{(out.get('path') or {}).get('line', '')[:90]})")
            print(f"   {name}:")
            for line in row:
                print(f"      {line}")


def planted_evidence_through_bisect():
    import test_planted_evidence as planted
    from helpers.planted import side_env

    def hook(venv):
        (venv["site"] / "sitecustomize.py").write_text(planted.PROFILE_HOOK)

    cases = [("interpreter switch PYTHONTRACEMALLOC=1", dict(bad_env={"PYTHONTRACEMALLOC": "1"}, args=["120"])),
             ("start-up code (sitecustomize profile hook)", dict(before_bad=hook)),
             ("unknown variable read by the benchmark (probe on)", dict(bad_env={"VALIDATE_ROWS": "1"})),
             ("unknown variable, probe off (a tied first group)", dict(bad_env={"VALIDATE_ROWS": "1"}, probe=False))]
    print("4d. the planted causes of tests/e2e/test_planted_evidence.py (30 differences) through the real "
          "`envsnap bisect` (--repeat 3)")
    for name, kwargs in cases:
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            result, _text, _page = planted._pair(tmp, planted.BENCH, **kwargs)
            first = result["causes"][0]
            command = [str(tmp / "venv" / "bin" / "python"), str(tmp / "bench.py"), *kwargs.get("args", [])]
            row = []
            for flag in ([], ["--no-guess"]):
                start = time.perf_counter()
                proc = subprocess.run(
                    [sys.executable, "-m", "envsnap", "bisect", str(tmp / "good.json"), str(tmp / "bad.json"),
                     "--repeat", "3", "--format", "json", "--journal", str(tmp / f"j{len(flag)}.jsonl"), *flag, "--",
                     *command], env=side_env(False), capture_output=True, text=True, cwd=tmp, timeout=1800)
                try:
                    out = json.loads(proc.stdout)
                except ValueError:
                    row.append(f"{'plain' if flag else 'guided'}: exit {proc.returncode}: "
                               f"{proc.stderr.strip().splitlines()[-1:]}")
                    continue
                found = [os.path.basename(d["name"]) for d in out["minimal"]]
                row.append(f"{'plain' if flag else 'guided'}: {out['status']}, found {found}, "
                           f"{out['configurations_run']} configurations, {out['runs']['total']} runs, "
                           f"{time.perf_counter() - start:.0f} s; path: {(out.get('path') or {}).get('line', '')[:110]}")
            print(f"   {name} (ranked first: {first['key']}, tied with {first.get('tied', 0)}):")
            for line in row:
                print(f"      {line}")


if __name__ == "__main__":
    os.chdir(ROOT)
    only = sys.argv[1:] or ["1", "2", "3", "4"]
    if "1" in only:
        search_table()
    if "2" in only:
        end_to_end()
    if "3" in only:
        mixed_table()
    if "4" in only:
        guided_tables()
        guided_end_to_end()
        planted_through_bisect()
        planted_evidence_through_bisect()
