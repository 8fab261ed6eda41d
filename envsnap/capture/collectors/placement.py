"""Where and how a process is scheduled: policy, priority group, memory nodes, cgroup limits, threads by name.

What each field reads (proc(5), sched(7), cgroups(7), the kernel's Documentation/admin-guide/cgroup-v2.rst
and cgroup-v1/{cpu,memory}.rst):

- policy: sched_getscheduler(2) (SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, SCHED_FIFO, SCHED_RR, SCHED_DEADLINE),
  and the real-time priority (sched_getparam) for FIFO/RR; nice and the CPU affinity are the walk's own;
- autogroup_nice: /proc/PID/autogroup ("/autogroup-N nice K"): with kernel.sched_autogroup_enabled=1 CFS
  shares the CPU between sessions first, so a process's nice ranks it only inside its session; the group's
  nice is what competes with other sessions (the group number is an id, not recorded);
- mems_allowed: /proc/PID/status Mems_allowed_list, the NUMA nodes its memory may come from (cpuset,
  set_mempolicy MPOL_BIND shows in numa_maps only, which costs a walk of every mapping: not read);
- cgroup: /proc/PID/cgroup, then the limit files of its cgroup and every ancestor (a limit anywhere
  above applies): v2 cpu.max ("max 100000" or "QUOTA PERIOD"), cpu.weight, memory.max; v1 cpu.cfs_quota_us /
  cpu.cfs_period_us, cpu.shares, memory.limit_in_bytes. "cpu_limit" is the tightest quota/period up the
  tree in CPUs, "memory_limit_bytes" the tightest memory limit; the cgroup's own weight/shares as read;
- threads: /proc/PID/task/*/comm grouped by name with trailing numbers taken off ("pt_autograd_0" and
  "pt_autograd_1" -> "pt_autograd": 2), so a change in thread count says which pool moved. Pools that do
  not name their threads (GNU OpenMP, OpenBLAS, rayon in tokenizers) count under the process's own name.

Every read is of a small file; failures become a note, never an exception. Bounded: MAX_THREADS threads.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, List, Optional, Tuple

MAX_THREADS = 20_000
_POLICIES = {0: "SCHED_OTHER", 1: "SCHED_FIFO", 2: "SCHED_RR", 3: "SCHED_BATCH", 5: "SCHED_IDLE", 6: "SCHED_DEADLINE"}
_TRAILING_NUMBER = re.compile(r"[-_:#./ ]*\d+$")
# cgroup v1's "no limit" for memory.limit_in_bytes: PAGE_COUNTER_MAX pages, rounded to the page size.
_V1_UNLIMITED = 1 << 62

_PLACEMENT_SHAPE = {
    "policy": "str", "rt_priority": "int", "autogroup_nice": "int", "mems_allowed": "str", "note": "str",
    "cgroup": {"version": "int", "cpu_max": "str", "cpu_weight": "int", "cpu_shares": "int", "cfs_quota_us": "int",
               "cfs_period_us": "int", "memory_max": "scalar", "cpu_limit": "num", "memory_limit_bytes": "int"},
}
THREADS_SHAPE = ("map", "int")


def placement_shape() -> Dict[str, Any]:
    return dict(_PLACEMENT_SHAPE)


def _read(path: str) -> Optional[str]:
    try:
        with open(path, "rb") as handle:
            return handle.read(65536).decode("utf-8", "replace")
    except OSError:
        return None


def _int(text: Optional[str]) -> Optional[int]:
    try:
        return int(text.strip()) if text is not None else None
    except ValueError:
        return None


class CgroupMounts:
    """Where this machine mounts cgroup v2 and each v1 controller (from /proc/self/mounts, read once a walk),
    and the limit files already read (processes of one server share their cgroup)."""

    def __init__(self) -> None:
        self.v2: Optional[str] = None
        self.v1: Dict[str, str] = {}
        self.files: Dict[str, Optional[str]] = {}
        for line in (_read("/proc/self/mounts") or "").splitlines():
            parts = line.split()
            if len(parts) < 4:
                continue
            if parts[2] == "cgroup2" and self.v2 is None:
                self.v2 = parts[1]
            elif parts[2] == "cgroup":
                for option in parts[3].split(","):
                    if option in ("cpu", "memory"):
                        self.v1.setdefault(option, parts[1])

    def read(self, path: str) -> Optional[str]:
        if path not in self.files:
            self.files[path] = _read(path)
        return self.files[path]


def _levels(mount: str, path: str) -> List[str]:
    """The cgroup's directory and each ancestor's, innermost first."""
    parts = [p for p in path.split("/") if p and p not in (".", "..")]
    return [os.path.join(mount, *parts[:n]) for n in range(len(parts), -1, -1)]


def _v2(mounts: CgroupMounts, path: str) -> Dict[str, Any]:
    assert mounts.v2 is not None
    out: Dict[str, Any] = {"version": 2}
    levels = _levels(mounts.v2, path)
    own = levels[0]
    cpu_max = mounts.read(os.path.join(own, "cpu.max"))
    if cpu_max is not None:
        out["cpu_max"] = cpu_max.strip()
    weight = _int(mounts.read(os.path.join(own, "cpu.weight")))
    if weight is not None:
        out["cpu_weight"] = weight
    memory_max = mounts.read(os.path.join(own, "memory.max"))
    if memory_max is not None:
        out["memory_max"] = memory_max.strip() if memory_max.strip() == "max" else _int(memory_max)
    cpus: List[float] = []
    memory: List[int] = []
    for level in levels:
        quota = (mounts.read(os.path.join(level, "cpu.max")) or "").split()
        if len(quota) == 2 and quota[0] != "max" and quota[0].isdigit() and quota[1].isdigit() and int(quota[1]):
            cpus.append(int(quota[0]) / int(quota[1]))
        limit = _int(mounts.read(os.path.join(level, "memory.max")))
        if limit is not None:
            memory.append(limit)
    if cpus:
        out["cpu_limit"] = round(min(cpus), 3)
    if memory:
        out["memory_limit_bytes"] = min(memory)
    return out


def _v1(mounts: CgroupMounts, paths: Dict[str, str]) -> Dict[str, Any]:
    out: Dict[str, Any] = {"version": 1}
    if "cpu" in mounts.v1 and "cpu" in paths:
        levels = _levels(mounts.v1["cpu"], paths["cpu"])
        for name, field in (("cpu.cfs_quota_us", "cfs_quota_us"), ("cpu.cfs_period_us", "cfs_period_us"),
                            ("cpu.shares", "cpu_shares")):
            value = _int(mounts.read(os.path.join(levels[0], name)))
            if value is not None:
                out[field] = value
        cpus = []
        for level in levels:
            quota = _int(mounts.read(os.path.join(level, "cpu.cfs_quota_us")))
            period = _int(mounts.read(os.path.join(level, "cpu.cfs_period_us")))
            if quota is not None and quota > 0 and period:
                cpus.append(quota / period)
        if cpus:
            out["cpu_limit"] = round(min(cpus), 3)
    if "memory" in mounts.v1 and "memory" in paths:
        levels = _levels(mounts.v1["memory"], paths["memory"])
        own = _int(mounts.read(os.path.join(levels[0], "memory.limit_in_bytes")))
        if own is not None:
            out["memory_max"] = "max" if own >= _V1_UNLIMITED else own
        limits = [v for v in (_int(mounts.read(os.path.join(level, "memory.limit_in_bytes"))) for level in levels)
                  if v is not None and v < _V1_UNLIMITED]
        if limits:
            out["memory_limit_bytes"] = min(limits)
    return out


def cgroup_limits(pid: int, mounts: CgroupMounts) -> Tuple[Optional[Dict[str, Any]], str]:
    """The process's cgroup limits (v2 when its cpu controller is there, else v1), and a note when unread."""
    text = _read(f"/proc/{pid}/cgroup")
    if text is None:
        return None, "cgroup: /proc/PID/cgroup unreadable"
    unified: Optional[str] = None
    v1: Dict[str, str] = {}
    for line in text.splitlines():
        hierarchy, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        if hierarchy == "0" and controllers == "":
            unified = path
        for name in controllers.split(","):
            if name in ("cpu", "memory"):
                v1[name] = path
    if v1 and mounts.v1:
        return _v1(mounts, v1), ""
    if unified is not None and mounts.v2 is not None:
        return _v2(mounts, unified), ""
    return None, "cgroup: no cpu or memory controller mounted here"


def group_name(comm: str) -> str:
    """A thread's group: its name without a trailing number ("pt_autograd_0" -> "pt_autograd")."""
    return _TRAILING_NUMBER.sub("", comm) or comm


def thread_groups(pid: int) -> Optional[Dict[str, int]]:
    """{thread name without its trailing number: count} (None: the task list is unreadable)."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    groups: Dict[str, int] = {}
    for tid in tids[:MAX_THREADS]:
        name = _read(f"/proc/{pid}/task/{tid}/comm")
        if name is None:
            continue  # ended between the listing and the read
        group = group_name(name.rstrip("\n"))
        groups[group] = groups.get(group, 0) + 1
    return groups


def read_placement(pid: int, mounts: CgroupMounts) -> Dict[str, Any]:
    """The placement facts of one process (see the module doc); what could not be read is said in "note"."""
    out: Dict[str, Any] = {}
    notes: List[str] = []
    try:
        policy = os.sched_getscheduler(pid)
        out["policy"] = _POLICIES.get(policy, f"policy {policy}")
        if policy in (1, 2):
            out["rt_priority"] = os.sched_getparam(pid).sched_priority
    except OSError as exc:
        notes.append(f"policy: {exc.strerror or exc}")
    autogroup = (_read(f"/proc/{pid}/autogroup") or "").split()
    if len(autogroup) == 3 and autogroup[1] == "nice":
        value = _int(autogroup[2])
        if value is not None:
            out["autogroup_nice"] = value
    for line in (_read(f"/proc/{pid}/status") or "").splitlines():
        if line.startswith("Mems_allowed_list:"):
            out["mems_allowed"] = line.split(":", 1)[1].strip()
    limits, note = cgroup_limits(pid, mounts)
    if limits is not None:
        out["cgroup"] = limits
    if note:
        notes.append(note)
    if notes:
        out["note"] = "; ".join(notes)
    return out
