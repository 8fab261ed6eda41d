"""A thread-pool size: OpenMP's thread count for torch's CPU matmuls. On a shared 2-core box more threads than
free cores oversubscribe and spin (measured here: 1 thread ~210 matmuls/s, 2 threads 20-35)."""
import random

from corpus.scene import Scene

MECHANISM = "a thread-pool size (OMP_NUM_THREADS read by libgomp through torch) oversubscribing the CPUs"
LINK_BASE_VENV = True
EXCLUDE = ["OMP_NUM_THREADS", "OMP_PROC_BIND", "MKL_NUM_THREADS", "KMP_BLOCKTIME"]


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    size = rng.choice([192, 256, 320])
    scene.imports.append(f"import torch\n_A = torch.randn({size}, {size})\n_B = torch.randn({size}, {size})")
    scene.steps.append("torch.mm(_A, _B)")
    good = "1"
    bad = rng.choice([None, "2", "3", "4"])
    name = "OMP_NUM_THREADS"
    scene.good.env[name] = good
    if bad is not None:
        scene.bad.env[name] = bad
    scene.planted = f"{name}: {good} -> {bad or 'unset (torch then uses every core)'}: torch's OpenMP pool oversubscribes"
    scene.truth_keys = [f"env.{name}", f"workers.*.{name}", f"*env.{name}"]
