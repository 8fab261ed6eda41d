"""A command-line flag of the benchmark itself sets how much work each step does."""
import random

from corpus.scene import Scene

MECHANISM = "a command-line flag of the benchmark"
FLAGS = ["--refine-passes", "--verify-rounds", "--oversample", "--replay"]


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    flag = rng.choice(FLAGS)
    dest = flag.lstrip("-").replace("-", "_")
    scene.arguments.append((flag, "1"))
    scene.configure.append(f'SETTINGS["passes"] = int(SETTINGS["{dest}"])')
    scene.steps.append('for _ in range(SETTINGS["passes"] - 1):\n    core.step()')
    good = rng.choice([None, "1"])
    bad = str(int(rng.choice([2, 3]) * strength))
    form = rng.choice(["space", "equals"])
    if good is not None:
        scene.good.bench_args += [f"{flag}={good}"] if form == "equals" else [flag, good]
    scene.bad.bench_args += [f"{flag}={bad}"] if form == "equals" else [flag, bad]
    scene.planted = f"benchmark flag {flag}: {good or 'absent'} -> {bad}"
    scene.truth_keys = [f"run.flag.{flag}", f"*.flag.{flag}", f"*{flag}*"]
