"""How a process is scheduled and placed, read from real processes: policy, threads by name, cgroup limits."""
from __future__ import annotations

import os
import subprocess
import sys
import uuid

import pytest

from envsnap.capture.collectors import placement

# A child that sets its own policy and names two threads of a pool, then waits.
CHILD = """\
import ctypes, os, sys, threading
policy = {"batch": os.SCHED_BATCH, "idle": os.SCHED_IDLE, "other": os.SCHED_OTHER}[sys.argv[1]]
os.sched_setscheduler(0, policy, os.sched_param(0))
ready = threading.Barrier(3)
def pool(name):
    ctypes.CDLL(None).prctl(15, name.encode())  # PR_SET_NAME
    ready.wait()
    threading.Event().wait()
for i in range(2):
    threading.Thread(target=pool, args=(f"tok_worker_{i}",), daemon=True).start()
ready.wait()
print("ready", flush=True)
sys.stdin.read()
"""


@pytest.mark.parametrize("policy, name", [("batch", "SCHED_BATCH"), ("idle", "SCHED_IDLE"), ("other", "SCHED_OTHER")])
def test_policy_and_threads_by_name_of_a_real_process(policy, name):
    proc = subprocess.Popen([sys.executable, "-c", CHILD, policy], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        found = placement.read_placement(proc.pid, placement.CgroupMounts())
        groups = placement.thread_groups(proc.pid)
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    assert found["policy"] == name
    assert "rt_priority" not in found  # only FIFO/RR have one
    assert groups["tok_worker"] == 2  # one pool, its trailing numbers taken off
    assert sum(groups.values()) >= 3
    with open(f"/proc/{os.getpid()}/status") as status:
        mems = next(line.split(":", 1)[1].strip() for line in status if line.startswith("Mems_allowed_list:"))
    assert found["mems_allowed"] == mems


def test_a_gone_process_is_a_note_not_an_exception():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    found = placement.read_placement(proc.pid, placement.CgroupMounts())
    assert "policy" not in found and "note" in found
    assert placement.thread_groups(proc.pid) is None


def test_group_names():
    assert placement.group_name("pt_autograd_0") == "pt_autograd"
    assert placement.group_name("ZMQbg/IO/0") == "ZMQbg/IO"
    assert placement.group_name("cuda-EvtHandlr") == "cuda-EvtHandlr"
    assert placement.group_name("1234") == "1234"  # all digits: kept as it is


def _writable_v1_cpu(mounts):
    where = mounts.v1.get("cpu")
    return where if where and os.access(where, os.W_OK) else None


def test_cgroup_limits_of_a_process_moved_into_a_real_cgroup():
    """A real cgroup with a CPU quota and a memory limit (root, cgroup v1 or v2): the limits read back, the
    tightest over the hierarchy."""
    mounts = placement.CgroupMounts()
    name = f"envsnap-test-{uuid.uuid4().hex[:8]}"
    v1_cpu = _writable_v1_cpu(mounts)
    v2 = mounts.v2 if mounts.v2 and os.access(mounts.v2, os.W_OK) and os.path.exists(
        os.path.join(mounts.v2, "cgroup.subtree_control")) else None
    if os.geteuid() != 0 or not (v1_cpu or v2):
        pytest.skip("needs root and a writable cgroup hierarchy")
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    made = []
    try:
        if v1_cpu and "memory" in mounts.v1:
            cpu_dir, mem_dir = os.path.join(v1_cpu, name), os.path.join(mounts.v1["memory"], name)
            for where in (cpu_dir, mem_dir):
                os.mkdir(where)
                made.append(where)
            with open(os.path.join(cpu_dir, "cpu.cfs_quota_us"), "w") as handle:
                handle.write("50000")
            with open(os.path.join(cpu_dir, "cpu.shares"), "w") as handle:
                handle.write("512")
            with open(os.path.join(mem_dir, "memory.limit_in_bytes"), "w") as handle:
                handle.write(str(1 << 30))
            for where in (cpu_dir, mem_dir):
                with open(os.path.join(where, "cgroup.procs"), "w") as handle:
                    handle.write(str(proc.pid))
            limits, note = placement.cgroup_limits(proc.pid, placement.CgroupMounts())
            assert note == ""
            assert limits["version"] == 1 and limits["cfs_quota_us"] == 50000 and limits["cpu_shares"] == 512
            assert limits["cpu_limit"] == 0.5 and limits["memory_limit_bytes"] == 1 << 30
            assert limits["memory_max"] == 1 << 30
        else:
            pytest.skip("cgroup v2 only: not exercised on this machine")
    finally:
        proc.stdin.close()
        proc.wait()
        for where in reversed(made):
            try:
                os.rmdir(where)
            except OSError:
                pass
