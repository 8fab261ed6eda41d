"""The scheduler's counts of a real process's threads (run-queue wait, time on CPU, names) and how the
mechanism says them."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from envsnap.analysis.runs.mechanism import mechanism
from envsnap.measure.sched_sampling import ThreadSampler, major_faults

# Two named threads that hash (hashlib releases the GIL): on one CPU each waits while the other runs.
BUSY = """\
import ctypes, hashlib, os, sys, threading
os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
data = os.urandom(1 << 20)
def spin(name):
    ctypes.CDLL(None).prctl(15, name.encode())
    while True:
        hashlib.sha256(data).digest()
for i in range(2):
    threading.Thread(target=spin, args=(f"spinner-{i}",), daemon=True).start()
print("ready", flush=True)
sys.stdin.read()
"""


def test_two_threads_on_one_cpu_wait_on_the_run_queue():
    proc = subprocess.Popen([sys.executable, "-c", BUSY], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        sampler = ThreadSampler()
        sampler.baseline([proc.pid])
        time.sleep(1.0)
        sampler.sample([proc.pid])
        faults = major_faults(proc.pid)
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    summary = sampler.summary()
    assert summary["thread_names"]["spinner"] == 2 and summary["threads_seen"] >= 3
    # Over one second the two spinners shared one CPU: together at most ~1 s on it, and each waited while
    # the other ran (generous bounds: other programs may take that CPU too).
    assert 0.05 < summary["on_cpu_s"] < 1.5, summary
    assert summary["run_delay_s"] > 0.2, summary
    assert summary["timeslices"] > 0
    assert isinstance(faults, int) and faults >= 0


def test_a_gone_process_gives_nothing_not_an_exception():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    sampler = ThreadSampler()
    sampler.baseline([proc.pid])
    sampler.sample([proc.pid])
    assert sampler.summary() == {} and major_faults(proc.pid) is None


def _runs(wall, wait, server_wait):
    """Telemetry shaped as measure/telemetry.py records it, CPU time held, waits as given."""
    return {"runs": [{"ok": True, "metrics": {"x": w}, "telemetry": {
        "wall_s": w, "cpu_user_s": 0.2, "cpu_system_s": 0.01, "ctx_voluntary": 10, "ctx_involuntary": 5,
        "run_delay_s": d, "watched": {"scheduler_TP0": {"pid": 7, "cpu_user_s": 0.5, "cpu_system_s": 0.01,
                                                        "ctx_voluntary": 20, "ctx_involuntary": 5,
                                                        "run_delay_s": s}}}}
        for w, d, s in zip(wall, wait, server_wait)]}


@pytest.mark.parametrize("bad_wait", [[0.9, 1.0, 1.1]])
def test_the_mechanism_line_names_whose_run_queue_wait_grew(bad_wait):
    good = _runs([1.0, 1.02, 0.98], [0.01, 0.02, 0.015], [0.05, 0.06, 0.055])
    bad = _runs([2.0, 2.1, 1.95], [0.02, 0.01, 0.02], bad_wait)
    result = mechanism(good, bad)
    assert result["factors"]["run_delay_s.scheduler_TP0"]["beyond_noise"]
    assert result["kind"] == "contention", result["line"]
    assert "run-queue wait of scheduler_TP0 0.055 \u2192 1 s per run: waiting for a CPU" in result["line"], result["line"]
    # Held waits are not said.
    same = mechanism(good, _runs([1.0, 1.01, 0.99], [0.01, 0.02, 0.015], [0.05, 0.06, 0.055]))
    assert "run-queue wait" not in same["line"]


def test_sampled_counts_of_this_process_are_its_own():
    sampler = ThreadSampler()
    sampler.sample([os.getpid()])
    assert sampler.summary()["threads_seen"] >= 1


def test_a_process_of_one_thread_is_sampled_without_listing_its_tasks(monkeypatch):
    """Given the sample's thread counts, a one-thread process is its own only thread: the same counts and name
    as with its task directory listed, and the listing is not made."""
    from envsnap.measure import sched_sampling

    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('UP', flush=True); sys.stdin.read()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"UP\n"  # exec'd and running, one thread
        listed = ThreadSampler()
        listed.sample([proc.pid])
        listings: list = []
        real_tids = sched_sampling._tids
        monkeypatch.setattr(sched_sampling, "_tids", lambda pid: listings.append(pid) or real_tids(pid))
        counted = ThreadSampler()
        counted.sample([proc.pid], {proc.pid: 1})
    finally:
        proc.stdin.close()
        proc.wait()
    assert listings == []
    assert list(counted.last) == list(listed.last) == [(proc.pid, proc.pid)]
    names = counted.summary()["thread_names"]
    assert names == listed.summary()["thread_names"] and sum(names.values()) == 1
