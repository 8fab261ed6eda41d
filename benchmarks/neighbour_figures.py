"""The figures of a neighbours check (benchmarks/gpu_neighbour_check.sh; also any GOOD/BAD pair measured with
`envsnap run`): the mechanism's kind and line, each neighbour cause's rank, score and evidence, the first
innocent cause and the margin to it, what the runs recorded of the other processes (on the GPUs: pid,
command or why there is none, memory, SM utilisation), and what sampling cost the runs.

    python benchmarks/neighbour_figures.py DIFF.json GOOD.json BAD.json [--figures FIGURES.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys


def _runs(path: str) -> list:
    with open(path, encoding="utf-8") as handle:
        return [r for r in json.load(handle).get("runs") or [] if r.get("ok") and isinstance(r.get("telemetry"), dict)]


def _cost(runs: list) -> dict:
    sampler = [r["telemetry"].get("sampler_cpu_s", 0) / r["telemetry"]["wall_s"] for r in runs if r["telemetry"].get("wall_s")]
    scans = [(r["telemetry"].get("neighbours") or {}).get("scan_cpu_s", 0) / r["telemetry"]["wall_s"]
             for r in runs if r["telemetry"].get("wall_s")]
    return {"sampler_thread_pct_of_one_cpu": round(statistics.median(sampler) * 100, 3) if sampler else None,
            "neighbour_scans_pct_of_one_cpu": round(statistics.median(scans) * 100, 3) if scans else None}


def _gpu_others(runs: list) -> list:
    seen = {}
    for run in runs:
        for index, gpu in ((run["telemetry"].get("neighbours") or {}).get("gpus") or {}).items():
            for proc in gpu.get("processes") or []:
                if proc.get("own") is not True:
                    seen[(index, proc.get("pid"))] = {"gpu": index, **{k: proc.get(k) for k in (
                        "pid", "own", "command", "why", "used_memory_bytes", "sm_util_pct_mean", "seen")}}
    return list(seen.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("diff")
    parser.add_argument("good")
    parser.add_argument("bad")
    parser.add_argument("--figures", help="merge the figures into this JSON file")
    args = parser.parse_args()
    with open(args.diff, encoding="utf-8") as handle:
        result = json.load(handle)
    causes = result["causes"]
    mechanism = result["verdict"].get("mechanism") or {}
    planted = [c for c in causes if c.get("where") == "neighbour"]
    first_neighbour = planted[0] if planted else None
    innocent = next((c for c in causes if c is not first_neighbour), None)
    figures = {
        "verdict": result["verdict"].get("summary"),
        "mechanism_kind": mechanism.get("kind"), "mechanism_line": mechanism.get("line"),
        "mechanism_neighbours": mechanism.get("neighbours"),
        "neighbour_causes": [{"key": c["key"][:160], "rank": c["rank"], "tied": c.get("tied"), "score": c["score"],
                              "evidence": c["evidence"][1:]} for c in planted[:4]],
        "first_innocent": innocent and {"key": innocent["key"][:160], "rank": innocent["rank"], "score": innocent["score"]},
        "margin": round(first_neighbour["score"] - innocent["score"], 3) if first_neighbour and innocent else None,
        "neighbours_summary": (result.get("neighbours") or {}).get("summary"),
        "gpu_others_good": _gpu_others(_runs(args.good)), "gpu_others_bad": _gpu_others(_runs(args.bad)),
        "cost_good": _cost(_runs(args.good)), "cost_bad": _cost(_runs(args.bad)),
    }
    print(json.dumps(figures, indent=1))
    if args.figures:
        data = {}
        if os.path.exists(args.figures):
            with open(args.figures, encoding="utf-8") as handle:
                data = json.load(handle)
        data["neighbours"] = figures
        with open(args.figures, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=1, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
