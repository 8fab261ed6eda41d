"""A module the benchmark imports is shadowed by a slower file of the same name earlier on sys.path: the script's
own directory (work/) or a PYTHONPATH entry."""
import random

from corpus.scene import Scene

MECHANISM = "a shadowed module (a same-named file earlier on sys.path: script directory or PYTHONPATH)"
EXCLUDE = ["PYTHONPATH"]
FAST = "def mix(n):\n    return n * (n + 1) // 2\n"
SLOW = "def mix(n):\n    total = 0\n    for i in range({k}):\n        total += sum(range(n // {k} + 1))\n    return total\n"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    module = rng.choice(["fastmix", "mixops", "accel_kernels"])
    where = rng.choice(["script_dir", "pythonpath"])
    k = int(rng.choice([2, 3]) * strength)
    site = scene.site_packages[len(scene.root) + 1:]
    scene.both("files", {f"{site}/{module}.py": FAST})  # installed beside workkit (same text both sides)
    scene.imports.append(f"import {module}")
    scene.steps.append(f"{module}.mix({20000 * k})")
    if where == "script_dir":
        rel = f"work/{module}.py"
        scene.truth_keys = [f"*{scene.path(rel)}*", f"*modules*{module}*"]
    else:
        rel = f"local/{module}.py"
        scene.bad.env["PYTHONPATH"] = scene.path("local")
        scene.truth_keys = [f"*{scene.path(rel)}*", f"*modules*{module}*", "env.PYTHONPATH", "workers.*.PYTHONPATH",
                            "*env.PYTHONPATH"]
    scene.bad.files[rel] = SLOW.format(k=k)
    scene.good.files[rel] = None
    scene.planted = f"{module}.py shadowed by a slower copy at {rel} ({where})"
