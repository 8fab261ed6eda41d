"""A variable the CUDA driver or PyTorch's native CUDA allocator reads at start-up makes many small kernel
launches slow: CUDA_LAUNCH_BLOCKING=1 makes every launch wait for its kernel (NVIDIA, CUDA C Programming Guide,
"CUDA Environment Variables"); PYTORCH_NO_CUDA_MEMORY_CACHING=1 makes every tensor a cudaMalloc/cudaFree
(PyTorch docs, "CUDA semantics", memory management)."""
import random

from corpus import gpu
from corpus.scene import Scene

NEEDS_GPU = True
MECHANISM = "a variable read natively by the CUDA driver or PyTorch's allocator that slows many small launches"
EXCLUDE = gpu.EXCLUDE
VARIABLES = ("CUDA_LAUNCH_BLOCKING", "PYTORCH_NO_CUDA_MEMORY_CACHING")


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    index = gpu.variant_index(scene)
    name = VARIABLES[index % 2]
    elements = rng.choice([1 << 20, 1 << 21])
    gpu.use_torch(scene, [f'SETTINGS["x"] = torch.rand({elements}, device=SETTINGS["device"])'])
    ops = int(rng.choice([40, 60]) * strength)
    scene.steps.append(f'x = SETTINGS["x"]\nfor _ in range({ops}):\n    x = x * 1.0001 + 0.5\n'
                       'if SETTINGS["device"] == "cuda":\n    torch.cuda.synchronize()')
    gpu.place_variable(scene, name, None, "1", gpu.PLACEMENTS[(index + 1) % len(gpu.PLACEMENTS)])
    scene.planted += f"; the benchmark runs {ops} small elementwise kernels a step"
