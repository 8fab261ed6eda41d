"""Innocent differences: real changes that do nothing to the benchmark, many under famous names out of context.

Each entry plants one difference on one side of a scene (the other side keeps the base) and says what it
planted. `plant(scene, rng, count, exclude)` draws `count` of them (seeded by the caller), each on BAD or, for
about a third, on GOOD (a variable GOOD had and BAD lost is a difference too). A family excludes those that
would act in its setup (OMP_* where its benchmark loads an OpenMP runtime).
"""
from __future__ import annotations

import os
import random
from typing import Callable, Dict, List, Sequence, Tuple

from corpus.scene import Scene, Side

Plant = Callable[[Scene, Side, Side, random.Random], str]


def _env(name: str, values: Sequence[str]) -> Plant:
    def plant(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
        value = rng.choice(list(values))
        side.env[name] = value
        return f"{name}={value} on {side.name}"
    plant.replaces = name  # type: ignore[attr-defined]
    return plant


def _sets_what_the_machine_has(plant: Plant) -> bool:
    """A variable plant whose variable the machine's own environment already sets: planting it would change a real
    setting of the machine, not add an innocent one (the H100 recording of 2026-12-06 set LC_ALL=C.UTF-8 over the
    machine's en_US.UTF-8, a locale change the benchmark's Python code read: benchmarks/corpus/PROVENANCE.md)."""
    name = getattr(plant, "replaces", None)
    return name is not None and name in os.environ


def _path_entry(name: str) -> Plant:
    """A search-path variable gains an entry: an empty directory nothing is found in, put before the machine's own
    entries (a GPU machine's LD_LIBRARY_PATH names its driver: replacing it would change what is loaded)."""
    def plant(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
        entry = scene.path("empty", rng.choice(["lib", "lib64", "opt-cuda-lib", "extras"]))
        side.files[f"empty/{entry.rsplit('/', 1)[1]}/.keep"] = ""
        machine = os.environ.get(name)
        side.env[name] = entry + (os.pathsep + machine if machine else "")
        return f"{name}={entry} (an empty directory) before the machine's own entries on {side.name}"
    return plant


def _hook_mentioning(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    name = rng.choice(["NCCL_P2P_DISABLE", "OMP_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "TORCH_NCCL_BLOCKING_WAIT",
                       "MALLOC_ARENA_MAX"])
    rel = scene.site_packages[len(scene.root) + 1:] + "/zz_site_defaults.pth"
    side.files[rel] = f"import os; os.environ.get('{name}')  # site defaults: reads {name}, changes nothing\n"
    other.files[rel] = None
    return f"a start-up hook zz_site_defaults.pth that reads {name} and does nothing, on {side.name}"


def _sidekit_edit(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    rel = scene.site_packages[len(scene.root) + 1:] + "/sidekit/fmt.py"
    base = 'def render(rows):\n    return "\\n".join(",".join(map(str, r)) for r in rows)\n'
    side.files[rel] = base.replace('","', '";"') + "# local fix: semicolons for the spreadsheet import\n"
    other.files[rel] = base
    return f"edited installed file sidekit/fmt.py (never imported) on {side.name}"


def _repo_dirty(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    side.files["repo/tools/report.py"] = "def main():\n    print('report v2')\n    return 0\n"
    other.files["repo/tools/report.py"] = "def main():\n    print('report')\n"
    return f"a dirty file tools/report.py in a checkout nothing runs, on {side.name}"


def _watched_unread(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    size = rng.choice([64, 512, 1024, 4096])
    side.files["conf/unused.cfg"] = f"[cache]\nsize = {size}\nttl = 60\n"
    other.files["conf/unused.cfg"] = "[cache]\nsize = 256\nttl = 60\n"
    return f"watched file conf/unused.cfg changed (size = {size}), read by nothing, on {side.name}"


def _short_neighbour(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    # busy for 0.2 s on the other CPU at the start of the capture, then asleep
    side.neighbours.append(["taskset", "-c", "1", "python3", "-c",
                            "import time\nt=time.time()\nwhile time.time()-t<0.2: pass\ntime.sleep(600)"])
    return f"a short-lived neighbour process (0.2 s busy on CPU 1, then asleep) on {side.name}"


def _server_flag(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    flag, good, bad = rng.choice([("--schedule-policy", "fcfs", "lpm"), ("--max-running-requests", "64", "128"),
                                  ("--chunked-prefill-size", "8192", "4096"), ("--tp-size", "2", "4")])
    base = ["python3", scene.path("srv", "launch_server.py"), "600", "--model-path", "/models/none"]
    side.neighbours.append(base + [flag, bad])
    other.neighbours.append(base + [flag, good])
    return f"a server not measured (idle launch_server.py) started with {flag} {bad} instead of {good}, on {side.name}"


def _label(scene: Scene, side: Side, other: Side, rng: random.Random) -> str:
    side.label = rng.choice(["nightly-2026-12-01", "after-upgrade", "canary", "rerun"])
    other.label = "baseline"
    return f"label {side.label!r} on {side.name}"


POOL: Dict[str, Plant] = {
    "LD_LIBRARY_PATH": _path_entry("LD_LIBRARY_PATH"),
    "PYTHONPATH": _path_entry("PYTHONPATH"),
    "LD_BIND_NOW": _env("LD_BIND_NOW", ["1"]),
    "MALLOC_ARENA_MAX": _env("MALLOC_ARENA_MAX", ["2", "4"]),
    "NCCL_P2P_DISABLE": _env("NCCL_P2P_DISABLE", ["1"]),
    "NCCL_IB_DISABLE": _env("NCCL_IB_DISABLE", ["1"]),
    "NCCL_PROTO": _env("NCCL_PROTO", ["Simple", "LL", "LL128"]),
    "NCCL_ALGO": _env("NCCL_ALGO", ["Ring", "Tree"]),
    "NCCL_DEBUG": _env("NCCL_DEBUG", ["INFO", "WARN"]),
    "CUDA_VISIBLE_DEVICES": _env("CUDA_VISIBLE_DEVICES", ["0", "1", "0,1"]),
    "CUDA_LAUNCH_BLOCKING": _env("CUDA_LAUNCH_BLOCKING", ["1"]),
    "CUDA_DEVICE_MAX_CONNECTIONS": _env("CUDA_DEVICE_MAX_CONNECTIONS", ["1", "8"]),
    "PYTORCH_CUDA_ALLOC_CONF": _env("PYTORCH_CUDA_ALLOC_CONF", ["expandable_segments:True"]),
    "OMP_NUM_THREADS": _env("OMP_NUM_THREADS", ["1", "4"]),
    "OMP_PROC_BIND": _env("OMP_PROC_BIND", ["close", "spread"]),
    "MKL_NUM_THREADS": _env("MKL_NUM_THREADS", ["1", "2"]),
    "KMP_BLOCKTIME": _env("KMP_BLOCKTIME", ["0", "200"]),
    "TORCH_NCCL_ASYNC_ERROR_HANDLING": _env("TORCH_NCCL_ASYNC_ERROR_HANDLING", ["1"]),
    "SGLANG_ENABLE_TORCH_COMPILE": _env("SGLANG_ENABLE_TORCH_COMPILE", ["1"]),
    "TOKENIZERS_PARALLELISM": _env("TOKENIZERS_PARALLELISM", ["false", "true"]),
    "HF_HUB_OFFLINE": _env("HF_HUB_OFFLINE", ["1"]),
    "NVIDIA_TF32_OVERRIDE": _env("NVIDIA_TF32_OVERRIDE", ["0"]),
    "TRITON_CACHE_DIR": _env("TRITON_CACHE_DIR", ["/tmp/triton-cache"]),
    "BUILD_NUMBER": _env("BUILD_NUMBER", ["4711", "4712", "9001"]),
    "DEPLOY_COLOR": _env("DEPLOY_COLOR", ["blue", "green"]),
    "TEAM_ONCALL": _env("TEAM_ONCALL", ["alice", "bob"]),
    "JOB_RETRY_COUNT": _env("JOB_RETRY_COUNT", ["3", "5"]),
    "REPORT_FORMAT": _env("REPORT_FORMAT", ["csv", "json"]),
    "CACHE_TTL_SECONDS": _env("CACHE_TTL_SECONDS", ["60", "600"]),
    "LC_ALL": _env("LC_ALL", ["C.UTF-8"]),
    "startup_hook": _hook_mentioning,
    "sidekit_edit": _sidekit_edit,
    "repo_dirty": _repo_dirty,
    "watched_unread": _watched_unread,
    "short_neighbour": _short_neighbour,
    "server_flag": _server_flag,
    "label": _label,
}


def plant(scene: Scene, rng: random.Random, count: int, exclude: Sequence[str] = ()) -> List[str]:
    """Draw `count` innocents (seeded by rng) and plant each on BAD, or on GOOD for about a third."""
    names = sorted(n for n in POOL if n not in exclude and not _sets_what_the_machine_has(POOL[n]))
    chosen = rng.sample(names, min(count, len(names)))
    planted: List[Tuple[str, str]] = []
    for name in sorted(chosen):
        on_good = rng.random() < 0.33
        side, other = (scene.good, scene.bad) if on_good else (scene.bad, scene.good)
        planted.append((name, POOL[name](scene, side, other, rng)))
    return [text for _, text in planted]
