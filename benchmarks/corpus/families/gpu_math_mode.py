"""TF32 turned off for a float32 matmul on the GPU: cuBLAS reads NVIDIA_TF32_OVERRIDE=0 at start-up and runs
the full-precision path the code asked it not to (torch.backends.cuda.matmul.allow_tf32 = True on both sides).
NVIDIA documents the variable: https://docs.nvidia.com/deeplearning/frameworks/user-guide/index.html#tf32
("NVIDIA_TF32_OVERRIDE=0 ... overrides the default math settings to disable TF32")."""
import random

from corpus import gpu
from corpus.scene import Scene

NEEDS_GPU = True
MECHANISM = "a variable read natively by cuBLAS (not by Python) that changes the math mode of the GPU's matmuls"
EXCLUDE = gpu.EXCLUDE


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    size = rng.choice([3072, 4096])
    gpu.use_torch(scene, [
        "torch.backends.cuda.matmul.allow_tf32 = True",
        f'SETTINGS["a"] = torch.randn({size}, {size}, device=SETTINGS["device"])',
        f'SETTINGS["b"] = torch.randn({size}, {size}, device=SETTINGS["device"])',
    ])
    repeats = int(2 * strength)
    scene.steps.append(f'for _ in range({repeats}):\n    SETTINGS["a"] @ SETTINGS["b"]\n'
                       'if SETTINGS["device"] == "cuda":\n    torch.cuda.synchronize()')
    gpu.place_variable(scene, "NVIDIA_TF32_OVERRIDE", rng.choice([None, "1"]), "0",
                       gpu.PLACEMENTS[gpu.variant_index(scene)])
    scene.planted += f"; the benchmark multiplies {size}x{size} float32 matrices on the GPU"
