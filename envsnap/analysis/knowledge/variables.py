"""What a difference no rule names looks like: kinds of unknown variables by name and value, host
resources whose change is sized, and kinds of files (analysis/rank/priors.py reads them)."""
from __future__ import annotations

from typing import Dict, List, NamedTuple, Tuple

from envsnap.model.rules import CPU_HOST, NONE


# --- Unknown variables (no rule above names them): what their name and value look like. Kinds and their priors;
# a prior here is the chance such a change moves speed, before any evidence (analysis/rank/priors.py). ---
class VariableKind(NamedTuple):
    name: str
    prior: float
    why: str
    component: str = NONE  # what such a setting acts on, where its kind says


VARIABLE_KINDS: Dict[str, VariableKind] = {k.name: k for k in [
    # ld.so(8): the dynamic linker decides which libraries (allocator, BLAS, CUDA) every process loads.
    VariableKind("linker", 0.4, "a dynamic-linker setting (ld.so(8)): which libraries load"),
    # mallopt(3) ENVIRONMENT, tunables(7): allocator tuning changes the cost of every allocation (CPU time).
    VariableKind("allocator", 0.35, "an allocator setting (mallopt(3), tunables(7))", CPU_HOST),
    # Python docs "Command line and environment": PYTHON* variables change how the interpreter runs (host side).
    VariableKind("interpreter", 0.3, "an interpreter setting (Python docs, Command line and environment)", CPU_HOST),
    # OpenMP spec OMP_NUM_THREADS and its imitators: thread counts are the classic performance knob.
    VariableKind("threads", 0.3, "a thread or worker count", CPU_HOST),
    VariableKind("switch", 0.15, "a switch (a boolean, or an ENABLE/DISABLE/USE name)"),
    VariableKind("count", 0.15, "a count or size (a small integer, a size, a NUM/SIZE/LIMIT/MAX name)"),
    VariableKind("mode", 0.12, "a mode (one word from a small set, or a MODE/LEVEL/POLICY/BACKEND name)"),
    VariableKind("text", 0.05, "free text: it configures nothing that a name or value shows"),
    VariableKind("bookkeeping", 0.02, "bookkeeping (a path, URL, id, hash, timestamp or a DIR/PATH/HOME/ID name)"),
]}

# Name families of unknown variables, first match wins (the value's shape decides where none matches, and a
# bookkeeping-shaped value -- a path, an id -- overrides a knob-like name, except for the linker, allocator
# and interpreter families, whose values are often paths).
NAME_FAMILIES: List[Tuple[str, str]] = [
    ("LD_*", "linker"),
    ("MALLOC_*", "allocator"), ("GLIBC_TUNABLES", "allocator"), ("*MALLOC_CONF", "allocator"),
    ("PYTHON*", "interpreter"),
    ("*_DIR", "bookkeeping"), ("*_DIRS", "bookkeeping"), ("*_PATH", "bookkeeping"), ("*_FILE", "bookkeeping"),
    ("*_HOME", "bookkeeping"), ("*_ROOT", "bookkeeping"), ("*_URL", "bookkeeping"), ("*_URI", "bookkeeping"),
    ("*_HOST", "bookkeeping"), ("*_HOSTNAME", "bookkeeping"), ("*_PORT", "bookkeeping"), ("*_ID", "bookkeeping"),
    ("*_NAME", "bookkeeping"), ("*_USER", "bookkeeping"), ("*_EMAIL", "bookkeeping"), ("*_TOKEN", "bookkeeping"),
    ("*_KEY", "bookkeeping"), ("*_VERSION", "bookkeeping"), ("*_TAG", "bookkeeping"), ("*_PROMPT", "bookkeeping"),
    ("*_NUM_THREADS", "threads"), ("*_THREADS", "threads"), ("*_NUM_WORKERS", "threads"), ("*_WORKERS", "threads"),
    ("*_PARALLELISM", "threads"),
    ("*_DISABLE*", "switch"), ("*_ENABLE*", "switch"), ("DISABLE_*", "switch"), ("ENABLE_*", "switch"),
    ("*_USE_*", "switch"), ("USE_*", "switch"),
    ("*_NUM_*", "count"), ("*_SIZE", "count"), ("*_BYTES", "count"), ("*_LIMIT", "count"), ("*_MAX", "count"),
    ("*_MAX_*", "count"), ("*_MIN", "count"), ("*_MIN_*", "count"), ("*_CAPACITY", "count"),
    ("*_MODE", "mode"), ("*_LEVEL", "mode"), ("*_POLICY", "mode"), ("*_BACKEND", "mode"), ("*_ALGO*", "mode"),
    ("*_IMPL", "mode"),
]
KNOB_FREE_FAMILIES = ("linker", "allocator", "interpreter")  # a path value is still a setting for these

# Family rules (a rule of rules.py whose variable name holds a wildcard: NCCL_*, SGLANG_*, TORCHINDUCTOR_*...) give
# the prior of a *setting* of that family. Their variables' values are judged the way unknown variables' are (the
# name families above and the values' shape, analysis/rank/priors.py): a path, URL, id, hash or timestamp, or a
# DIR/PATH/FILE/HOME/ID name, is bookkeeping in any family -- except where the family loads code or configuration
# from a path, so that a path is the setting itself: {family rule: the name patterns whose paths are settings}.
PATH_SETTING_FAMILIES: Dict[str, Tuple[str, ...]] = {
    # NCCL env page: NCCL_TOPO_FILE and NCCL_GRAPH_FILE replace topology detection and graph search with a file's,
    # NCCL_CONF_FILE names a file of settings, NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN / NCCL_PROFILER_PLUGIN a library.
    "NCCL_*": ("*",),
    # Triton 3.4 python/triton/knobs.py: TRITON_PTXAS_PATH, TRITON_CUOBJDUMP_PATH (env_nvidia_tool), TRITON_LIBDEVICE_PATH,
    # TRITON_LIBCUDA_PATH, TRITON_CUDACRT_PATH name the tools and libraries kernels are built with; its *_DIR
    # variables (TRITON_CACHE_DIR, TRITON_DUMP_DIR) are where it keeps files.
    "TRITON_*": ("*_PATH",),
}

# Host resources whose change is sized (analysis/rank/priors.py): a resource taken away ranks by how much of it.
# sched_setaffinity(2)/taskset(1) (usable CPUs), cgroup-v2.rst cpu.max / cpuset.cpus.effective / memory.max,
# cpufreq.rst (governor), Documentation/admin-guide/hw-vuln/core-scheduling.rst and sysfs smt/control (SMT).
RESOURCE_KEYS: Dict[str, str] = {
    "host.cpu.usable": "cpus", "host.cpu.logical": "cpus", "host.cgroup.cpuset": "cpuset",
    "host.cgroup.cpu_limit_cores": "cpu_quota", "host.cgroup.memory_limit_bytes": "memory", "host.cpu.smt": "smt",
}


class SizedPrior(NamedTuple):
    """prior = min(ceiling, floor + slope * share taken away); `raised` when the resource grew."""
    floor: float
    slope: float
    ceiling: float
    raised: float
    unknown_share: float  # the share assumed when the old amount was unlimited ("max")


# A CPU-bound program on half its CPUs runs up to twice as long (Amdahl): the share of CPUs taken away is
# the size of the candidate; more CPUs rarely slow a program (more threads contend). Memory limits slow by
# reclaim and swap under pressure (cgroup-v2.rst "memory.max", "memory.high"), less directly.
CPU_SIZED = SizedPrior(floor=0.3, slope=0.7, ceiling=0.85, raised=0.15, unknown_share=0.5)
MEMORY_SIZED = SizedPrior(floor=0.2, slope=0.5, ceiling=0.7, raised=0.1, unknown_share=0.5)
# Another process beside the work (compare/neighbours.py): the kernel's CFS scheduler shares the CPUs among
# runnable threads (Documentation/scheduler/sched-design-CFS.rst), so the share of the machine's CPUs a
# neighbour used is the share a CPU-bound program could lose -- the size of the candidate, from almost
# nothing (a quarter of a CPU on a large machine) to as much as the CPUs taken away. On a GPU the share is
# its SM utilisation where NVML gives it. One that left BAD (`raised`) cannot have slowed BAD down.
NEIGHBOUR_SIZED = SizedPrior(floor=0.05, slope=0.9, ceiling=0.85, raised=0.05, unknown_share=0.5)
# sysfs devices/system/cpu/smt/control: turning SMT off halves the logical CPUs (per core, less than 2x work).
SMT_OFF_PRIOR = 0.35
SMT_OTHER_PRIOR = 0.2

# Files (git dirty/untracked entries, watched files) by what they are: code runs, documentation never does.
# Multipliers of the rule's prior.
FILE_KINDS: List[Tuple[Tuple[str, ...], str, float]] = [
    ((".py", ".pyx", ".pxd", ".pyi", ".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hpp", ".so", ".pth",
      ".sh", ".rs", ".go", ".js", ".ts", ".triton", ".ptx"), "code", 1.0),
    ((".yaml", ".yml", ".json", ".toml", ".cfg", ".ini", ".conf", ".env", ".jinja", ".j2"), "configuration", 0.8),
    ((".md", ".rst", ".txt", ".adoc", ".html", ".ipynb", ".png", ".jpg", ".svg", ".pdf", ".csv", ".log"),
     "documentation or data", 0.2),
]
DOCUMENTATION_NAMES = ("readme", "license", "copying", "changelog", "authors", "notice", ".gitignore")
