"""The installed version of a package the benchmark imports swapped for another (pip install of another wheel)."""
import random

from corpus.scene import WORKKIT_CORE, Scene

MECHANISM = "a package version swapped (another release installed)"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    k = int(rng.choice([3, 4]) * strength)
    scene.new_version = rng.choice(["1.1.0", "2.0.0", "1.0.1"])  # type: ignore[attr-defined]
    scene.new_core = WORKKIT_CORE.replace("ITEMS = 3000", f"ITEMS = {3000 * k}")  # type: ignore[attr-defined]
    scene.planted = f"workkit 1.0.0 -> {scene.new_version} (x{k} work per step)"  # type: ignore[attr-defined]
    scene.truth_keys = ["packages.workkit*"]


def between(scene: Scene) -> None:
    scene.install_wheel("workkit", scene.new_version, scene.workkit_files(scene.new_core))  # type: ignore[attr-defined]
