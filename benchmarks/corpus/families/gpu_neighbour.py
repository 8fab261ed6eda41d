"""Another process keeps the same GPU busy with large matmuls while the benchmark runs (time-sliced with it)."""
import random
import sys

from corpus import gpu
from corpus.scene import Scene, write

NEEDS_GPU = True
MECHANISM = "a GPU-bound neighbour process on the work's GPU"
EXCLUDE = gpu.EXCLUDE
HOG = ("import torch\n"
       "a = torch.randn({size}, {size}, device={device!r})\n"
       "while True:\n"
       "    a @ a\n"
       "    if a.is_cuda:\n"
       "        torch.cuda.synchronize()\n")


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    size = rng.choice([3072, 4096])
    gpu.use_torch(scene, [
        "torch.backends.cuda.matmul.allow_tf32 = True",
        f'SETTINGS["a"] = torch.randn({size}, {size}, device=SETTINGS["device"])',
    ])
    scene.steps.append('for _ in range(4):\n    SETTINGS["a"] @ SETTINGS["a"]\n'
                       'if SETTINGS["device"] == "cuda":\n    torch.cuda.synchronize()')
    script = rng.choice(["embed_refresh.py", "nightly_eval.py", "kv_warmup.py"])
    hogs = 1 if strength < 2 else 2
    scene.hog = (script, rng.choice([6144, 8192]))  # type: ignore[attr-defined]
    scene.settle_s = 12.0  # the hog imports torch and starts its CUDA context before the capture
    for _ in range(hogs):
        # The generator's own interpreter, the one with torch: `python3` on PATH may lack it (on the GPU machine
        # the corpus's base environment drops the virtualenv torch lives in from PATH).
        scene.bad.neighbours.append([sys.executable, scene.path("srv", script)])
    scene.planted = f"{hogs} {script} running large matmuls on the benchmark's GPU, on bad"
    scene.truth_keys = [f"neighbour*{script}*"]


def prepare(scene: Scene) -> None:
    script, size = scene.hog  # type: ignore[attr-defined]
    write(scene.path("srv", script), HOG.format(size=size, device=gpu.DEVICE))
