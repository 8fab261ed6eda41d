#!/usr/bin/env python3
"""Time `envsnap diff`'s analysis (semantic diff + ranking) on two large snapshots.

The pair (contract layout, built in memory, deterministic): 600 installed distributions,
20,000 integrity entries (edited/missing files), 8 TP workers x 300 environment variables
seen both in /proc (processes) and by the probe, 300 shell variables, 8 GPUs, 1,000
watched files, a checkout with 200 dirty files, 10 runs per side. Between the sides:
20 package bumps, 50 integrity entries, 5 worker variables (one only on some workers),
3 shell variables, a GPU power limit, 10 watched files, 5 dirty files.

Measured: `envsnap.rank.analyze(good, bad)` -- everything `envsnap diff` does between
loading the two files and printing (views, per-category DeepDiff, volatility, ranking,
run statistics) -- median of N runs in one process; the load of the two files (with orjson
when it is installed, and with the standard library's json alone); and the real `envsnap
diff` CLI end to end, N fresh processes alternating with `python -c pass`, medians (children
run without PYTHONDONTWRITEBYTECODE after a warm-up, so modules load from byte code as in an
installed envsnap).
Targets: analysis <= 0.3 s; the whole CLI <= 0.3 s on the 2-core machine. The
shipped example pair (the README's first command) is timed in the same rounds.
With --nodes N, each side is an N-node cluster of that snapshot (`envsnap merge` of N copies under host
names node-0..): diff compares node by node, so the analysis target is N x 0.3 s.

    .venv/bin/python benchmarks/diff_speed.py [--runs 7] [--check] [--nodes N] [--baseline OTHER_CHECKOUT]
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TARGET_S = 0.3


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def make_pair(seed: int = 7):
    rng = random.Random(seed)
    dists = {f"pkg-{i:03d}": {"name": f"pkg-{i:03d}", "version": f"1.{i % 17}.{i % 5}", "installer": "pip",
                              "location": "/opt/venv/lib/python3.11/site-packages",
                              "origin": {"kind": "index", "editable": False}} for i in range(600)}
    modified = {f"pkg-{i % 600:03d}/mod_{i:05d}.py": {"dist": f"pkg-{i % 600:03d}", "recorded_sha256": _sha(f"r{i}"),
                                                      "actual_sha256": _sha(f"a{i}"), "recorded_size": 1000 + i,
                                                      "actual_size": 1001 + i} for i in range(20000)}
    worker_env = {f"VAR_{i:03d}": f"value-{i}" for i in range(290)}
    worker_env.update({"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring", "OMP_NUM_THREADS": "8", "CUDA_DEVICE_MAX_CONNECTIONS": "8",
                       "NCCL_NVLS_ENABLE": "1", "NCCL_CUMEM_ENABLE": "1", "PATH": "/usr/bin", "HOME": "/root",
                       "LANG": "C.UTF-8", "TERM": "xterm"})
    procs, records = {}, {}
    for r in range(8):
        key = f"scheduler_TP{r}"
        procs[key] = {"pid": 1000 + r, "ppid": 999, "parent_key": "sglang-main", "title": f"sglang::scheduler_TP{r}",
                      "cmdline": [f"sglang::scheduler_TP{r}"], "exe": "/usr/bin/python3", "cwd": "/srv",
                      "role": {"kind": "scheduler", "tp": r}, "cpu_affinity": list(range(r * 8, r * 8 + 8)),
                      "nice": 0, "num_threads": 40, "gpus": [r], "status": "ok", "environ_status": "ok",
                      "environ": dict(worker_env)}
        records[key] = {"pid": 1000 + r, "ppid": 999, "argv": ["python"], "title": f"sglang::scheduler_TP{r}",
                        "env_at_start": dict(worker_env), "env_at_init": dict(worker_env),
                        "init": {"backend": "nccl", "rank": r, "world_size": 8, "nccl_version": "2.27.3"}}
    gpu = {"name": "NVIDIA H200", "memory": {"total_bytes": 150754820096, "used_bytes": 1 << 30},
           "power": {"limit_w": 700.0, "default_limit_w": 700.0, "draw_w": 80.0},
           "clocks": {"max": {"sm": 1980, "mem": 3201}, "current": {"sm": 345}}, "persistence_mode": "Enabled",
           "pcie": {"current_gen": 5, "max_gen": 5, "current_width": 16, "max_width": 16}, "temperature": {"gpu_c": 33}}
    snap = {
        "schema_version": 1, "envsnap_version": "0.1.0", "created": "2025-01-01T00:00:00Z", "label": "good",
        "host": "node", "redaction": "on", "runs": [],
        "sections": {
            "env": {"status": "ok", "data": {"count": 300, "vars": dict(worker_env, SHELL="/bin/bash")}},
            "packages": {"status": "ok", "data": {"count": 600, "dists": dists,
                                                  "integrity": {"mode": "py", "checked_files": 90000,
                                                                "modified": modified, "missing": {}}}},
            "processes": {"status": "ok", "data": {"processes": procs, "roots": ["sglang-main"]}},
            "probe": {"status": "ok", "data": {"dir": "/tmp/probe", "records": records}},
            "nvidia": {"status": "ok", "data": {"driver_version": "580.159.04", "count": 8,
                                                "gpus": {str(i): copy.deepcopy(gpu) for i in range(8)}}},
            "files": {"status": "ok", "data": {"entries": {f"/srv/cfg/f{i:04d}.yaml": {"size": i, "sha256": _sha(f"f{i}")}
                                                           for i in range(1000)}}},
            "git": {"status": "ok", "data": {"repos": {"/srv/sglang": {
                "roles": ["repo"], "head": "a" * 40, "branch": "main", "detached": False,
                "dirty": {f"python/sglang/f{i:03d}.py": {"status": "M", "sha256": _sha(f"d{i}")} for i in range(200)},
                "untracked": {}, "stash": {}}}}},
            "host": {"status": "ok", "data": {"cpu": {"model": "Xeon", "logical": 224, "governor": "performance"},
                                              "memory": {"total_bytes": 1 << 41, "available_bytes": 1 << 40}}},
        },
    }
    good = snap
    bad = copy.deepcopy(snap)
    bad["label"] = "bad"
    for name in sorted(dists)[::30]:  # 20 bumps
        bad["sections"]["packages"]["data"]["dists"][name]["version"] += ".post1"
    bmod = bad["sections"]["packages"]["data"]["integrity"]["modified"]
    for rel in sorted(bmod)[::400]:  # 50 entries
        bmod[rel]["actual_sha256"] = _sha(rel + "x")
    for r, key in enumerate(sorted(bad["sections"]["probe"]["data"]["records"])):
        env = bad["sections"]["probe"]["data"]["records"][key]["env_at_init"]
        env["NCCL_PROTO"] = "Simple"
        env["VAR_001"] = "changed"
        env["VAR_002"] = "changed"
        env["NEW_VAR"] = "1"
        if r < 3:
            env["OMP_NUM_THREADS"] = "1"
    benv = bad["sections"]["env"]["data"]["vars"]
    benv.update({"VAR_010": "x", "VAR_011": "y", "EDITOR": "vim"})
    for i in range(8):
        bad["sections"]["nvidia"]["data"]["gpus"][str(i)]["power"]["limit_w"] = 500.0
        bad["sections"]["nvidia"]["data"]["gpus"][str(i)]["temperature"]["gpu_c"] = 40 + i
    for i in range(10):
        bad["sections"]["files"]["data"]["entries"][f"/srv/cfg/f{i:04d}.yaml"]["sha256"] = _sha(f"g{i}")
    for i in range(5):
        bad["sections"]["git"]["data"]["repos"]["/srv/sglang"]["dirty"][f"python/sglang/f{i:03d}.py"]["sha256"] = _sha(f"e{i}")
    for side, center in ((good, 94.0), (bad, 60.0)):
        side["runs"] = [{"ok": True, "exit_code": 0, "duration_s": 170.0, "started": "2025-01-01T00:00:00Z",
                         "metrics": {"output_throughput": round(rng.gauss(center, 1.0), 2),
                                     "accept_length": round(rng.gauss(3.1, 0.02), 3),
                                     "median_itl_ms": round(rng.gauss(3100 / center, 0.3), 2)},
                         "output_tail": "", "command": ["bench"], "source": "run", "parsers": ["bench_serving"]}
                        for _ in range(10)]
    return good, bad


def make_cluster(snap, nodes: int):
    """The snapshot as an N-node cluster: N copies under host names node-0.., merged as `envsnap merge` does."""
    from envsnap.model import merge

    copies = []
    for index in range(nodes):
        node = copy.deepcopy(snap)
        node["host"] = f"node-{index}"
        copies.append(node)
    return merge.merge(copies, [f"node-{i}.json" for i in range(nodes)], "2026-12-01T00:00:00Z")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--check", action="store_true", help=f"exit 1 when the median exceeds {TARGET_S} s per node")
    parser.add_argument("--nodes", type=int, default=1, help="compare N-node clusters of the pair (merged copies)")
    parser.add_argument("--baseline", metavar="REPO",
                        help="also time the CLI of another envsnap checkout (e.g. a worktree of the pre-change commit), "
                             "alternating with this one in the same rounds")
    args = parser.parse_args()
    from envsnap.analysis import result as result_mod
    from envsnap.capture.collectors import SECTION_SHAPES
    from envsnap.model import store

    good, bad = make_pair()
    target = TARGET_S * max(1, args.nodes)
    if args.nodes > 1:
        good, bad = make_cluster(good, args.nodes), make_cluster(bad, args.nodes)
    times = []
    for _ in range(args.runs):
        # analyze() never mutates its inputs, but fresh copies keep every run cold for caches keyed on objects.
        g, b = copy.deepcopy(good), copy.deepcopy(bad)
        start = time.perf_counter()
        result = result_mod.analyze(g, b)
        times.append(time.perf_counter() - start)
    median = statistics.median(times)
    print("pair: 600 packages, 20000 integrity entries, 8 workers x 300 vars, 8 GPUs, 1000 files, 10 runs/side"
          + (f"; {args.nodes}-node clusters of it" if args.nodes > 1 else ""))
    print(f"analysis (diff + ranking), median of {args.runs}: {median * 1000:.0f} ms "
          f"(min {min(times) * 1000:.0f}, max {max(times) * 1000:.0f}); target <= {target * 1000:.0f} ms")
    print(f"  {len(result['differences'])} differences, {len(result['causes'])} causes, "
          f"top: {result['causes'][0]['key']} ({result['causes'][0]['score']})")
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for name, snap in (("good", good), ("bad", bad)):
            path = os.path.join(tmp, f"{name}.json")
            store.save(snap, path)
            paths.append(path)
        size = sum(os.path.getsize(p) for p in paths) / 1e6
        loads = {}
        for parser_name, fast in (("orjson, checked", store._orjson), ("json (standard library)", None)):
            if parser_name.startswith("orjson") and fast is None:
                continue
            saved, store._orjson = store._orjson, fast
            try:
                loads[parser_name] = _median_time(lambda: [store.load(p, SECTION_SHAPES) for p in paths], args.runs)
            finally:
                store._orjson = saved
        for parser_name, seconds in loads.items():
            print(f"loading both files ({size:.1f} MB of JSON, validated), {parser_name}: {seconds * 1000:.0f} ms")
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        rest = os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else ""
        env["PYTHONPATH"] = repo + rest
        cli = [sys.executable, "-m", "envsnap", "diff", *paths]
        floor = [sys.executable, "-c", "pass"]
        # The README's first command: the shipped example pair (small files, lists of scalars changed).
        example = [sys.executable, "-m", "envsnap", "diff",
                   *(os.path.join(repo, "snapshots", f"eagle3-tp8-{side}.json") for side in ("good", "bad"))]
        # Each runs from its own checkout (`-m` puts the current directory first on sys.path).
        commands = [("cli", cli, env, repo), ("floor", floor, env, repo), ("example", example, env, repo)]
        if args.baseline:
            base = os.path.abspath(args.baseline)
            # The rest of the path too: the same dependencies (orjson...) for both.
            commands.append(("baseline", cli, dict(env, PYTHONPATH=base + rest), base))
            commands.append(("baseline example", example, dict(env, PYTHONPATH=base + rest), base))
        exit_code = 0
        for name, cmd, cmd_env, cwd in commands:  # warm-up (byte code written)
            code = subprocess.run(cmd, capture_output=True, env=cmd_env, cwd=cwd, check=False).returncode
            exit_code = code if name == "cli" else exit_code
        walls: dict = {name: [] for name, _, _, _ in commands}
        for i in range(args.runs):
            shift = i % len(commands)  # rotated: none always follows the same one
            for name, cmd, cmd_env, cwd in commands[shift:] + commands[:shift]:
                start = time.perf_counter()
                subprocess.run(cmd, capture_output=True, env=cmd_env, cwd=cwd, check=False)
                walls[name].append(time.perf_counter() - start)
        wall = statistics.median(walls["cli"])
        print(f"`envsnap diff` CLI end to end (interpreter start, imports, load, analysis, text), median of "
              f"{args.runs}: {wall * 1000:.0f} ms (min {min(walls['cli']) * 1000:.0f}; exit {exit_code}); "
              f"`python -c pass`: {statistics.median(walls['floor']) * 1000:.0f} ms; target <= {TARGET_S * 1000:.0f} ms")
        if args.baseline:
            print(f"baseline {args.baseline}, same rounds: {statistics.median(walls['baseline']) * 1000:.0f} ms "
                  f"(min {min(walls['baseline']) * 1000:.0f})")
        print(f"`envsnap diff` of the shipped example pair, median of {args.runs}: "
              f"{statistics.median(walls['example']) * 1000:.0f} ms (min {min(walls['example']) * 1000:.0f})"
              + (f"; baseline, same rounds: {statistics.median(walls['baseline example']) * 1000:.0f} ms"
                 if args.baseline else ""))
    if args.check and (median > target or wall > target):
        print(f"FAIL: analysis {median:.3f} s, CLI {wall:.3f} s; target {target} s")
        return 1
    return 0


def _median_time(func, runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


if __name__ == "__main__":
    sys.exit(main())
