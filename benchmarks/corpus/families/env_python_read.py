"""A variable the benchmark's own Python code reads (os.environ) sets how much work each step does."""
import random

from corpus.scene import Scene

MECHANISM = "an environment variable read by the benchmark's Python code"
LAUNCHER = """import os
import subprocess
import sys

{set}
sys.exit(subprocess.call([sys.executable, "bench.py"] + sys.argv[1:]))
"""
NAMES = ["WORKKIT_PASSES", "APP_VERIFY_ROUNDS", "PIPELINE_REPLAY", "ACME_CHECKSUM_LEVEL", "JOB_REFINE_STEPS",
         "SERVICE_AUDIT_DEPTH"]


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    name = rng.choice(NAMES)
    # read once at start or on every step; set in the shell, or in-process by a launcher before it starts the
    # benchmark (the shell's environment then holds no difference: only the measured process's does)
    where = rng.choice(["configure", "step", "launcher"])
    if where in ("configure", "launcher"):
        scene.configure.append(f'SETTINGS["passes"] = int(os.environ.get("{name}", "1"))')
        scene.steps.append('for _ in range(SETTINGS["passes"] - 1):\n    core.step()')
    else:
        scene.steps.append(f'for _ in range(int(os.environ.get("{name}", "1")) - 1):\n    core.step()')
    good = rng.choice([None, "1"])
    bad = str(int(rng.choice([2, 3]) * strength))
    if where == "launcher":
        scene.script = "launch.py"
        for side, value in ((scene.good, good), (scene.bad, bad)):
            side.files["work/launch.py"] = LAUNCHER.format(set="" if value is None else f"os.environ[{name!r}] = {value!r}")
        scene.planted = f"{name}: {good or 'unset'} -> {bad} (set in-process by work/launch.py, read by workkit)"
        scene.truth_keys = [f"workers.*.{name}", f"*env.{name}", f"*{scene.path('work', 'launch.py')}*"]
        return
    if good is not None:
        scene.good.env[name] = good
    scene.bad.env[name] = bad
    scene.planted = f"{name}: {good or 'unset'} -> {bad} (read by workkit in {where})"
    # the variable itself, in the capturing shell and in every measured process that had it
    scene.truth_keys = [f"env.{name}", f"workers.*.{name}", f"*env.{name}"]
