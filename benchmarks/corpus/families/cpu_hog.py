"""A CPU-bound neighbour process on the CPU the benchmark runs on (both sides pinned with taskset)."""
import random

from corpus.scene import Scene, write

MECHANISM = "a CPU hog neighbour on the work's CPUs"
EXCLUDE = ["short_neighbour"]
HOG = "import sys\nwhile True:\n    pass\n"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    cpu = rng.choice(["0", "1"])
    script = rng.choice(["indexer.py", "log_compactor.py", "backup_agent.py"])
    hogs = 1 if strength < 2 else 2
    scene.hog_script = script  # type: ignore[attr-defined]
    scene.both("prefix", ["taskset", "-c", cpu])
    for _ in range(hogs):
        scene.bad.neighbours.append(["taskset", "-c", cpu, "python3", scene.path("srv", script)])
    scene.planted = f"{hogs} busy {script} pinned to CPU {cpu}, the benchmark's CPU, on bad"
    scene.truth_keys = [f"neighbour*{script}*"]


def prepare(scene: Scene) -> None:
    write(scene.path("srv", scene.hog_script), HOG)  # type: ignore[attr-defined]
