#!/usr/bin/env python3
"""Scale: load, diff/rank and render two large snapshots; print time, size and peak memory.

The snapshots start as real captures of this environment (the venv's torch and other
distributions, this host, this process tree) and are grown where a real capture here
cannot reach the sizes the targets are about: 600 distributions, 20,000 modified
installed files (integrity entries), 8 worker processes with 300 environment variables
each (each with its probe record), plus five measured runs a side. The grown parts
follow the snapshot format's section layouts (model/schema.py); GOOD and BAD differ in a realistic way
(5 versions, 50 integrity entries, a few variables, one worker variable, a GPU power
limit, the runs' metric); a stress pair where a tenth of everything differs is timed too.

Each figure is measured in a fresh interpreter (so peak RSS is that step's alone),
best of --repeat runs (the first, cold call is shown too):
  load        store.load of both files (JSON parse + full shape validation)
  diff+rank   result_mod.analyze(good, bad): differences, verdict with bootstrap, ranked causes
  text        text_mod.render_diff of the result
  report      html_mod.render_report of the analysis with its tables: the self-contained HTML page, and its size
  cli diff    `envsnap diff GOOD BAD --format json` end to end, as a user runs it
  cli report  `envsnap report GOOD BAD -o r.html` end to end
Targets: diff+rank <= 0.3 s; report render < 1 s and < 5 MB; memory bounded.

    .venv/bin/python benchmarks/scale.py [--packages 600] [--integrity 20000] [--workers 8]
                                         [--worker-vars 300] [--repeat 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Tuple

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TARGETS = {"diff_rank_s": 0.3, "report_render_s": 1.0, "report_bytes": 5 * 1024 * 1024}


def real_capture(path: str, env_extra: Dict[str, str]) -> None:
    env = dict(os.environ)
    env.pop("ENVSNAP_DEBUG", None)
    env.update(env_extra)
    result = subprocess.run([sys.executable, "-m", "envsnap", "capture", "-o", path, "--force", "--timeout", "60",
                             "--pid", str(os.getpid())], env=env, capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise SystemExit(f"capture failed: {result.stderr.strip()}")


def _hex(rnd: random.Random, n: int = 64) -> str:
    return "%0*x" % (n, rnd.getrandbits(n * 4))


def grow(snap: Dict[str, Any], side: str, packages: int, integrity: int, workers: int, worker_vars: int,
         changed: int = 50) -> None:
    """Grow a real snapshot to the target sizes (contract layouts); `side` 'good'/'bad' sets the differences.

    `changed`: how many integrity entries (and a tenth as many packages) differ between the
    sides: 50 is a patched package or two; 2,000 (a tenth of them) is a stress case."""
    bad = side == "bad"
    rnd = random.Random(1234)  # the same base on both sides; differences are explicit below
    sections = snap["sections"]
    pkgs = sections.setdefault("packages", {"status": "ok", "data": {}})
    pkgs["status"] = "ok"
    data = pkgs.setdefault("data", {})
    dists = data.setdefault("dists", {})
    location = next((d.get("location") for d in dists.values() if d.get("location")), "/venv/lib/python3.11/site-packages")
    i = 0
    while len(dists) < packages:
        name = f"scale-pkg-{i:04d}"
        version = f"1.{i % 50}.{(1 if bad and i < max(1, changed // 10) else 0)}"
        dists[name] = {"name": name, "version": version, "installer": "pip", "location": location,
                       "origin": {"kind": "index", "editable": False}}
        i += 1
    data["count"] = len(dists)
    names = sorted(dists)
    integ = data.setdefault("integrity", {"mode": "py", "checked_files": 0, "modified": {}, "missing": {},
                                          "rewritten_scripts": {}, "unhashable": {}, "errors": {}})
    modified = integ.setdefault("modified", {})
    for j in range(integrity - len(modified)):
        dist = names[j % len(names)]
        recorded = _hex(rnd)
        actual = _hex(rnd)
        edited = bad and j < changed
        if edited:
            actual = _hex(random.Random(j))
        modified[f"{dist.replace('-', '_')}/module_{j:05d}.py"] = {
            "dist": dist, "recorded_sha256": recorded, "actual_sha256": actual,
            "recorded_size": 1000 + j, "actual_size": 1000 + j + (7 if edited else 0)}
    integ["checked_files"] = max(integ.get("checked_files") or 0, integrity * 3)

    env_vars = sections.setdefault("env", {"status": "ok", "data": {"vars": {}}})["data"].setdefault("vars", {})
    env_vars.update({"NCCL_PROTO": "LL128" if bad else "Simple", "SGLANG_ENABLE_SPEC_V2": "1" if bad else "0",
                     "OMP_NUM_THREADS": "4" if bad else "8"})
    procs = {"sglang-main": {"pid": 4000, "ppid": 1, "parent_key": None, "title": "sglang::main",
                             "cmdline": ["python3", "-m", "sglang.launch_server", "--tp-size", str(workers)],
                             "role": {"kind": "main"}, "status": "ok", "environ_status": "ok",
                             "environ": dict(env_vars), "num_threads": 12, "nice": 0, "cpu_affinity": list(range(16))}}
    records = {}
    for w in range(workers):
        wenv = {f"SCALE_WORKER_VAR_{k:03d}": f"value-{k}" for k in range(worker_vars - 3)}
        wenv.update({"NCCL_PROTO": env_vars["NCCL_PROTO"], "LOCAL_RANK": str(w), "RANK": str(w)})
        if bad and w == 3:
            wenv["NCCL_ALGO"] = "Tree"  # one worker diverges: a classic
        key = f"scheduler_TP{w}"
        procs[key] = {"pid": 4100 + w, "ppid": 4000, "parent_key": "sglang-main", "title": f"sglang::scheduler_TP{w}",
                      "cmdline": ["python3", "-c", "from multiprocessing.spawn import spawn_main"],
                      "role": {"kind": "scheduler", "tp": w, "dp": 0, "pp": 0}, "status": "ok",
                      "environ_status": "ok", "environ": wenv, "num_threads": 64, "nice": 0,
                      "cpu_affinity": list(range(w * 16, w * 16 + 16)), "gpus": [w],
                      "divergence": {"added": {"LOCAL_RANK": str(w)}, "removed": [], "changed": {}}}
        records[key] = {"pid": 4100 + w, "ppid": 4000, "argv": ["python3"], "title": f"sglang::scheduler_TP{w}",
                        "env_at_start": wenv, "env_at_init": wenv,
                        "init": {"backend": "nccl", "rank": w, "world_size": workers, "nccl_version": "2.21.5"}}
    sections["processes"] = {"status": "ok", "elapsed_s": 0.2, "data": {"processes": procs, "roots": ["sglang-main"],
                                                                       "errors": {}}}
    sections["probe"] = {"status": "ok", "elapsed_s": 0.05, "data": {"dir": "/tmp/probe", "records": records}}
    gpus = {str(g): {"name": "NVIDIA H200", "uuid": f"GPU-{g:04d}", "memory": {"total_bytes": 150754820096},
                     "power": {"limit_w": 600.0 if bad and g == 0 else 700.0, "default_limit_w": 700.0},
                     "clocks": {"max": {"sm": 1980, "mem": 3201}}, "persistence_mode": "Enabled",
                     "pcie": {"current_gen": 5, "max_gen": 5}, "numa_node": g // 4} for g in range(workers)}
    sections["nvidia"] = {"status": "ok", "elapsed_s": 0.3, "data": {"driver_version": "570.86.15", "count": workers,
                                                                     "gpus": gpus, "source": "nvml"}}
    base = 700.0 if bad else 1000.0
    snap["runs"] = [{"ok": True, "exit_code": 0, "duration_s": 60.0, "started": "2026-01-01T00:00:00Z",
                     "metrics": {"output_throughput": base * (1 + 0.01 * ((r * 7) % 5 - 2)),
                                 "accept_length": 3.2 + 0.01 * r, "verify_ms": 29.0 + (6.0 if bad else 0.0)},
                     "output_tail": "ok", "command": ["bench"], "source": "run", "parsers": ["json_line"]}
                    for r in range(5)]
    snap["label"] = side


_STEP = r"""
import json, resource, sys, time
from envsnap.model import store
from envsnap.analysis import result as result_mod
from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.render import text as text_mod
step, good_path, bad_path, repeat = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
best = float("inf")
extra = {}
good = bad = result = None
if step != "load":
    good, bad = store.load(good_path, SECTION_SHAPES), store.load(bad_path, SECTION_SHAPES)
if step in ("text", "report"):
    result = result_mod.analyze(good, bad, tables=step == "report")
first = None
for _ in range(repeat):
    t0 = time.perf_counter()
    if step == "load":
        store.load(good_path, SECTION_SHAPES); store.load(bad_path, SECTION_SHAPES)
    elif step == "diff_rank":
        out = result_mod.analyze(good, bad)
        extra = {"differences": len(out["differences"]), "causes": len(out["causes"])}
    elif step == "text":
        text_mod.render_diff(result)
    elif step == "report":
        from envsnap.render import html as html_mod
        html = html_mod.render_report(result)
        extra = {"bytes": len(html.encode("utf-8"))}
    took = time.perf_counter() - t0
    first = took if first is None else first
    best = min(best, took)
extra.update({"seconds": best, "cold_seconds": first,
              "peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss})
print(json.dumps(extra))
"""


def measure_step(step: str, good: str, bad: str, repeat: int) -> Dict[str, Any]:
    result = subprocess.run([sys.executable, "-c", _STEP, step, good, bad, str(repeat)], capture_output=True,
                            text=True, timeout=600, cwd=ROOT)
    if result.returncode != 0:
        raise SystemExit(f"step {step} failed: {result.stderr.strip()[-2000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# The CLI's own peak RSS: wait4's ru_maxrss of a child includes what its parent had mapped when it
# forked (this script holds the snapshots it built), so a tiny launcher (python -S) forks it.
_LAUNCHER = r"""
import json, os, subprocess, sys, time
start = time.perf_counter()
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(proc.pid, 0)
print(json.dumps({"code": os.waitstatus_to_exitcode(status), "seconds": time.perf_counter() - start,
                  "peak_rss_kb": usage.ru_maxrss}))
"""


def measure_cli(argv: List[str], repeat: int) -> Tuple[float, int]:
    """Best wall time of a real CLI run, and its peak RSS (KiB)."""
    best, rss = float("inf"), 0
    env = dict(os.environ)
    env.pop("ENVSNAP_DEBUG", None)
    for _ in range(repeat):
        out = subprocess.run([sys.executable, "-S", "-c", _LAUNCHER, sys.executable, "-m", "envsnap", *argv],
                             capture_output=True, text=True, env=env, cwd=ROOT, timeout=600)
        fig = json.loads(out.stdout.strip().splitlines()[-1])
        if fig["code"] not in (0, 1):
            raise SystemExit(f"envsnap {' '.join(argv)} exited {fig['code']}")
        best = min(best, fig["seconds"])
        rss = max(rss, fig["peak_rss_kb"])
    return best, rss


def build(directory: str, packages: int, integrity: int, workers: int, worker_vars: int,
          grown: bool = True, changed: int = 50) -> Tuple[str, str]:
    """GOOD and BAD files in `directory`: real captures, grown to the sizes unless `grown` is False."""
    from envsnap.model import store

    paths = []
    for side in ("good", "bad"):
        path = os.path.join(directory, f"{side}{'' if grown else '-real'}{'' if changed == 50 else f'-{changed}'}.json")
        env = {"ENVSNAP_SCALE_SIDE": side, "NCCL_PROTO": "LL128" if side == "bad" else "Simple"}
        real_capture(path, env)
        if grown:
            snap = store.load(path)
            grow(snap, side, packages, integrity, workers, worker_vars, changed)
            store.save(snap, path, force=True)
        paths.append(path)
    return paths[0], paths[1]


def run(packages: int = 600, integrity: int = 20000, workers: int = 8, worker_vars: int = 300,
        repeat: int = 3, directory: str = "") -> Dict[str, Any]:
    owned = not directory
    directory = directory or tempfile.mkdtemp(prefix="envsnap-scale-")
    real_good, real_bad = build(directory, 0, 0, 0, 0, grown=False)
    real = {step: measure_step(step, real_good, real_bad, repeat) for step in ("load", "diff_rank", "report")}
    real["bytes"] = os.path.getsize(real_good)
    good, bad = build(directory, packages, integrity, workers, worker_vars)
    sizes = {"packages": packages, "integrity_entries": integrity, "workers": workers, "vars_per_worker": worker_vars,
             "good_bytes": os.path.getsize(good), "bad_bytes": os.path.getsize(bad)}
    figures: Dict[str, Any] = {"real_as_captured": real, "sizes": sizes}
    for step in ("load", "diff_rank", "text", "report"):
        figures[step] = measure_step(step, good, bad, repeat)
    seconds, rss = measure_cli(["diff", good, bad, "--format", "json"], repeat)
    figures["cli_diff"] = {"seconds": seconds, "peak_rss_kb": rss}
    html = os.path.join(directory, "r.html")
    seconds, rss = measure_cli(["report", good, bad, "-o", html, "--force"], repeat)
    figures["cli_report"] = {"seconds": seconds, "peak_rss_kb": rss, "bytes": os.path.getsize(html)}
    stress_good, stress_bad = build(directory, packages, integrity, workers, worker_vars, changed=integrity // 10)
    figures["stress_2000_changed"] = {step: measure_step(step, stress_good, stress_bad, repeat)
                                      for step in ("diff_rank", "report")}
    figures["targets_met"] = {
        "diff_rank <= 0.3 s": figures["diff_rank"]["seconds"] <= TARGETS["diff_rank_s"],
        "report render < 1 s": figures["report"]["seconds"] < TARGETS["report_render_s"],
        "report < 5 MB": figures["report"]["bytes"] < TARGETS["report_bytes"],
    }
    if owned:
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, default=600)
    parser.add_argument("--integrity", type=int, default=20000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--worker-vars", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    figures = run(args.packages, args.integrity, args.workers, args.worker_vars, args.repeat)
    if args.json:
        print(json.dumps(figures, indent=1, sort_keys=True))
        return
    real = figures["real_as_captured"]
    print(f"real captures of this environment, as they are ({real['bytes'] / 1024:.0f} KiB each):")
    print(f"  load both {real['load']['seconds'] * 1000:.1f} ms, diff+rank {real['diff_rank']['seconds'] * 1000:.1f} ms, "
          f"report render {real['report']['seconds'] * 1000:.1f} ms ({real['report']['bytes'] / 1024:.0f} KiB), "
          f"peak RSS {max(v['peak_rss_kb'] for k, v in real.items() if isinstance(v, dict)) / 1024:.0f} MiB")
    s = figures["sizes"]
    print(f"snapshots: {s['packages']} distributions, {s['integrity_entries']} integrity entries, {s['workers']} workers x "
          f"{s['vars_per_worker']} vars; files {s['good_bytes'] / 2**20:.1f} + {s['bad_bytes'] / 2**20:.1f} MiB")
    rows = [("load (both, parse + validate)", figures["load"]), ("diff+rank (result_mod.analyze)", figures["diff_rank"]),
            ("text render", figures["text"]), ("report render (HTML)", figures["report"]),
            ("envsnap diff --format json (CLI)", figures["cli_diff"]), ("envsnap report (CLI)", figures["cli_report"])]
    for label, fig in rows:
        size = f"  {fig['bytes'] / 2**20:.2f} MiB" if "bytes" in fig else ""
        cold = f" (first call {fig['cold_seconds'] * 1000:.0f} ms)" if "cold_seconds" in fig else ""
        print(f"  {label:<36} {fig['seconds'] * 1000:8.1f} ms   peak RSS {fig['peak_rss_kb'] / 1024:6.0f} MiB{size}{cold}")
    print(f"  differences {figures['diff_rank'].get('differences')}, causes {figures['diff_rank'].get('causes')}")
    stress = figures["stress_2000_changed"]
    print(f"stress: a tenth of the integrity entries ({s['integrity_entries'] // 10}) and {s['integrity_entries'] // 100} "
          f"packages differ: diff+rank {stress['diff_rank']['seconds'] * 1000:.0f} ms (first call "
          f"{stress['diff_rank']['cold_seconds'] * 1000:.0f} ms, {stress['diff_rank'].get('differences')} differences), "
          f"report {stress['report']['seconds'] * 1000:.0f} ms, {stress['report']['bytes'] / 2**20:.2f} MiB")
    for target, met in figures["targets_met"].items():
        print(f"  target {target}: {'met' if met else 'MISSED'}")


if __name__ == "__main__":
    sys.path.insert(0, ROOT)
    main()
