"""How often envsnap's ranking puts the planted cause first, alone: on the stored corpus of planted regressions.

    .venv/bin/python benchmarks/ranking_accuracy.py [--corpus benchmarks/corpus] [--family F ...] [--json]
        [--no-lofo] [--l2 0.1] [--min-families 3]

Every scenario (benchmarks/corpus/<family>/<variant>/: good.json.gz, bad.json.gz, truth.json) is analysed
once with the CURRENT envsnap code (envsnap.analysis.result.analyze, as `envsnap diff --format json`), and
judged twice:

(a) shipped: the ranking's own ranks and scores (today's weights, or weights.json as the runtime reads it);
(b) leave-one-family-out (LOFO): for each family, weights fitted (benchmarks/fit_weights.py's fit) on the
    OTHER families only, then the family re-scored with them: how envsnap fares on a family nobody showed it.

Per scenario: top-1-alone (rank 1 holds only the truth's keys), the truth's rank, and the margin = the truth's
score minus the first innocent's (0..1 scores). Prints a markdown table per family and overall figures; with
--json, the same as one JSON object. Needs numpy and scipy for (b) (benchmarks/requirements.txt).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# envsnap from this checkout, ahead of an installed copy: run from a worktree of another commit, this judges that
# commit's ranking (an editable install of another checkout would otherwise win).
sys.path.insert(0, os.path.dirname(HERE))

from corpus import scoring  # noqa: E402  (benchmarks/ on the path, like the other scripts' helpers)

DEFAULT_CORPUS = os.path.join(HERE, "corpus")


def scenario_dirs(corpus: str, families: Optional[Sequence[str]] = None) -> List[str]:
    """Every <family>/<variant>/ under the corpus that holds a truth.json, sorted."""
    out = []
    for family in sorted(os.listdir(corpus)):
        if families and family not in families:
            continue
        fam_dir = os.path.join(corpus, family)
        if not os.path.isdir(fam_dir):
            continue
        for variant in sorted(os.listdir(fam_dir)):
            if os.path.isfile(os.path.join(fam_dir, variant, "truth.json")):
                out.append(os.path.join(fam_dir, variant))
    return out


def _load(path: str) -> Dict[str, Any]:
    from envsnap.capture.collectors import SECTION_SHAPES
    from envsnap.model import store

    with open(path, "rb") as handle:
        raw = handle.read()
    if path.endswith(".gz"):
        raw = gzip.decompress(raw)
    return store.load_bytes(raw, path, shapes=SECTION_SHAPES)


def analyse(directory: str) -> Dict[str, Any]:
    """One scenario analysed with the current code: its truth and its causes reduced to features."""
    from envsnap.analysis.result import analyze

    with open(os.path.join(directory, "truth.json"), encoding="utf-8") as handle:
        truth = json.load(handle)
    result = analyze(_load(os.path.join(directory, "good.json.gz")), _load(os.path.join(directory, "bad.json.gz")))
    return {"family": truth["family"], "variant": truth["variant"], "mechanism": truth.get("mechanism"),
            "truth_keys": truth["truth_keys"], "measured_change_pct": truth.get("measured_change_pct"),
            "causes": scoring.reduce_causes(result["causes"], truth["truth_keys"])}


def family_rows(scenarios: Sequence[Dict[str, Any]], judged_by_family: Dict[str, List[Dict[str, Any]]]
                ) -> List[Dict[str, Any]]:
    rows = []
    for family in sorted(judged_by_family):
        judged = judged_by_family[family]
        summary = scoring.summarize(judged)
        misses = [{"variant": j["variant"], "truth_rank": j["truth_rank"], "first": j["first_innocent"]}
                  for j in judged if not j["top1_alone"]]
        rows.append({"family": family, "variants": len(judged),
                     "innocents_median": statistics.median(j["innocents"] for j in judged),
                     "top1_alone": summary["top1_alone"], "median_margin": summary["median_margin"],
                     "misses": misses})
    return rows


def evaluate(scenarios: Sequence[Dict[str, Any]], lofo: bool = True, l2: float = 0.1, min_families: int = 3
             ) -> Dict[str, Any]:
    """Shipped and LOFO figures, per family and overall, of analysed scenarios."""
    shipped: Dict[str, List[Dict[str, Any]]] = {}
    for s in scenarios:
        shipped.setdefault(s["family"], []).append(dict(scoring.judge(s["causes"]), variant=s["variant"]))
    out: Dict[str, Any] = {
        "scenarios": len(scenarios), "families": len(shipped),
        "shipped": {"overall": scoring.summarize([j for js in shipped.values() for j in js]),
                    "families": family_rows(scenarios, shipped)}}
    if lofo and len(shipped) > 1:
        held = scoring.leave_one_family_out(scenarios, l2=l2, min_families=min_families)
        judged = {family: v["judged"] for family, v in held.items()}
        out["lofo"] = {"overall": scoring.summarize([j for js in judged.values() for j in js]),
                       "families": family_rows(scenarios, judged),
                       "l2": l2, "min_families": min_families}
    return out


def _pct(x: Optional[float]) -> str:
    return "-" if x is None else f"{100 * x:.0f} %"


def _num(x: Optional[float]) -> str:
    return "-" if x is None else f"{x:+.3f}"


def _misses(misses: Sequence[Dict[str, Any]]) -> str:
    parts = []
    for m in misses:
        first = m["first"]
        what = "none" if first is None else f"`{first['key']}` ({', '.join(first['top_factors'])})"
        parts.append(f"{m['variant']}: truth rank {m['truth_rank'] if m['truth_rank'] is not None else 'absent'}, "
                     f"first {what}")
    return "; ".join(parts) or "-"


def markdown(report: Dict[str, Any]) -> str:
    lines = [f"{report['families']} families, {report['scenarios']} scenarios; analysis {report['analysis_s']:.1f} s", ""]
    lofo = {r["family"]: r for r in report.get("lofo", {}).get("families", [])}
    lines += ["| family | variants | innocents (median) | top-1-alone shipped | margin shipped | "
              "top-1-alone LOFO | margin LOFO | misses (shipped) | misses (LOFO) |",
              "|---|---|---|---|---|---|---|---|---|"]
    for row in report["shipped"]["families"]:
        held = lofo.get(row["family"], {})
        lines.append(f"| {row['family']} | {row['variants']} | {row['innocents_median']:g} | {_pct(row['top1_alone'])} | "
                     f"{_num(row['median_margin'])} | {_pct(held.get('top1_alone'))} | {_num(held.get('median_margin'))} | "
                     f"{_misses(row['misses'])} | {_misses(held.get('misses', []))} |")
    lines.append("")
    for name in ("shipped", "lofo"):
        if name in report:
            overall = report[name]["overall"]
            lines.append(f"**{name}**: top-1-alone {_pct(overall['top1_alone'])} of {overall['scenarios']}, "
                         f"median margin {_num(overall['median_margin'])}")
    return "\n".join(lines)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--family", action="append", help="show only this family's row (repeatable); the "
                                                          "overall figures and LOFO fits still use every family")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the markdown table")
    parser.add_argument("--no-lofo", action="store_true", help="shipped ranking only")
    parser.add_argument("--l2", type=float, default=0.1, help="pull of every weight toward 1.0 (default 0.1)")
    parser.add_argument("--min-families", type=int, default=3, help="a factor is fitted only when it separates "
                                                                     "truth from innocents in this many families")
    args = parser.parse_args(argv)
    dirs = scenario_dirs(args.corpus)
    if not dirs:
        print(f"ranking_accuracy: no scenarios under {args.corpus}", file=sys.stderr)
        return 2
    started = time.perf_counter()
    scenarios = [analyse(d) for d in dirs]
    analysis_s = time.perf_counter() - started
    report = evaluate(scenarios, lofo=not args.no_lofo, l2=args.l2, min_families=args.min_families)
    if args.family:
        for part in ("shipped", "lofo"):
            if part in report:
                rows = [r for r in report[part]["families"] if r["family"] in args.family]
                report[part]["families"] = rows
    report["analysis_s"] = round(analysis_s, 2)
    report["total_s"] = round(time.perf_counter() - started, 2)
    if args.json:
        print(json.dumps(report, indent=2, sort_keys=True))
    else:
        print(markdown(report))
        print(f"\n(total {report['total_s']:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
