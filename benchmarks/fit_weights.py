"""Fit the ranking's factor weights on the corpus of planted regressions; write envsnap/analysis/rank/weights.json.

    .venv/bin/python benchmarks/fit_weights.py [--corpus benchmarks/corpus] [--l2 0.1] [--min-families 3]
        [--no-drop-test] [-o envsnap/analysis/rank/weights.json] [--dry-run]

The model: a cause's log-raw score s = sum_f w_f * log(value_f), the prior a factor like the others
(benchmarks/corpus/scoring.py); all w = 1 is today's ranking exactly. The fit minimises a pairwise ranking loss
(logistic, on the truth's s minus each innocent's of the same scenario and reach tier, every scenario weighing
the same) + l2 * sum (w - 1)^2, with scipy's L-BFGS-B from all ones: deterministic.

Reported for removal (not removed: that is the ranking's owner's call):
- a factor that separates truth from innocents in fewer than --min-families families (kept at 1.0, not fitted);
- a fitted factor whose removal (w = 0) does not lower leave-one-family-out top-1-alone accuracy.

weights.json: {"weights": {factor: w}, "fitted_on": {families, scenarios, date, corpus_hash},
"held_out": {LOFO figures with the fitted model, and today's}, "removal": {...}}, sorted keys.
"""
from __future__ import annotations

import argparse
import datetime
import hashlib
import json
import os
import sys
from typing import Any, Dict, List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# envsnap from this checkout, ahead of an installed copy: run from a worktree of another commit, this judges that
# commit's ranking (an editable install of another checkout would otherwise win).
sys.path.insert(0, os.path.dirname(HERE))

from corpus import scoring  # noqa: E402
from ranking_accuracy import DEFAULT_CORPUS, analyse, scenario_dirs  # noqa: E402

DEFAULT_OUTPUT = os.path.join(os.path.dirname(HERE), "envsnap", "analysis", "rank", "weights.json")


def corpus_hash(dirs: Sequence[str]) -> str:
    """sha256 over every scenario file's relative path and bytes, in order: which corpus the fit saw."""
    digest = hashlib.sha256()
    for directory in dirs:
        for name in ("truth.json", "good.json.gz", "bad.json.gz"):
            path = os.path.join(directory, name)
            digest.update(os.path.relpath(path, os.path.dirname(os.path.dirname(directory))).encode())
            with open(path, "rb") as handle:
                digest.update(hashlib.sha256(handle.read()).digest())
    return digest.hexdigest()


def lofo_summary(scenarios: Sequence[Dict[str, Any]], **options: Any) -> Dict[str, Any]:
    held = scoring.leave_one_family_out(scenarios, **options)
    return scoring.summarize([j for v in held.values() for j in v["judged"]])


def drop_test(scenarios: Sequence[Dict[str, Any]], fitted: Sequence[str], baseline: float,
              **options: Any) -> List[Dict[str, Any]]:
    """Each fitted weight pinned back to today's 1.0 (left unfitted): LOFO top-1-alone without its fit; listed when
    not lower -- the held-out families do not support fitting it."""
    out = []
    for name in fitted:
        without = lofo_summary(scenarios, fixed={name: 1.0}, **options)
        if without["top1_alone"] is not None and without["top1_alone"] >= baseline:
            out.append({"factor": name, "lofo_top1_alone_without": without["top1_alone"],
                        "lofo_top1_alone_with": baseline})
    return out


def build(scenarios: Sequence[Dict[str, Any]], dirs: Sequence[str], l2: float, min_families: int,
          drop: bool = True) -> Dict[str, Any]:
    options = {"l2": l2, "min_families": min_families}
    result = scoring.fit(scenarios, **options)
    lofo = lofo_summary(scenarios, **options)
    today = scoring.summarize([scoring.judge(s["causes"], {}) for s in scenarios])
    shipped = scoring.summarize([scoring.judge(s["causes"], None) for s in scenarios])
    removal = {"too_few_families": {name: result["support"][name] for name in result["unsupported"]},
               "no_held_out_gain": drop_test(scenarios, result["fitted"], lofo["top1_alone"] or 0.0, **options)
               if drop else "not tested (--no-drop-test)"}
    families = sorted({s["family"] for s in scenarios})
    # A weight the data cannot support is removed (it keeps today's 1.0): one whose factor is seen in too few
    # families is never fitted; one whose held-out accuracy is as good without it is dropped here.
    dropped = sorted(entry["factor"] for entry in removal["no_held_out_gain"]) if drop else []
    weights = {name: w for name, w in result["weights"].items() if name not in dropped and w != 1.0}
    return {
        "weights": weights,
        "fitted": result["weights"],
        "fitted_on": {"families": families, "scenarios": len(scenarios), "pairs": result["pairs"],
                      "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
                      "corpus_hash": corpus_hash(dirs), "l2": l2, "min_families": min_families},
        "held_out": {"method": "leave-one-family-out", "fitted": lofo, "all_weights_1": today,
                     "shipped_ranks": shipped},
        "removal": removal,
    }


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", default=DEFAULT_CORPUS)
    parser.add_argument("--l2", type=float, default=0.1)
    parser.add_argument("--min-families", type=int, default=3)
    parser.add_argument("--no-drop-test", action="store_true", help="skip the per-factor LOFO drop test")
    parser.add_argument("-o", "--output", default=DEFAULT_OUTPUT)
    parser.add_argument("--dry-run", action="store_true", help="print the file instead of writing it")
    args = parser.parse_args(argv)
    dirs = scenario_dirs(args.corpus)
    if len({os.path.basename(os.path.dirname(d)) for d in dirs}) < 2:
        print(f"fit_weights: need scenarios of 2 families or more under {args.corpus}", file=sys.stderr)
        return 2
    scenarios = [analyse(d) for d in dirs]
    text = json.dumps(build(scenarios, dirs, args.l2, args.min_families, drop=not args.no_drop_test),
                      indent=2, sort_keys=True) + "\n"
    if args.dry_run:
        print(text, end="")
        return 0
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(tmp, args.output)
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
