"""An installed file of a package the benchmark imports, edited in site-packages (RECORD's hash no longer holds)."""
import random

from corpus.scene import WORKKIT_CORE, Scene

MECHANISM = "an edited file of an installed package the benchmark imports"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    rel = scene.site_packages[len(scene.root) + 1:] + "/workkit/core.py"
    how = rng.choice(["items", "validate", "copy"])
    k = int(rng.choice([3, 4]) * strength)
    if how == "items":
        edited = WORKKIT_CORE.replace("ITEMS = 3000", f"ITEMS = {3000 * k}  # larger batches (local edit)")
    elif how == "validate":
        edited = WORKKIT_CORE.replace("    return total\n", f"    for _ in range({k - 1}):  # local edit: re-check\n"
                                      "        assert sum(i * i for i in range(ITEMS)) == total\n    return total\n")
    else:
        edited = WORKKIT_CORE.replace("    for i in range(ITEMS):", f"    for i in list(range(ITEMS)) * {k}:  # local edit")
    scene.good.files[rel] = WORKKIT_CORE
    scene.bad.files[rel] = edited
    scene.planted = f"site-packages workkit/core.py edited ({how}, x{k} work)"
    scene.truth_keys = ["integrity.workkit/core.py"]
