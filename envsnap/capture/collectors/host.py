"""The machine under the software: OS, kernel, CPU and its frequency policy, memory, limits.

Everything here can change inference speed without any package changing: the cpufreq
governor and turbo boost (host-side scheduling loops of a TP server are CPU bound),
transparent hugepages, NUMA layout and balancing, cgroup CPU/memory limits of a
container, and RLIMIT_MEMLOCK (NCCL/RDMA need to pin memory; a low `ulimit -l` in a
container makes NCCL fall back or fail).

Read from /proc and /sys, psutil and `resource`; the only subprocess is
`systemd-detect-virt` (time-bounded, when installed). A value that cannot be read is
recorded as "unknown" with the reason under `unknown` (feature absent, e.g. no
cpufreq in a VM) or `errors` (it exists but reading failed) — never a crash.
Fields that move on their own (free memory, load, boot time, current MHz) sit under
keys the volatile rules below (RULES) name: host.memory.available*,
host.load_avg, host.boot_time, host.cpu.current_mhz, host.cgroup.path; so do the memory
totals (MemTotal of the host and of each NUMA node moves with a VM's memory balloon or
virtio-mem: `memory.hotplug` names the driver) and HugePages_Total (it counts surplus pages;
the configured pool is `memory.hugepages_configured`/`hugepages_overcommit`).

One module, as one concept: one small reader per host fact (/proc, /sys, cgroup v1 and v2, os-release, DMI),
each never raising and sharing the 'unknown, with the reason' convention.
"""
from __future__ import annotations

import glob
import os
import re
import resource
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from envsnap.capture.base import CaptureContext, ok
from envsnap.model.rules import (
    COMMUNICATION,
    CPU_HOST,
    MEMORY,
    SectionRules,
    rule,
    volatile,
)
from envsnap.model.types import Section
from envsnap.subproc import run_command

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
SHAPE = {"os": "dict", "cpu": "dict", "thp": "dict", "numa_nodes": "num", "memory": "dict", "cgroup": "dict",
         "container": "dict", "ulimits": "dict"}
RULES = SectionRules(category="host", component=CPU_HOST, compares="host settings", rules=(
    volatile("host.boot_time*", "changes at every reboot"),
    volatile("host.uptime*", "grows every second"),
    volatile("host.load_avg*", "instantaneous load"),
    volatile("host.memory.available*", "memory in use"),
    volatile("host.memory.free*", "memory in use"),
    volatile("host.memory.used*", "memory in use"),
    volatile("host.memory.buffers*", "memory in use"),
    volatile("host.memory.cached*", "memory in use"),
    # MemTotal is not a constant on VMs: a virtio-balloon without VIRTIO_BALLOON_F_DEFLATE_ON_OOM takes the
    # pages it inflates out of MemTotal (Linux drivers/virtio/virtio_balloon.c, adjust_managed_page_count), and
    # virtio-mem plugs and unplugs memory blocks while the guest runs (Linux Documentation/admin-guide/mm/
    # memory-hotplug.rst): two captures moments apart differ. `host.memory.hotplug` says which is present.
    volatile("host.memory.total_bytes", "MemTotal moves with memory ballooning/hotplug on VMs (see host.memory.hotplug)"),
    volatile("host.numa.nodes.*.memory_total_bytes", "a NUMA node's MemTotal moves with memory ballooning/hotplug on VMs"),
    # Linux Documentation/admin-guide/mm/hugetlbpage.rst: HugePages_Total counts surplus pages too (allocated
    # on demand up to nr_overcommit_hugepages and freed again); the configured pool is
    # host.memory.hugepages_configured (/proc/sys/vm/nr_hugepages).
    volatile("host.memory.hugepages_total", "HugePages_Total includes surplus pages allocated and freed on demand"),
    volatile("host.cpu.freq_current*", "current CPU clock"),
    volatile("host.cpu.current_mhz*", "current CPU clock"),
    volatile("host.cgroup.path", "the cgroup path names the container instance (a new id per container start)"),

    # --- Host (kernel docs: admin-guide/pm/cpufreq.rst, admin-guide/mm/transhuge.rst, cgroup-v2.rst) ---
    rule("host.cpu.governor*", "host", CPU_HOST, 0.45, "CPU frequency governor changed (powersave slows the launch path)"),
    rule("host.cpu.boost*", "host", CPU_HOST, 0.35, "CPU turbo/boost changed"),
    rule("host.cpu.logical", "host", CPU_HOST, 0.45, "a different number of CPUs"),
    rule("host.cpu.physical", "host", CPU_HOST, 0.4, "a different number of CPU cores"),
    rule("host.cpu.model", "host", CPU_HOST, 0.4, "a different CPU"),
    rule("host.cgroup*", "host", CPU_HOST, 0.45, "cgroup limits changed (CPU quota throttles the scheduler/launch threads)"),
    rule("host.thp*", "host", MEMORY, 0.25, "transparent huge pages setting changed"),
    rule("host.numa_nodes", "host", CPU_HOST, 0.3, "NUMA layout changed"),
    # NCCL docs (troubleshooting): pinned memory needs a high memlock limit.
    rule("host.ulimits.memlock*", "host", COMMUNICATION, 0.3, "memlock limit changed (pinned/registered memory)"),
    rule("host.kernel*", "host", CPU_HOST, 0.25, "the Linux kernel changed"),
    rule("host.container*", "host", CPU_HOST, 0.25, "container setup changed"),
    # Linux Documentation/admin-guide/mm/hugetlbpage.rst: the persistent huge page pool (nr_hugepages) and
    # how far it may grow on demand (nr_overcommit_hugepages): configuration, unlike HugePages_Total/Free.
    rule("host.memory.hugepages_configured", "host", MEMORY, 0.2, "the configured huge page pool changed"),
    rule("host.memory.hugepages_overcommit", "host", MEMORY, 0.1, "the huge page overcommit limit changed"),
))

UNKNOWN = "unknown"
SYS_CPU = "/sys/devices/system/cpu"
# CPU flags worth recording: instruction sets the CPU-side kernels dispatch on, and the
# flag a hypervisor sets. The full list (100+ flags) would swamp a diff.
ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512vl", "avx512_vnni",
             "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16", "amx_int8", "sha_ni", "aes")
_V1_UNLIMITED = 1 << 62  # cgroup v1 reports "no limit" as a huge page-aligned number


class _Recorder:
    """Collects "unknown" reasons and read errors while the sections are built."""

    def __init__(self) -> None:
        self.unknown: Dict[str, str] = {}
        self.errors: Dict[str, str] = {}

    def read(self, path: str, field: str, absent_note: Optional[str] = None) -> Optional[str]:
        """A sysfs/procfs file's stripped text; None (and a note under the field) when unreadable."""
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as handle:
                return handle.read().strip()
        except FileNotFoundError:
            self.unknown.setdefault(field, absent_note or f"{path} does not exist")
        except OSError as exc:
            self.errors.setdefault(field, f"{path}: {exc.strerror or exc}")
        return None

    def guard(self, field: str, func: Callable[[], Any], default: Any = UNKNOWN) -> Any:
        """Run one piece; anything it raises becomes an error entry and the default value."""
        try:
            return func()
        except Exception as exc:  # one unreadable piece must not lose the rest of the host
            self.errors[field] = f"{type(exc).__name__}: {exc}"[:300]
            return default


def _read_quiet(path: str) -> Optional[str]:
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def _bracketed(text: Optional[str]) -> Optional[str]:
    """The selected value of a sysfs choice file: 'always [madvise] never' -> 'madvise'."""
    if text is None:
        return None
    match = re.search(r"\[([^\]]+)\]", text)
    return match.group(1) if match else text


def _uniform(values: List[str]) -> Any:
    """One value when all CPUs agree, else {"mixed": {value: count}} so a half-set governor shows."""
    if not values:
        return UNKNOWN
    counts = Counter(values)
    if len(counts) == 1:
        return values[0]
    return {"mixed": dict(sorted(counts.items()))}


def os_info(rec: _Recorder) -> Dict[str, Any]:
    import platform

    info: Dict[str, Any] = {"system": platform.system(), "machine": platform.machine()}
    text = rec.read("/etc/os-release", "os.release", None)
    if text is None:
        text = _read_quiet("/usr/lib/os-release")
        if text is not None:
            rec.unknown.pop("os.release", None)
    release: Dict[str, str] = {}
    for line in (text or "").splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("NAME", "ID", "ID_LIKE", "VERSION_ID", "VERSION_CODENAME", "PRETTY_NAME", "VARIANT_ID", "BUILD_ID"):
            release[key.strip()] = value.strip().strip("'\"")
    info["release"] = release or UNKNOWN
    try:
        info["libc"] = os.confstr("CS_GNU_LIBC_VERSION") or UNKNOWN
    except (ValueError, OSError, AttributeError):
        libc, version = platform.libc_ver()
        info["libc"] = f"{libc} {version}".strip() or UNKNOWN
    return info


def kernel_info(rec: _Recorder) -> Dict[str, Any]:
    uname = os.uname()
    cmdline = rec.read("/proc/cmdline", "kernel.cmdline")
    return {"release": uname.release, "version": uname.version,
            "cmdline": cmdline if cmdline is not None else UNKNOWN}


def _cpuinfo(rec: _Recorder) -> Tuple[Dict[str, str], Set[str], int]:
    """First processor block's fields, the flags, and the number of distinct physical ids."""
    text = rec.read("/proc/cpuinfo", "cpu.model") or ""
    first: Dict[str, str] = {}
    sockets = set()
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key, value = key.strip(), value.strip()
        if key == "physical id":
            sockets.add(value)
        first.setdefault(key, value)
    flags = set((first.get("flags") or first.get("Features") or "").split())
    return first, flags, len(sockets)


def cpu_info(rec: _Recorder, cpuinfo: Tuple[Dict[str, str], Set[str], int]) -> Dict[str, Any]:
    import platform

    import psutil

    fields, flags, sockets = cpuinfo
    model = fields.get("model name") or fields.get("Model Name") or fields.get("Hardware") or platform.processor()
    cpu: Dict[str, Any] = {
        "model": model or UNKNOWN,
        "vendor": fields.get("vendor_id") or fields.get("CPU implementer") or UNKNOWN,
        "logical": os.cpu_count(),
        "physical": rec.guard("cpu.physical", lambda: psutil.cpu_count(logical=False)) or UNKNOWN,
        "sockets": sockets or UNKNOWN,
        "isa": {flag: flag in flags for flag in ISA_FLAGS} if flags else UNKNOWN,
    }
    try:
        cpu["usable"] = len(os.sched_getaffinity(0))  # what taskset/cpuset leave this process
    except (AttributeError, OSError):
        cpu["usable"] = UNKNOWN
    smt = _read_quiet(f"{SYS_CPU}/smt/control")
    cpu["smt"] = smt if smt is not None else UNKNOWN
    cpu.update(_cpufreq(rec))
    idle = _read_quiet(f"{SYS_CPU}/cpuidle/current_driver")
    cpu["cpuidle_driver"] = idle if idle is not None else UNKNOWN
    freq = rec.guard("cpu.current_mhz", psutil.cpu_freq, None)
    cpu["current_mhz"] = round(freq.current, 1) if freq and freq.current else UNKNOWN
    return cpu


def _cpufreq(rec: _Recorder) -> Dict[str, Any]:
    """Governor, driver, EPP, frequency limits (all CPUs, uniform or mixed) and turbo boost."""
    policies = sorted(glob.glob(f"{SYS_CPU}/cpu[0-9]*/cpufreq"))
    out: Dict[str, Any] = {}
    names = {"governor": "scaling_governor", "scaling_driver": "scaling_driver",
             "energy_perf_preference": "energy_performance_preference",
             "scaling_max_khz": "scaling_max_freq", "scaling_min_khz": "scaling_min_freq",
             "max_khz": "cpuinfo_max_freq"}
    for field, filename in names.items():
        values = [v for v in (_read_quiet(os.path.join(p, filename)) for p in policies) if v is not None]
        out[field] = _uniform([int(v) if v.isdigit() else v for v in values])  # type: ignore[misc]
        if not values and policies:
            rec.unknown[f"cpu.{field}"] = f"no {filename} in cpufreq"
    if not policies:
        rec.unknown["cpu.cpufreq"] = ("no cpufreq in /sys (no cpufreq driver, typical inside VMs): "
                                      "governor, driver, EPP and frequency limits unknown")
    out["boost"], out["boost_source"] = _boost(rec)
    pstate = _read_quiet(f"{SYS_CPU}/intel_pstate/status")
    if pstate is not None:
        out["intel_pstate"] = pstate
    return out


def _boost(rec: _Recorder) -> Tuple[Any, str]:
    no_turbo = _read_quiet(f"{SYS_CPU}/intel_pstate/no_turbo")
    if no_turbo is not None:
        return no_turbo.strip() == "0", "intel_pstate/no_turbo"
    boost = _read_quiet(f"{SYS_CPU}/cpufreq/boost")
    if boost is not None:
        return boost.strip() == "1", "cpufreq/boost"
    rec.unknown["cpu.boost"] = "neither intel_pstate/no_turbo nor cpufreq/boost in /sys"
    return UNKNOWN, "none"


def thp_info(rec: _Recorder) -> Dict[str, Any]:
    base = "/sys/kernel/mm/transparent_hugepage"
    out: Dict[str, Any] = {}
    for name in ("enabled", "defrag", "shmem_enabled"):
        value = _bracketed(rec.read(f"{base}/{name}", f"thp.{name}"))
        out[name] = value if value is not None else UNKNOWN
    return out


def numa_info(rec: _Recorder) -> Tuple[Any, Dict[str, Any]]:
    nodes: Dict[str, Any] = {}
    for path in sorted(glob.glob("/sys/devices/system/node/node[0-9]*")):
        index = path.rsplit("node", 1)[1]
        node: Dict[str, Any] = {"cpus": _read_quiet(f"{path}/cpulist") or UNKNOWN}
        meminfo = _read_quiet(f"{path}/meminfo") or ""
        match = re.search(r"MemTotal:\s+(\d+)\s*kB", meminfo)
        node["memory_total_bytes"] = int(match.group(1)) * 1024 if match else UNKNOWN
        nodes[index] = node
    if not nodes:
        rec.unknown["numa_nodes"] = "no /sys/devices/system/node (kernel without NUMA support)"
    balancing = _read_quiet("/proc/sys/kernel/numa_balancing")
    return (len(nodes) if nodes else UNKNOWN), {"nodes": nodes, "balancing": _int_or(balancing)}


def _int_or(text: Optional[str], default: Any = UNKNOWN) -> Any:
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        return text


# Virtio drivers that change MemTotal while the guest runs: the balloon (pages it inflates leave
# MemTotal unless the device offers deflate-on-oom: drivers/virtio/virtio_balloon.c) and virtio-mem
# (memory blocks plugged and unplugged: Documentation/admin-guide/mm/memory-hotplug.rst).
_MEMORY_RESIZERS = ("virtio_balloon", "virtio_mem")


def memory_hotplug() -> List[str]:
    """Which memory-resizing drivers are bound to a device here (why MemTotal may move between captures)."""
    found = []
    for driver in _MEMORY_RESIZERS:
        if glob.glob(f"/sys/bus/virtio/drivers/{driver}/virtio*"):
            found.append(driver)
    return found


def memory_info(rec: _Recorder) -> Dict[str, Any]:
    import psutil

    mem: Dict[str, Any] = {}
    vm = rec.guard("memory", psutil.virtual_memory, None)
    mem["total_bytes"] = vm.total if vm else UNKNOWN
    mem["available_bytes"] = vm.available if vm else UNKNOWN  # volatile
    swap = rec.guard("memory.swap", psutil.swap_memory, None)
    mem["swap_total_bytes"] = swap.total if swap else UNKNOWN
    meminfo = _read_quiet("/proc/meminfo") or ""
    for key, field, scale in (("HugePages_Total", "hugepages_total", 1), ("Hugepagesize", "hugepage_size_bytes", 1024)):
        match = re.search(rf"^{key}:\s+(\d+)", meminfo, re.M)
        mem[field] = int(match.group(1)) * scale if match else UNKNOWN
    # HugePages_Total counts surplus pages as well (allocated and freed on demand, Linux
    # Documentation/admin-guide/mm/hugetlbpage.rst): the configured pool is these two settings.
    mem["hugepages_configured"] = _int_or(_read_quiet("/proc/sys/vm/nr_hugepages"))
    mem["hugepages_overcommit"] = _int_or(_read_quiet("/proc/sys/vm/nr_overcommit_hugepages"))
    mem["hotplug"] = memory_hotplug()
    mem["swappiness"] = _int_or(_read_quiet("/proc/sys/vm/swappiness"))
    mem["overcommit_memory"] = _int_or(_read_quiet("/proc/sys/vm/overcommit_memory"))
    return mem


# --- cgroups --------------------------------------------------------------------------

def _proc_cgroups() -> Dict[str, str]:
    """{controller or "" for v2: path} from /proc/self/cgroup."""
    found: Dict[str, str] = {}
    for line in (_read_quiet("/proc/self/cgroup") or "").splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if not controllers:
            found[""] = path
        for name in controllers.split(","):
            if name:
                found[name] = path
    return found


def _levels(mount: str, path: str) -> List[str]:
    """The cgroup's directory and its ancestors inside the mount, deepest first.

    Inside a container the mount's root often *is* the container's cgroup while
    /proc/self/cgroup shows the host-side path, which then does not exist under the
    mount: the walk simply starts at the deepest level that does.
    """
    levels = []
    rel = path.strip("/")
    while True:
        candidate = os.path.join(mount, rel) if rel else mount
        if os.path.isdir(candidate):
            levels.append(candidate)
        if not rel:
            break
        rel = os.path.dirname(rel)
    return levels


def _v2_limits(levels: List[str]) -> Dict[str, Any]:
    cpu_limit: Any = "max"
    memory_limit: Any = "max"
    for level in levels:  # the tightest limit on the way up is the one that applies
        cpu_max = _read_quiet(os.path.join(level, "cpu.max"))
        if cpu_max:
            quota, _, period = cpu_max.partition(" ")
            if quota != "max" and period.isdigit() and int(period):
                cores = round(int(quota) / int(period), 3)
                cpu_limit = cores if cpu_limit == "max" else min(cpu_limit, cores)
        mem_max = _read_quiet(os.path.join(level, "memory.max"))
        if mem_max and mem_max.isdigit():
            memory_limit = int(mem_max) if memory_limit == "max" else min(memory_limit, int(mem_max))
    cpuset = next((v for v in (_read_quiet(os.path.join(level, "cpuset.cpus.effective")) for level in levels) if v), None)
    return {"cpu_limit_cores": cpu_limit, "memory_limit_bytes": memory_limit, "cpuset": cpuset or UNKNOWN}


def _v1_mount(controller: str) -> Optional[str]:
    for candidate in glob.glob("/sys/fs/cgroup/*"):
        if controller in os.path.basename(candidate).split(",") and os.path.isdir(candidate):
            return candidate
    return None


def _v1_limits(paths: Dict[str, str]) -> Dict[str, Any]:
    cpu_limit: Any = "max"
    memory_limit: Any = "max"
    cpuset: Any = UNKNOWN
    mount = _v1_mount("cpu")
    for level in _levels(mount, paths.get("cpu", "/")) if mount else []:
        quota = _int_or(_read_quiet(os.path.join(level, "cpu.cfs_quota_us")), None)
        period = _int_or(_read_quiet(os.path.join(level, "cpu.cfs_period_us")), None)
        if isinstance(quota, int) and quota > 0 and isinstance(period, int) and period > 0:
            cores = round(quota / period, 3)
            cpu_limit = cores if cpu_limit == "max" else min(cpu_limit, cores)
    mount = _v1_mount("memory")
    for level in _levels(mount, paths.get("memory", "/")) if mount else []:
        limit = _int_or(_read_quiet(os.path.join(level, "memory.limit_in_bytes")), None)
        if isinstance(limit, int) and 0 < limit < _V1_UNLIMITED:
            memory_limit = limit if memory_limit == "max" else min(memory_limit, limit)
    mount = _v1_mount("cpuset")
    for level in _levels(mount, paths.get("cpuset", "/")) if mount else []:
        value = _read_quiet(os.path.join(level, "cpuset.effective_cpus")) or _read_quiet(os.path.join(level, "cpuset.cpus"))
        if value:
            cpuset = value
            break
    return {"cpu_limit_cores": cpu_limit, "memory_limit_bytes": memory_limit, "cpuset": cpuset}


def cgroup_info(rec: _Recorder) -> Dict[str, Any]:
    paths = _proc_cgroups()
    if os.path.exists("/sys/fs/cgroup/cgroup.controllers"):
        version = "v2"
    elif _v1_mount("memory") or _v1_mount("cpu"):
        version = "hybrid" if os.path.isdir("/sys/fs/cgroup/unified") else "v1"
    else:
        rec.unknown["cgroup"] = "no cgroup filesystem under /sys/fs/cgroup"
        return {"version": "none"}
    info: Dict[str, Any] = {"version": version}
    if version == "v2":
        info["path"] = paths.get("", UNKNOWN)
        info.update(_v2_limits(_levels("/sys/fs/cgroup", paths.get("", "/"))))
    else:
        info["path"] = paths.get("memory", paths.get("cpu", UNKNOWN))
        info.update(_v1_limits(paths))
    return info


# --- containers and VMs ---------------------------------------------------------------

def _detect_virt(ctx: CaptureContext, rec: _Recorder) -> Dict[str, Any]:
    import shutil

    if shutil.which("systemd-detect-virt") is None:
        rec.unknown["container.virt"] = "systemd-detect-virt is not installed"
        return {"virt_vm": UNKNOWN, "virt_container": UNKNOWN}
    out: Dict[str, Any] = {}
    for kind, flag in (("vm", "--vm"), ("container", "--container")):
        result = run_command(["systemd-detect-virt", flag], timeout=ctx.remaining(3.0))
        text = result.stdout.strip()
        if result.timed_out or (not text and result.error):
            rec.errors[f"container.virt_{kind}"] = f"systemd-detect-virt {flag}: {result.error}"
            out[f"virt_{kind}"] = UNKNOWN
        else:
            out[f"virt_{kind}"] = text or "none"  # prints "none" and exits 1 when there is none
    return out


def _cgroup_hint(paths: Dict[str, str]) -> Optional[str]:
    joined = " ".join(paths.values())
    for needle, name in (("kubepods", "kubernetes"), ("docker", "docker"), ("libpod", "podman"),
                         ("containerd", "containerd"), ("lxc", "lxc"), ("machine.slice", "systemd-machine")):
        if needle in joined:
            return name
    return None


def container_info(ctx: CaptureContext, rec: _Recorder, flags: Set[str]) -> Dict[str, Any]:
    info: Dict[str, Any] = {
        "dockerenv": os.path.exists("/.dockerenv"),
        "containerenv": os.path.exists("/run/.containerenv"),
        "kubernetes": bool(os.environ.get("KUBERNETES_SERVICE_HOST")) or os.path.isdir("/var/run/secrets/kubernetes.io"),
        "cgroup_hint": _cgroup_hint(_proc_cgroups()),
        "hypervisor_flag": "hypervisor" in flags if flags else UNKNOWN,
    }
    for name in ("product_name", "sys_vendor"):
        value = _read_quiet(f"/sys/class/dmi/id/{name}")
        info[f"dmi_{name}"] = value if value is not None else UNKNOWN
    info.update(_detect_virt(ctx, rec))
    return info


def ulimits() -> Dict[str, Any]:
    def show(value: int) -> Any:
        return "unlimited" if value == resource.RLIM_INFINITY else value

    out: Dict[str, Any] = {}
    for name, which in (("memlock", "RLIMIT_MEMLOCK"), ("nofile", "RLIMIT_NOFILE"),
                        ("stack", "RLIMIT_STACK"), ("nproc", "RLIMIT_NPROC")):
        limit = getattr(resource, which, None)
        if limit is None:
            out[name] = UNKNOWN
            continue
        soft, hard = resource.getrlimit(limit)
        out[name] = {"soft": show(soft), "hard": show(hard)}
    return out


def collect(ctx: CaptureContext) -> Section:
    import psutil

    rec = _Recorder()
    data: Dict[str, Any] = {}
    data["os"] = rec.guard("os", lambda: os_info(rec))
    data["kernel"] = rec.guard("kernel", lambda: kernel_info(rec))
    # /proc/cpuinfo is read once: on large x86 hosts each read samples every CPU's clock (slow).
    cpuinfo = rec.guard("cpu.cpuinfo", lambda: _cpuinfo(rec), ({}, set(), 0))
    flags = cpuinfo[1]
    data["cpu"] = rec.guard("cpu", lambda: cpu_info(rec, cpuinfo))
    data["thp"] = rec.guard("thp", lambda: thp_info(rec))
    numa = rec.guard("numa", lambda: numa_info(rec), (UNKNOWN, UNKNOWN))
    data["numa_nodes"], data["numa"] = numa
    data["memory"] = rec.guard("memory", lambda: memory_info(rec))
    data["cgroup"] = rec.guard("cgroup", lambda: cgroup_info(rec))
    data["container"] = rec.guard("container", lambda: container_info(ctx, rec, flags))
    data["ulimits"] = rec.guard("ulimits", ulimits)
    data["boot_time"] = rec.guard("boot_time", lambda: int(psutil.boot_time()))  # volatile
    data["load_avg"] = rec.guard("load_avg", lambda: [round(x, 2) for x in os.getloadavg()])  # volatile
    data["unknown"] = dict(sorted(rec.unknown.items()))
    data["errors"] = dict(sorted(rec.errors.items()))
    return ok(data)


def _gib(value: Any) -> str:
    return f"{value / 2**30:.0f} GiB" if isinstance(value, (int, float)) else str(value)


def _hugepages_line(memory: Dict[str, Any]) -> str:
    size = memory.get("hugepage_size_bytes")
    size_text = f"{size >> 20} MiB" if isinstance(size, int) else str(size)
    return (f"huge pages of {size_text}: pool {memory.get('hugepages_configured', '?')} "
            f"(+{memory.get('hugepages_overcommit', '?')} overcommit), {memory.get('hugepages_total', '?')} now")


def _virt_kind(container: Dict[str, Any]) -> str:
    if not isinstance(container, dict):
        return "?"
    vm = container.get("virt_vm")
    box = container.get("virt_container")
    parts = []
    if box and box not in ("none", UNKNOWN):
        parts.append(box)
    elif container.get("dockerenv") or container.get("containerenv") or container.get("cgroup_hint"):
        parts.append(container.get("cgroup_hint") or ("podman" if container.get("containerenv") else "docker"))
    if vm and vm not in ("none", UNKNOWN):
        parts.append(f"vm {vm}")
    elif container.get("hypervisor_flag") is True:
        parts.append("vm")
    return "+".join(parts) or "bare metal"


def summarize(data: Dict[str, Any]) -> List[str]:
    os_part = data.get("os", {})
    release = os_part.get("release", {}) if isinstance(os_part, dict) else {}
    name = release.get("PRETTY_NAME") if isinstance(release, dict) else None
    kernel = data.get("kernel", {}).get("release", "?") if isinstance(data.get("kernel"), dict) else "?"
    cpu = data.get("cpu", {}) if isinstance(data.get("cpu"), dict) else {}
    memory = data.get("memory", {}) if isinstance(data.get("memory"), dict) else {}
    thp = data.get("thp", {}) if isinstance(data.get("thp"), dict) else {}
    cg = data.get("cgroup", {}) if isinstance(data.get("cgroup"), dict) else {}
    limits = data.get("ulimits", {}) if isinstance(data.get("ulimits"), dict) else {}
    memlock = (limits.get("memlock") or {}).get("soft", "?") if isinstance(limits.get("memlock"), dict) else "?"
    nofile = limits.get("nofile")
    head = (f"{name or os_part.get('system', '?')}, kernel {kernel}, {cpu.get('model', '?')} "
            f"({cpu.get('logical', '?')} logical/{cpu.get('physical', '?')} physical), {_gib(memory.get('total_bytes'))}, "
            f"governor {cpu.get('governor', '?')}, boost {cpu.get('boost', '?')}, THP {thp.get('enabled', '?')}, "
            f"{_virt_kind(data.get('container', {}))}")
    lines = [head,
             f"NUMA nodes {data.get('numa_nodes', '?')}, usable CPUs {cpu.get('usable', '?')}, SMT {cpu.get('smt', '?')}",
             f"cgroup {cg.get('version', '?')}: cpu {cg.get('cpu_limit_cores', '?')}, "
             f"memory {cg.get('memory_limit_bytes', '?')}, cpuset {cg.get('cpuset', '?')}",
             f"ulimit -l {memlock}, -n {nofile.get('soft', '?') if isinstance(nofile, dict) else '?'}",
             _hugepages_line(memory)]
    if memory.get("hotplug"):
        lines.append(f"memory resized at run time by {', '.join(memory['hotplug'])}: MemTotal moves, so it is "
                     "compared as volatile")
    lines += [f"unknown {k}: {v}" for k, v in data.get("unknown", {}).items()]
    lines += [f"error {k}: {v}" for k, v in data.get("errors", {}).items()]
    return lines
