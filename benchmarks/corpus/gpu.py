"""What the GPU families share: the GPU work the benchmark does, where a variable is set, and the innocents that
would act on a GPU (so are not innocent there).

These families run only where torch sees a CUDA GPU (corpus_generate.py skips them elsewhere unless named);
CORPUS_GPU_DEVICE=cpu runs their plumbing on a CPU (no slowdown shows there, so nothing is stored).
"""
from __future__ import annotations

import os
from typing import List, Optional

from corpus.scene import Scene

NEEDS_GPU = True
DEVICE = os.environ.get("CORPUS_GPU_DEVICE", "cuda")
# Innocents that really act on a one-GPU torch job: TF32 off, synchronous launches, another or no device, another
# allocator, fewer hardware queues, and the thread pools of the OpenMP and BLAS runtimes torch loads (the first
# recording, 2026-12-06, still drew the OpenMP/MKL ones: benchmarks/corpus/PROVENANCE.md). The NCCL_* ones stay:
# a one-GPU job creates no communicator.
EXCLUDE = ["NVIDIA_TF32_OVERRIDE", "CUDA_LAUNCH_BLOCKING", "CUDA_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF",
           "CUDA_DEVICE_MAX_CONNECTIONS", "OMP_NUM_THREADS", "OMP_PROC_BIND", "MKL_NUM_THREADS", "KMP_BLOCKTIME"]

# Where a variable reaches the benchmark, one placement per variant (v1..v4):
#   shell               - in the environment `envsnap run` starts with;
#   launcher_exec       - work/launch.py sets os.environ, then starts bench.py as a child (its exec environment);
#   launcher_inprocess  - work/launch.py sets os.environ and runs bench.py in its own process (runpy): only the
#                         process's live environment (memory) holds it, /proc/PID/environ does not;
#   hook                - a .pth start-up hook in the venv's site-packages sets it in every Python process.
PLACEMENTS = ("shell", "launcher_exec", "launcher_inprocess", "hook")
LAUNCHER = {
    "launcher_exec": ("import os\nimport subprocess\nimport sys\n\n{set}"
                      "sys.exit(subprocess.call([sys.executable, 'bench.py'] + sys.argv[1:]))\n"),
    "launcher_inprocess": ("import os\nimport runpy\nimport sys\n\n{set}"
                           "sys.argv = ['bench.py'] + sys.argv[1:]\nrunpy.run_path('bench.py', run_name='__main__')\n"),
}


def use_torch(scene: Scene, setup: List[str]) -> None:
    """The benchmark imports the machine's torch and builds its tensors once, on the GPU."""
    scene.link_base_venv = True
    scene.imports.append("import torch")
    scene.configure.append(f'SETTINGS["device"] = {DEVICE!r}')
    scene.configure.extend(setup)


def variant_index(scene: Scene) -> int:
    return (int(scene.variant.lstrip("v")) - 1) % len(PLACEMENTS)


def place_variable(scene: Scene, name: str, good: Optional[str], bad: str, where: str) -> None:
    """Set `name` on BAD (GOOD: `good`, None = unset) the way `where` says; the truth keys and the plant's text."""
    variable_keys = [f"env.{name}", f"workers.*.{name}", f"*env.{name}"]
    if where == "shell":
        if good is not None:
            scene.good.env[name] = good
        scene.bad.env[name] = bad
        scene.truth_keys = variable_keys
        how = "in the shell"
    elif where in LAUNCHER:
        scene.script = "launch.py"
        for side, value in ((scene.good, good), (scene.bad, bad)):
            line = "" if value is None else f"os.environ[{name!r}] = {value!r}\n"
            side.files["work/launch.py"] = LAUNCHER[where].format(set=line)
        # launcher_inprocess: the variable shows only as set in the measured process itself (its live environment and
        # the probe's records: "command.<process>.changed_in_process.NAME"), not in any environment it started with
        scene.truth_keys = variable_keys + [f"*changed_in_process.{name}", f"*{scene.path('work', 'launch.py')}*"]
        how = ("in-process by work/launch.py, which then runs bench.py in the same process"
               if where == "launcher_inprocess" else "in-process by work/launch.py before it starts bench.py")
    else:
        site = scene.site_packages[len(scene.root) + 1:]
        rel = f"{site}/zz_gpu_defaults.pth"
        scene.bad.files[rel] = f"import os; os.environ.setdefault({name!r}, {bad!r})  # site GPU defaults\n"
        scene.good.files[rel] = None if good is None else (
            f"import os; os.environ.setdefault({name!r}, {good!r})  # site GPU defaults\n")
        scene.truth_keys = [f"startup.{scene.path(rel)}"] + variable_keys
        how = "by a start-up hook zz_gpu_defaults.pth"
    scene.planted = f"{name}: {good or 'unset'} -> {bad} (set {how})"
