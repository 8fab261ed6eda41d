"""The host collector: values agree with /proc, /sys, os and resource on this very machine."""
from __future__ import annotations

import json
import os
import platform
import re
import resource
import time
from pathlib import Path

from envsnap.analysis.knowledge import is_volatile
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import host
from envsnap.model import snapshot


def _collect(timeout=10.0):
    ctx = CaptureContext(timeout=timeout)
    ctx.deadline = time.monotonic() + timeout
    return host.collect(ctx)


def _mem_total() -> int:
    return int(re.search(r"MemTotal:\s+(\d+)", Path("/proc/meminfo").read_text()).group(1)) * 1024


def test_values_match_proc_sys_and_os():
    # MemTotal moves on VMs with a memory balloon or virtio-mem: read it around the collection.
    mem_before = _mem_total()
    result = _collect()
    mem_after = _mem_total()
    assert result["status"] == "ok"
    data = result["data"]
    json.dumps(data, allow_nan=False)
    cpu = data["cpu"]
    assert cpu["logical"] == os.cpu_count()
    assert cpu["usable"] == len(os.sched_getaffinity(0))
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = re.search(r"^model name\s*:\s*(.+)$", cpuinfo, re.M)
    if model:
        assert cpu["model"] == model.group(1).strip()
    assert isinstance(cpu["physical"], int) and 1 <= cpu["physical"] <= cpu["logical"]
    assert cpu["isa"]["avx2"] == (" avx2" in cpuinfo) if platform.machine() == "x86_64" else True
    assert data["container"]["hypervisor_flag"] == bool(re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M))

    assert min(mem_before, mem_after) <= data["memory"]["total_bytes"] <= max(mem_before, mem_after)
    assert data["memory"]["hugepages_configured"] == int(Path("/proc/sys/vm/nr_hugepages").read_text())
    bound = {d for d in ("virtio_balloon", "virtio_mem") if list(Path(f"/sys/bus/virtio/drivers/{d}").glob("virtio*"))}
    assert set(data["memory"]["hotplug"]) == bound
    assert data["kernel"]["release"] == platform.release()
    assert data["kernel"]["cmdline"] == Path("/proc/cmdline").read_text().strip()
    if Path("/etc/os-release").exists():
        os_id = re.search(r"^ID=\"?([^\"\n]+)", Path("/etc/os-release").read_text(), re.M).group(1)
        assert data["os"]["release"]["ID"] == os_id

    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists():
        assert data["thp"]["enabled"] == re.search(r"\[(\w+)\]", thp.read_text()).group(1)
    nodes = [p for p in Path("/sys/devices/system/node").glob("node[0-9]*")]
    assert data["numa_nodes"] == (len(nodes) if nodes else "unknown")

    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    expect = {"soft": "unlimited" if soft == resource.RLIM_INFINITY else soft,
              "hard": "unlimited" if hard == resource.RLIM_INFINITY else hard}
    assert data["ulimits"]["memlock"] == expect
    assert data["ulimits"]["nofile"]["soft"] == resource.getrlimit(resource.RLIMIT_NOFILE)[0]

    v2 = Path("/sys/fs/cgroup/cgroup.controllers").exists()
    assert (data["cgroup"]["version"] == "v2") == v2
    assert data["container"]["dockerenv"] == Path("/.dockerenv").exists()
    if not Path("/sys/devices/system/cpu/cpu0/cpufreq").exists():
        assert cpu["governor"] == "unknown" and "cpu.cpufreq" in data["unknown"]


def test_two_captures_differ_only_in_volatile_fields():
    first = snapshot.flatten({"sections": {"host": _collect()}})
    time.sleep(1.1)  # let uptime-like counters move
    second = snapshot.flatten({"sections": {"host": _collect()}})
    changed = {k for k in set(first) | set(second) if first.get(k) != second.get(k)}
    assert all(is_volatile(k) for k in changed), sorted(k for k in changed if not is_volatile(k))
    for key in ("host.memory.available_bytes", "host.boot_time", "host.load_avg.0", "host.cgroup.path",
                "host.memory.total_bytes", "host.numa.nodes.0.memory_total_bytes", "host.memory.hugepages_total"):
        if key in first:
            assert is_volatile(key), key
    assert not is_volatile("host.cpu.governor") and not is_volatile("host.ulimits.memlock.soft")
    assert not is_volatile("host.memory.hugepages_configured") and not is_volatile("host.memory.hotplug")


def test_cpufreq_governor_and_boost_from_a_sysfs_tree(tmp_path, monkeypatch):
    """There is no cpufreq in this VM: a tree with the layout the kernel documents
    (Documentation/admin-guide/pm/cpufreq.rst: cpuN/cpufreq/scaling_governor ...;
    intel_pstate.rst: intel_pstate/no_turbo, 1 = turbo off)."""
    for cpu, governor in (("cpu0", "performance"), ("cpu1", "performance"), ("cpu2", "powersave")):
        policy = tmp_path / cpu / "cpufreq"
        policy.mkdir(parents=True)
        (policy / "scaling_governor").write_text(governor + "\n")
        (policy / "scaling_driver").write_text("intel_pstate\n")
        (policy / "scaling_max_freq").write_text("3800000\n")
    (tmp_path / "intel_pstate").mkdir()
    (tmp_path / "intel_pstate" / "no_turbo").write_text("1\n")
    monkeypatch.setattr(host, "SYS_CPU", str(tmp_path))
    rec = host._Recorder()
    freq = host._cpufreq(rec)
    assert freq["governor"] == {"mixed": {"performance": 2, "powersave": 1}}
    assert freq["scaling_driver"] == "intel_pstate" and freq["scaling_max_khz"] == 3800000
    assert (freq["boost"], freq["boost_source"]) == (False, "intel_pstate/no_turbo")
    assert rec.unknown["cpu.energy_perf_preference"] == "no energy_performance_preference in cpufreq"


def test_cgroup_v2_limits_take_the_tightest_level(tmp_path):
    """This machine has cgroup v1; v2 files as the kernel documents them (cgroup-v2.rst:
    cpu.max "$MAX $PERIOD" or "max $PERIOD", memory.max bytes or "max")."""
    parent = tmp_path / "kubepods.slice"
    child = parent / "pod1.scope"
    child.mkdir(parents=True)
    (parent / "cpu.max").write_text("400000 100000\n")
    (child / "cpu.max").write_text("max 100000\n")
    (parent / "memory.max").write_text("max\n")
    (child / "memory.max").write_text("8589934592\n")
    (child / "cpuset.cpus.effective").write_text("0-3\n")
    levels = host._levels(str(tmp_path), "/kubepods.slice/pod1.scope/not-there")
    assert levels == [str(child), str(parent), str(tmp_path)]
    assert host._v2_limits(levels) == {"cpu_limit_cores": 4.0, "memory_limit_bytes": 8589934592, "cpuset": "0-3"}


def test_hanging_systemd_detect_virt_is_bounded(tmp_path, monkeypatch):
    fake = tmp_path / "systemd-detect-virt"
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    start = time.monotonic()
    result = _collect(timeout=1.5)
    assert time.monotonic() - start < 2.0
    assert result["data"]["container"]["virt_vm"] == "unknown"
    assert "timeout" in result["data"]["errors"]["container.virt_vm"]


def test_unreadable_sysfs_file_is_an_error_entry_not_a_crash(tmp_path):
    rec = host._Recorder()
    assert rec.read(str(tmp_path), "thp.enabled") is None  # a directory: EISDIR
    assert rec.read(str(tmp_path / "missing"), "thp.defrag") is None
    assert "thp.enabled" in rec.errors and "thp.defrag" in rec.unknown
    assert rec.guard("x", lambda: 1 / 0) == "unknown" and rec.errors["x"].startswith("ZeroDivisionError")


def test_summary_line():
    data = _collect()["data"]
    line = host.summarize(data)[0]
    assert f"kernel {platform.release()}" in line and f"{os.cpu_count()} logical" in line
    assert any(entry.startswith("ulimit -l ") for entry in host.summarize(data))
