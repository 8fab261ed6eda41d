#!/usr/bin/env python3
"""Two big snapshots (about 109 MB each), grown from a real capture, for timing `diff` and `report` on them.

A real `envsnap capture --pid <this process>` of this machine is the seed (every section as this machine
fills it: packages with their integrity check, the libraries this process maps, the process tree). It is
grown where real servers grow a snapshot (issue 36 measured two 109 MB snapshots):
  * packages.integrity.modified: installed files whose hash differs from RECORD (a big patched tree),
  * libraries.objects: shared objects the measured processes mapped (a torch process maps ~150; many
    processes with their own build trees map many more),
  * processes (+ libraries.processes): a large process tree, each with its environment and mapped objects.
GOOD and BAD differ as a real regression pair does: a few hundred integrity entries, some objects' build-ids,
a handful of variables, one worker's NCCL_ALGO, the runs' metric.

    .venv/bin/python benchmarks/big_snapshot.py OUT_DIR [--mb 109]    # writes OUT_DIR/good.json, bad.json
    .venv/bin/python benchmarks/big_snapshot.py OUT_DIR --measure [--repeat 3] [--limit-as-mb 1536]

--measure runs `envsnap diff` and `envsnap report` on the pair under /usr/bin/time -v, alternating the two
commands, and prints each one's median wall time and peak RSS (and, with --limit-as-mb, what they do under
that address-space limit: an answer, or one clear line).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from typing import Any, Dict, List

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def real_capture(path: str) -> Dict[str, Any]:
    env = dict(os.environ)
    env.pop("ENVSNAP_DEBUG", None)
    result = subprocess.run([sys.executable, "-m", "envsnap", "capture", "-o", path, "--force", "--timeout", "60",
                             "--pid", str(os.getpid())], env=env, capture_output=True, text=True, timeout=300,
                            cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"capture failed: {result.stderr.strip()}")
    with open(path, encoding="utf-8") as handle:
        snap: Dict[str, Any] = json.load(handle)
    return snap


def _hex(rnd: random.Random, n: int = 64) -> str:
    return "%0*x" % (n, rnd.getrandbits(n * 4))


def grow(seed: Dict[str, Any], side: str, scale: float) -> Dict[str, Any]:
    """A copy of the real capture `seed`, grown by `scale` (1.0: about 109 MB), differing by side."""
    snap = json.loads(json.dumps(seed))
    bad = side == "bad"
    rnd = random.Random(36)  # the same base on both sides; the differences are explicit
    sections = snap["sections"]
    n_integrity, n_objects, n_procs = int(200_000 * scale), int(60_000 * scale), int(1_500 * scale)

    pkgs = sections.setdefault("packages", {"status": "ok", "data": {}})
    data = pkgs.setdefault("data", {})
    dists = data.setdefault("dists", {})
    names = sorted(dists) or ["torch"]
    integ = data.setdefault("integrity", {"mode": "py", "checked_files": 0, "modified": {}, "missing": {}})
    modified = integ.setdefault("modified", {})
    for j in range(n_integrity):
        dist = names[j % len(names)]
        recorded, actual = _hex(rnd), _hex(rnd)
        edited = bad and j % 1000 == 7
        if edited:
            actual = _hex(random.Random(j))
        modified[f"{dist.replace('-', '_')}/big_tree/sub_{j // 500:04d}/module_{j:06d}.py"] = {
            "dist": dist, "recorded_sha256": recorded, "actual_sha256": actual,
            "recorded_size": 1000 + j % 9000, "actual_size": 1000 + j % 9000 + (7 if edited else 0)}
    integ["checked_files"] = max(int(integ.get("checked_files") or 0), n_integrity * 3)

    libs = sections.setdefault("libraries", {"status": "ok", "data": {}})
    libs["status"] = "ok"
    ldata = libs.setdefault("data", {})
    objects = ldata.setdefault("objects", {})
    paths: List[str] = []
    for k in range(n_objects):
        path = f"/opt/builds/tree_{k // 300:03d}/lib/libscale_{k:05d}.so.{1 + k % 3}"
        build_id = _hex(rnd, 40)
        if bad and k % 997 == 5:
            build_id = _hex(random.Random(k), 40)
        objects[path] = {"name": f"libscale_{k:05d}.so.{1 + k % 3}", "soname": f"libscale_{k:05d}.so.{1 + k % 3}",
                         "build_id": build_id, "size": 100_000 + k, "dev": "103:2", "inode": 5_000_000 + k,
                         "owner": {"kind": "unknown"}, "status": "ok", "strings": "read",
                         "mentions": ["OMP_NUM_THREADS"] if k % 50 == 0 else []}
        paths.append(path)
    lprocs = ldata.setdefault("processes", {})

    procs_section = sections.setdefault("processes", {"status": "ok", "data": {}})
    procs_section["status"] = "ok"
    pdata = procs_section.setdefault("data", {})
    procs = pdata.setdefault("processes", {})
    base_env = {f"SCALE_VAR_{v:03d}": f"value-{v}" for v in range(60)}
    for p in range(n_procs):
        key = f"scale_worker_{p:04d}"
        env = dict(base_env, RANK=str(p), NCCL_ALGO="Tree" if bad and p == 3 else "Ring")
        procs[key] = {"pid": 10_000 + p, "ppid": 1, "parent_key": None, "title": f"scale::worker{p}",
                      "cmdline": ["python3", "-m", "scale.worker", "--rank", str(p)], "role": {"kind": "other"},
                      "status": "ok", "environ_status": "ok", "environ": env, "num_threads": 8, "nice": 0,
                      "cpu_affinity": [p % 16]}
        mapped = {os.path.basename(paths[(p * 37 + i) % len(paths)]): paths[(p * 37 + i) % len(paths)]
                  for i in range(150)}
        lprocs[key] = {"pid": 10_000 + p, "status": "ok", "objects": dict(sorted(mapped.items())), "other_files": 3}
    ldata["scan"] = {"complete": True, "objects": len(objects), "from_cache": 0, "read": len(objects),
                     "bytes_read": 0, "unscanned": {}, "elapsed_s": 1.0}
    ldata["checked_names"] = sorted(set(ldata.get("checked_names") or []) | {"OMP_NUM_THREADS"})

    base = 700.0 if bad else 1000.0
    snap["runs"] = [{"ok": True, "exit_code": 0, "duration_s": 60.0, "started": "2026-01-01T00:00:00Z",
                     "metrics": {"output_throughput": base * (1 + 0.01 * ((r * 7) % 5 - 2))},
                     "output_tail": "ok", "command": ["bench"], "source": "run", "parsers": ["json_line"]}
                    for r in range(5)]
    snap["label"] = side
    return snap


def write_pair(out_dir: str, mb: float) -> List[str]:
    os.makedirs(out_dir, exist_ok=True)
    sys.path.insert(0, ROOT)
    from envsnap.model import store

    with tempfile.TemporaryDirectory() as tmp:
        seed = real_capture(os.path.join(tmp, "seed.json"))
    scale = mb / 109.0
    written = []
    for side in ("good", "bad"):
        snap = grow(seed, side, scale)
        text = store.dumps(snap)
        # A second pass sizes the growth to the target (the seed's own size varies by machine).
        scale_fix = mb * 1e6 / len(text.encode("utf-8"))
        if abs(scale_fix - 1) > 0.05:
            snap = grow(seed, side, scale * scale_fix)
            text = store.dumps(snap)
        path = os.path.join(out_dir, f"{side}.json")
        store.atomic_write_text(path, text, force=True)
        written.append(path)
        print(f"wrote {path}: {os.path.getsize(path) / 1e6:.1f} MB", file=sys.stderr)
    return written


def _timed(argv: List[str], limit_as_mb: int = 0) -> Dict[str, Any]:
    """One run of the real CLI under /usr/bin/time -v: wall seconds, peak RSS (MB), exit code, last stderr line."""
    env = dict(os.environ)
    env.pop("ENVSNAP_DEBUG", None)
    prefix = f"ulimit -v {limit_as_mb * 1024}; " if limit_as_mb else ""
    command = prefix + "exec /usr/bin/time -v " + " ".join(f"'{a}'" for a in [sys.executable, "-m", "envsnap", *argv])
    result = subprocess.run(["bash", "-c", command], capture_output=True, text=True, env=env, cwd=ROOT, timeout=1200)
    fields = {}
    for line in result.stderr.splitlines():
        if ":" in line and line.startswith("\t"):
            name, _, value = line.strip().rpartition(": ")
            fields[name] = value
    wall = fields.get("Elapsed (wall clock) time (h:mm:ss or m:ss)", "0:0")
    parts = [float(x) for x in wall.split(":")]
    seconds = sum(x * 60 ** i for i, x in enumerate(reversed(parts)))
    own = [line for line in result.stderr.splitlines() if not line.startswith("\t") and "Command" not in line]
    return {"seconds": seconds, "peak_rss_mb": int(fields.get("Maximum resident set size (kbytes)", 0)) / 1024,
            "exit": int(fields.get("Exit status", result.returncode)), "last_line": (own or [""])[-1][:200]}


def measure(out_dir: str, repeat: int, limit_as_mb: int) -> Dict[str, Any]:
    good, bad = os.path.join(out_dir, "good.json"), os.path.join(out_dir, "bad.json")
    report = os.path.join(out_dir, "report.html")
    commands = {"diff": ["diff", good, bad, "--format", "text"],
                "report": ["report", good, bad, "-o", report, "--force"]}
    runs: Dict[str, List[Dict[str, Any]]] = {name: [] for name in commands}
    for _ in range(repeat):  # alternating, so a busy neighbour slows both alike
        for name, argv in commands.items():
            runs[name].append(_timed(argv))
    out: Dict[str, Any] = {"size_mb": {s: round(os.path.getsize(p) / 1e6, 1) for s, p in (("good", good), ("bad", bad))}}
    for name, results in runs.items():
        out[name] = {"median_s": round(statistics.median(r["seconds"] for r in results), 2),
                     "median_peak_rss_mb": round(statistics.median(r["peak_rss_mb"] for r in results)),
                     "exits": sorted({r["exit"] for r in results}), "runs": len(results)}
    if limit_as_mb:
        for name, argv in commands.items():
            limited = _timed(argv, limit_as_mb)
            out[f"{name}_under_{limit_as_mb}MB_AS"] = {"exit": limited["exit"], "seconds": limited["seconds"],
                                                       "last_line": limited["last_line"]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--mb", type=float, default=109.0)
    parser.add_argument("--measure", action="store_true", help="time diff and report on the pair in OUT_DIR")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--limit-as-mb", type=int, default=0)
    args = parser.parse_args()
    if not args.measure or not os.path.exists(os.path.join(args.out_dir, "good.json")):
        write_pair(args.out_dir, args.mb)
    if args.measure:
        print(json.dumps(measure(args.out_dir, args.repeat, args.limit_as_mb), indent=1))


if __name__ == "__main__":
    main()
