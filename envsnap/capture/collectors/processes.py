"""Process trees of inference servers (`--pid PID`, `--sglang`): each worker as /proc shows it.

Keys are roles ("sglang-main", "scheduler_TP0", "detokenizer", "python-0"), not pids,
so two launches line up in a diff. The walking itself is in envsnap/proctree.py.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.capture.collectors.placement import THREADS_SHAPE, placement_shape
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    MEMORY,
    NONE,
    SectionRules,
    rule,
    volatile,
)
from envsnap.model.schema import ENV_SHAPE
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
_PROCESS_SHAPE = {
    "pid": "num", "ppid": "num", "parent_key": "str", "title": "str", "cmdline": ("list", "str"), "exe": "str",
    "cwd": "str", "role": {"kind": "str", "tp": "int", "dp": "int", "pp": "int", "ep": "int"},
    "cpu_affinity": ("list", "num"), "nice": "num", "num_threads": "num", "gpus": ("list", "scalar"),
    "status": "str", "environ_status": "str", "environ_note": "str", "environ": ENV_SHAPE,
    # The C environ read from its memory at capture (live_environ.py): in-process changes, titled processes.
    "live_environ_status": "str", "live_environ_note": "str", "live_environ": ENV_SHAPE,
    # How it is scheduled and placed, its threads by name (placement.py).
    "placement": placement_shape(), "threads": THREADS_SHAPE,
    "divergence": {"added": ENV_SHAPE, "removed": ("list", "str"),
                   "changed": ("map", {"parent": "str", "child": "str"})},
}
SHAPE = {"processes": ("map", _PROCESS_SHAPE), "roots": ("list", "str"), "errors": "dict"}
RULES = SectionRules(category="workers", component=NONE, compares="worker processes", rules=(
    volatile("processes.processes.*.cmdline*", "multiprocessing spawn arguments carry fd numbers"),
    # --- Worker processes (processes/probe sections): how each TP worker was started ---
    # sched_setaffinity(2): workers squeezed onto fewer CPUs starve the launch/scheduler threads.
    rule("workers.*.cpu_affinity", "workers", CPU_HOST, 0.4, "the workers' CPU affinity changed"),
    rule("workers.*.nice", "workers", CPU_HOST, 0.3, "the workers' scheduling priority changed"),
    rule("workers.*.gpus", "workers", COMMUNICATION, 0.5, "the workers use other GPUs"),
    rule("workers.*.init", "workers", COMMUNICATION, 0.6, "the workers' distributed init changed (backend, world size)"),
    rule("workers.*.exe", "workers", CPU_HOST, 0.35, "the workers run another interpreter"),
    rule("workers.*.cmdline", "workers", NONE, 0.3, "the workers were launched with other arguments"),
    rule("workers.*.status", "workers", NONE, 0.2, "a worker's state changed"),
    # --- How each process is scheduled and placed (placement.py) ---
    # sched(7): SCHED_BATCH is treated as CPU-bound (a wake-up penalty), SCHED_IDLE runs only when nothing else
    # wants the CPU; SCHED_FIFO/RR run before every normal thread.
    rule("workers.*.placement.policy", "workers", CPU_HOST, 0.45, "the processes' scheduling policy changed"),
    rule("workers.*.placement.rt_priority", "workers", CPU_HOST, 0.3, "the processes' real-time priority changed"),
    # sched(7) "The autogroup feature": with autogroups, CPU is shared between sessions first; the group's nice
    # ranks it against other sessions.
    rule("workers.*.placement.autogroup_nice", "workers", CPU_HOST, 0.3,
         "the priority of the processes' session (autogroup nice) changed"),
    # cpuset(7): the NUMA nodes memory may come from; remote memory is slower.
    rule("workers.*.placement.mems_allowed", "workers", MEMORY, 0.35, "the NUMA nodes the processes' memory may "
         "come from changed"),
    # cgroup-v2.rst "cpu.max", cgroup-v1 cfs quota: the group is throttled once its quota per period is used.
    rule("workers.*.cgroup.cpu_limit", "workers", CPU_HOST, 0.5, "the CPU quota of the processes' cgroup changed"),
    rule("workers.*.cgroup.cpu_max", "workers", CPU_HOST, 0.45, "the processes' cgroup cpu.max changed"),
    rule("workers.*.cgroup.cfs_quota_us", "workers", CPU_HOST, 0.45, "the processes' cgroup CFS quota changed"),
    rule("workers.*.cgroup.cfs_period_us", "workers", CPU_HOST, 0.2, "the processes' cgroup CFS period changed"),
    # cgroup-v2.rst "cpu.weight", cgroup-v1 "cpu.shares": the group's share when CPUs are contended.
    rule("workers.*.cgroup.cpu_weight", "workers", CPU_HOST, 0.3, "the CPU weight of the processes' cgroup changed"),
    rule("workers.*.cgroup.cpu_shares", "workers", CPU_HOST, 0.3, "the CPU shares of the processes' cgroup changed"),
    # cgroup-v2.rst "memory.max": reclaim and OOM at the limit.
    rule("workers.*.cgroup.memory_*", "workers", MEMORY, 0.3, "the memory limit of the processes' cgroup changed"),
    rule("workers.*.cgroup.version", "workers", NONE, 0.1, "the processes run under another cgroup version"),
    # A pool's thread count (OpenMP, BLAS, tokenizers, NCCL, CUDA): oversubscription or lost parallelism.
    rule("workers.*.threads.*", "workers", CPU_HOST, 0.25, "a thread pool of the processes changed size"),
))


def _gpus_by_pid() -> Tuple[Optional[Dict[int, List[int]]], str]:
    """{pid: [GPU index]} from NVML's running-process lists, and where it came from.

    Inside a container NVML may report host pids, which match nothing here: then every
    process shows no GPU, and "gpu_source" says which source was used.
    """
    try:
        import pynvml
    except ImportError:
        return None, "unavailable: nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except Exception as exc:
        return None, f"unavailable: NVML did not start ({type(exc).__name__}: {exc})"
    found: Dict[int, Set[int]] = {}
    try:
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for getter in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
                func = getattr(pynvml, getter, None)
                if func is None:
                    continue
                try:
                    for proc in func(handle):
                        found.setdefault(int(proc.pid), set()).add(index)
                except Exception:
                    continue  # NotSupported on some GPUs/vGPUs: the other list may still answer
    except Exception as exc:
        return None, f"unavailable: NVML failed ({type(exc).__name__}: {exc})"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return {pid: sorted(idx) for pid, idx in found.items()}, "nvml"


NO_SGLANG = ("no running SGLang server found (looked for `sglang.launch_server` / "
             "`sglang serve` command lines and `sglang::` process titles)")


def roots_of(ctx: CaptureContext) -> Tuple[List[int], List[int]]:
    """(root pids to walk, pids that are SGLang mains by position) for --pid and --sglang; the
    libraries collector walks the same roots, so that both sections key the processes alike."""
    from envsnap.capture.collectors import proctree

    roots: List[int] = list(dict.fromkeys(int(p) for p in ctx.pids))
    forced: List[int] = []
    if ctx.sglang:
        found, forced = proctree.find_sglang_roots()
        roots += [p for p in found if p not in roots]
    return roots, forced


def collect(ctx: CaptureContext) -> Section:
    if not ctx.pids and not ctx.sglang:
        return unavailable("not requested: use --pid PID or --sglang")
    import time

    from envsnap.capture.collectors import proctree

    roots, forced = roots_of(ctx)
    if not roots:
        return unavailable(NO_SGLANG)
    gpus, gpu_source = _gpus_by_pid()
    data = proctree.walk(roots, deadline=time.monotonic() + ctx.remaining(), redact=ctx.redact,
                         gpus=gpus, forced_main=forced)
    data["gpu_source"] = gpu_source
    if not data["processes"]:
        missing = ", ".join(str(p) for p in roots)
        return failed(f"no such process: {missing}", data)
    return ok(data)


def summarize(data: Dict[str, Any]) -> List[str]:
    """'sglang server 1234: 8 schedulers (TP0-7), 3 environments unreadable (setproctitle)'."""
    from envsnap.capture.collectors.roles import describe_ranks

    processes = data.get("processes") or {}
    lines: List[str] = []
    parts: List[str] = []
    for root in data.get("roots") or []:
        entry = processes.get(root) or {}
        members = _tree_members(processes, root)
        roles = [processes[k].get("role") or {} for k in members]
        schedulers = [role for role in roles if role.get("kind") == "scheduler"]
        if (entry.get("role") or {}).get("kind") == "main" or schedulers:
            text = f"sglang server {entry.get('pid')}: {len(schedulers)} scheduler{'s' if len(schedulers) != 1 else ''}"
            ranks = describe_ranks(schedulers)
            parts.append(text + (f" ({ranks})" if ranks else ""))
        else:
            parts.append(f"{root} {entry.get('pid')}: {len(members)} process{'es' if len(members) != 1 else ''}")
    counts: Dict[str, int] = {}
    for entry in processes.values():
        counts[entry.get("environ_status", "?")] = counts.get(entry.get("environ_status", "?"), 0) + 1
    if counts.get("unreadable"):
        parts.append(f"{counts['unreadable']} environment{'s' if counts['unreadable'] != 1 else ''} unreadable (setproctitle)")
    if counts.get("denied"):
        parts.append(f"{counts['denied']} environment{'s' if counts['denied'] != 1 else ''} denied")
    gone = sum(1 for e in processes.values() if e.get("status") == "gone")
    if gone:
        parts.append(f"{gone} exited during the walk")
    lines.append(", ".join(parts) if parts else "no processes")
    from envsnap.model.argv import describe, itemise

    for key in sorted(processes):
        entry = processes[key]
        env = entry.get("environ_status")
        gpus = entry.get("gpus")
        live = entry.get("live_environ_status")
        lines.append(f"{key}: pid {entry.get('pid')} {entry.get('title', '')[:80]}  env {env}"
                     + (f"  memory env {live}" if live else "") + (f"  gpus {gpus}" if gpus else ""))
        cmdline = entry.get("cmdline")
        line = itemise(cmdline) if isinstance(cmdline, list) and cmdline else None
        lines += describe(line) if line is not None else []  # its flags one by one (a title is cut at 80)
    for name, error in sorted((data.get("errors") or {}).items()):
        lines.append(f"error {name}: {error}")
    return lines


def _tree_members(processes: Dict[str, Dict[str, Any]], root: str) -> List[str]:
    members = [root]
    index = 0
    while index < len(members):
        current = members[index]
        members += [k for k, e in processes.items() if e.get("parent_key") == current and k not in members]
        index += 1
    return members
