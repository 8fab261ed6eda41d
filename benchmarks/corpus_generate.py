"""Generate the corpus of planted regressions: real setups, real benchmark runs, captured by the real CLI.

    nice -n 5 .venv/bin/python benchmarks/corpus_generate.py [--family F ...] [--variants 4] [--seed 1]
        [--force] [--out benchmarks/corpus] [--keep]

Each family (benchmarks/corpus/families/<family>.py) plants one kind of cause into a scene
(benchmarks/corpus/scene.py: a fresh venv with real wheels, a git checkout, watched files, a CPU benchmark);
each variant differs in value, magnitude, placement or process (drawn from a random generator seeded by
seed, family and variant) and carries 20+ innocent differences (benchmarks/corpus/innocents.py). GOOD and BAD
are captured with `envsnap run --repeat 4 --warmup 1`; a variant whose BAD is not measurably slower
(median change better than -10 %, or runs not fully separated) is planted again stronger (x2, twice at most)
and else left out, said on stderr.

Stored per scenario, under <out>/<family>/<variant>/: good.json.gz, bad.json.gz, truth.json. Existing
scenarios are kept unless --force: generation resumes where it stopped.
"""
from __future__ import annotations

import argparse
import gzip
import importlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from typing import List, Optional, Sequence

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from corpus import innocents, scene as scene_mod  # noqa: E402

CORPUS = os.path.join(HERE, "corpus")
FAMILIES_DIR = os.path.join(CORPUS, "families")
MIN_SLOWDOWN_PCT = 10.0
INNOCENTS = (20, 24)  # how many per variant, drawn


def families() -> List[str]:
    return sorted(name[:-3] for name in os.listdir(FAMILIES_DIR) if name.endswith(".py") and not name.startswith("_"))


def has_gpu() -> bool:
    """Whether this machine has an NVIDIA GPU (nvidia-smi lists one): the GPU families run only there."""
    import subprocess

    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def needs_gpu(family: str) -> bool:
    return bool(getattr(importlib.import_module(f"corpus.families.{family}"), "NEEDS_GPU", False))


def separated(good: str, bad: str) -> bool:
    """BAD's runs below GOOD's: every one (4 vs 4: p = 0.029, exact Mann-Whitney), or all but one pair
    (p = 0.057) where the box's noise put one run astray."""
    def values(path: str) -> List[float]:
        with open(path, encoding="utf-8") as handle:
            return [r["metrics"]["ops_per_sec"] for r in json.load(handle).get("runs") or []
                    if r.get("ok") and "ops_per_sec" in (r.get("metrics") or {})]
    g, b = values(good), values(bad)
    return bool(g) and bool(b) and sum(1 for x in b for y in g if x >= y) <= 1


def generate_one(family: str, variant_index: int, seed: int, out: str, keep: bool = False) -> Optional[str]:
    module = importlib.import_module(f"corpus.families.{family}")
    variant = f"v{variant_index + 1}"
    target = os.path.join(out, family, variant)
    for attempt in range(3):
        strength = 2.0 ** attempt
        rng = random.Random(f"{seed}/{family}/{variant}")
        # one fixed place per scenario: the keys that hold paths are the same whenever it is generated again
        root = os.path.join(tempfile.gettempdir(), "envsnap-corpus", f"{family}-{variant}")
        shutil.rmtree(root, ignore_errors=True)
        os.makedirs(os.path.dirname(root), exist_ok=True)
        scene = scene_mod.Scene(root=root, family=family, variant=variant)
        scene.link_base_venv = getattr(module, "LINK_BASE_VENV", False)
        module.plant(scene, rng, strength)
        count = rng.randint(*INNOCENTS)
        scene.innocents = innocents.plant(scene, rng, count, exclude=getattr(module, "EXCLUDE", ()))
        try:
            scene.build()
            prepare = getattr(module, "prepare", None)
            if prepare:
                prepare(scene)
            good, bad = os.path.join(root, "good.json"), os.path.join(root, "bad.json")
            scene.capture(scene.good, good)
            between = getattr(module, "between", None)
            if between:
                between(scene)
            scene.capture(scene.bad, bad)
            g, b = scene_mod.median_metric(good), scene_mod.median_metric(bad)
            change = None if not g or b is None else 100.0 * (b - g) / g
            if change is not None and change <= -MIN_SLOWDOWN_PCT and separated(good, bad):
                store(scene, module, good, bad, target, change, strength)
                return target
            print(f"{family}/{variant}: attempt {attempt + 1} (strength x{strength:g}) changed "
                  f"{'no metric' if change is None else f'{change:+.1f} %'}: planting stronger", file=sys.stderr)
        finally:
            if not keep:
                shutil.rmtree(root, ignore_errors=True)
    print(f"{family}/{variant}: the plant did not show in the metric; left out", file=sys.stderr)
    return None


def store(scene: scene_mod.Scene, module: object, good: str, bad: str, target: str, change: float,
          strength: float) -> None:
    tmp = target + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    for src, name in ((good, "good.json.gz"), (bad, "bad.json.gz")):
        with open(src, "rb") as handle, open(os.path.join(tmp, name), "wb") as raw:
            with gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=9, mtime=0, filename="") as gz:
                gz.write(handle.read())
    truth = {"family": scene.family, "variant": scene.variant, "mechanism": module.MECHANISM,
             "planted": scene.planted, "truth_keys": scene.truth_keys, "measured_change_pct": round(change, 1),
             "strength": strength, "innocents_planted": scene.innocents}
    with open(os.path.join(tmp, "truth.json"), "w", encoding="utf-8") as handle:
        json.dump(truth, handle, indent=2, sort_keys=True)
        handle.write("\n")
    shutil.rmtree(target, ignore_errors=True)
    os.replace(tmp, target)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--family", action="append", help="only this family (repeatable; default: all)")
    parser.add_argument("--variants", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--force", action="store_true", help="regenerate scenarios that exist")
    parser.add_argument("--out", default=CORPUS)
    parser.add_argument("--keep", action="store_true", help="keep each scene's temporary directory")
    args = parser.parse_args(argv)
    known = families()
    chosen = args.family or known
    if not args.family and not has_gpu():
        skipped = [f for f in chosen if needs_gpu(f)]
        if skipped:
            print(f"corpus_generate: no GPU here: skipping {', '.join(skipped)} (name them with --family to try)",
                  file=sys.stderr)
        chosen = [f for f in chosen if f not in skipped]
    unknown = [f for f in chosen if f not in known]
    if unknown:
        print(f"corpus_generate: no such family: {', '.join(unknown)} (known: {', '.join(known)})", file=sys.stderr)
        return 2
    failed = 0
    # A wall-clock deadline (seconds since the epoch) after which no new scenario starts: a machine lent for a
    # fixed time (benchmarks/gpu_corpus.sh) keeps what it finished.
    deadline = float(os.environ.get("GPU_CORPUS_DEADLINE") or "inf")
    for family in chosen:
        for index in range(args.variants):
            target = os.path.join(args.out, family, f"v{index + 1}")
            if os.path.isfile(os.path.join(target, "truth.json")) and not args.force:
                continue
            if time.time() > deadline:
                print(f"{family}/v{index + 1}: not started (past GPU_CORPUS_DEADLINE)", file=sys.stderr)
                failed += 1
                continue
            started = time.perf_counter()
            try:
                done = generate_one(family, index, args.seed, args.out, keep=args.keep)
            except Exception as exc:  # one broken scene must not stop the others: said, counted, left out
                print(f"{family}/v{index + 1}: {type(exc).__name__}: {exc}", file=sys.stderr)
                done = None
            failed += done is None
            print(f"{family}/v{index + 1}: {'stored' if done else 'FAILED'} in {time.perf_counter() - started:.0f} s",
                  file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
