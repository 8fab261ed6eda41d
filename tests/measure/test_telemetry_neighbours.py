"""Neighbours during `envsnap run`'s runs (measure/neighbours.py): real busy processes someone else started,
the run's own processes left out, the runnable count at every sample, the scans spaced by their cost, and
another process on the GPU (NVML's answers from the H200 stand-in, tests/helpers/nvml.py)."""
from __future__ import annotations

import os
import sys
import textwrap

import pytest
from helpers.neighbours import Neighbour
from helpers.nvml import make_fake_pynvml

from envsnap.measure import neighbours as measure_neighbours, runs, telemetry
from envsnap.model.schema import validate


def _run(code: str, nvml=None) -> dict:
    opts = runs.RunOptions(command=[sys.executable, "-c", textwrap.dedent(code), "nbr-own-bench"], telemetry=True)
    session = telemetry.Telemetry(nvml=nvml)
    try:
        record = runs.run_once(opts, session)
    finally:
        session.close()
    assert record["ok"], record
    return record


BENCH = """
import json, time
end = time.process_time() + 1.2
while time.process_time() < end:
    pass
print(json.dumps({"work": 1}))
"""


@pytest.mark.slow
def test_a_run_records_the_busy_neighbour_and_not_itself():
    busy = Neighbour("nbr-during-run-8d2", "busy", 60)
    try:
        record = _run(BENCH)
    finally:
        busy.stop()
    found = record["telemetry"]["neighbours"]
    commands = [e["command"] for e in found["top"]]
    entry = next(e for e in found["top"] if "nbr-during-run-8d2" in e["command"])  # among the TOP_N busiest
    assert entry["pid"] == busy.pid and entry["cpus"] > 0.1, found
    assert not any("nbr-own-bench" in c for c in commands)  # the run's own process is not a neighbour
    assert found["runnable"]["samples"] >= 3 and found["runnable"]["max"] >= 1
    assert found["scans"] >= 2 and found["window_s"] > 1.0
    assert found["others_cpus"] >= entry["cpus"]
    validate({"schema_version": 1, "runs": [record]})


@pytest.mark.slow
def test_another_process_on_the_gpu_is_named_and_the_runs_own_is_not(tmp_path):
    pid_file = tmp_path / "bench.pid"
    other = Neighbour("nbr-gpu-other-6a", "sleep", 60)
    fake_lib = tmp_path / "libcuda.so.1"
    fake_lib.write_bytes(b"\0" * 4096)
    other.stop()
    other = Neighbour("nbr-gpu-other-6a", "sleep", 60, mapped=str(fake_lib))

    def listed(index):
        procs = [(other.pid, 30 << 30)]
        if pid_file.exists() and pid_file.read_text():
            pid = int(pid_file.read_text())
            if os.path.exists(f"/proc/{pid}"):  # NVML lists a process while it holds a context: alive
                procs.append((pid, 8 << 30))
        return procs

    nvml = make_fake_pynvml(processes=listed, process_util=lambda i: [(other.pid, 60)])
    code = f"""
import os, pathlib, time
pathlib.Path({str(pid_file)!r}).write_text(str(os.getpid()))
time.sleep(2.0)
print('{{"work": 1}}')
"""
    try:
        record = _run(code, nvml=nvml)
    finally:
        other.stop()
    gpu = record["telemetry"]["neighbours"]["gpus"]["0"]["processes"]
    by_pid = {p["pid"]: p for p in gpu}
    assert by_pid[other.pid]["own"] is False and "nbr-gpu-other-6a" in by_pid[other.pid]["command"]
    assert by_pid[other.pid]["seen"] == ["before", "during", "after"]
    assert by_pid[other.pid]["sm_util_pct_max"] == 60
    own = by_pid[int(pid_file.read_text())]
    assert own["own"] is True and own["seen"] == ["during"]  # told apart while it ran: gone after
    assert record["telemetry"]["neighbours"]["gpu"] == "nvml"
    validate({"schema_version": 1, "runs": [record]})


def _sampled_for_3_5_s(monkeypatch, budget):
    """A sampler sampled every 0.5 s of a fake clock for 3.5 s, with SCAN_BUDGET `budget`."""
    now = [0.0]
    with monkeypatch.context() as patch:
        patch.setattr(measure_neighbours, "SCAN_BUDGET", budget)
        sampler = measure_neighbours.NeighbourSampler(clock=lambda: now[0])
        assert sampler.window.scans == 1  # the start scan, before the command
        for step in range(1, 8):
            now[0] = step * 0.5
            sampler.sample()
    return sampler


def test_scans_during_a_run_are_spaced_by_their_cost(monkeypatch):
    # A scan's cost is its real CPU time, which depends on how many processes this machine runs (a shared
    # box: hundreds) and how loaded it is: the budget is set so the cost is far below it, or far above.
    cheap = _sampled_for_3_5_s(monkeypatch, budget=10.0)
    assert cheap.window.scans == 1 + 3  # one a second at most (MIN_SCAN_INTERVAL_S), at 1, 2 and 3 s
    assert len(cheap.runnable) == 7
    record = cheap.finish()
    assert record["scans"] == 5 and record["scan_cpu_s"] < 0.5
    costly = _sampled_for_3_5_s(monkeypatch, budget=1e-9)
    assert costly.window.scans == 1 + 1  # at 1 s, then not before MAX_SCAN_INTERVAL_S later
    # 0.7 ms a scan (80 processes): one a second; 8 ms (1,000 processes): every 4 s; never beyond 5 s.
    assert measure_neighbours.scan_interval(0.0007) == measure_neighbours.MIN_SCAN_INTERVAL_S
    assert measure_neighbours.scan_interval(0.008) == 0.008 / measure_neighbours.SCAN_BUDGET
    assert measure_neighbours.scan_interval(1.0) == measure_neighbours.MAX_SCAN_INTERVAL_S


def test_nvmls_process_reads_count_in_the_cost_that_spaces_the_scans(monkeypatch):
    """NVML's process list and utilisation are read with each scan, not on their own schedule, and what they cost
    spaces the scans as a scan's own cost does. With SCAN_BUDGET at 2% (a scan of this machine's processes, a few
    ms at most, then leaves one a second), a GPU whose reads take 100 ms of CPU puts the longest interval between
    the scans (MAX_SCAN_INTERVAL_S)."""
    import time

    monkeypatch.setattr(measure_neighbours, "SCAN_BUDGET", 0.02)

    def spin(seconds):
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass

    def reads_over_4_5_s(read_cpu_s):
        calls: dict = {}
        nvml = make_fake_pynvml(calls=calls, processes=lambda i: spin(read_cpu_s) or [])
        nvml.nvmlInit()
        now = [0.0]
        sampler = measure_neighbours.NeighbourSampler(nvml=nvml, handles=[nvml.nvmlDeviceGetHandleByIndex(0)],
                                                      clock=lambda: now[0])
        reads = []
        for step in range(1, 10):  # a sample every 0.5 s
            now[0] = step * 0.5
            sampler.sample()
            reads.append(calls.get("nvmlDeviceGetComputeRunningProcesses", 0))
        return reads, sampler.window.scans

    # Before the run, then with the scans at 1, 2, 3 and 4 s (none at 0.3 s any more).
    assert reads_over_4_5_s(0.0) == ([1, 2, 2, 3, 3, 4, 4, 5, 5], 1 + 4)
    assert reads_over_4_5_s(0.1) == ([1, 2, 2, 2, 2, 2, 2, 2, 2], 1 + 1)  # at 1 s, then not before 6 s


def test_the_start_of_a_run_lists_the_gpus_processes_without_asking_their_utilisation():
    """No utilisation sample is newer than the window that just opened: not asked at "before" (2.4 ms of CPU a GPU
    on an H100 VM), asked with the scans and at the end."""
    calls: dict = {}
    nvml = make_fake_pynvml(calls=calls, processes=lambda i: [(4242, 1 << 30)], process_util=lambda i: [(4242, 50)])
    nvml.nvmlInit()
    now = [0.0]
    sampler = measure_neighbours.NeighbourSampler(nvml=nvml, handles=[nvml.nvmlDeviceGetHandleByIndex(0)],
                                                  clock=lambda: now[0])
    assert calls.get("nvmlDeviceGetComputeRunningProcesses") == 1 and "nvmlDeviceGetProcessUtilization" not in calls
    now[0] = 1.0
    sampler.sample()
    assert calls["nvmlDeviceGetComputeRunningProcesses"] == 2 and calls["nvmlDeviceGetProcessUtilization"] == 1
    record = sampler.finish("nvml")
    assert calls["nvmlDeviceGetProcessUtilization"] == 2
    [entry] = record["gpus"]["0"]["processes"]
    assert entry["pid"] == 4242 and entry["seen"] == ["before", "during", "after"] and entry["sm_util_pct_max"] == 50


@pytest.mark.slow
def test_back_to_back_runs_share_one_scan_between_them():
    busy = Neighbour("nbr-back-to-back-2f", "busy", 60)
    opts = runs.RunOptions(command=[sys.executable, "-c", 'import time; time.sleep(0.4); print(\'{"work": 1}\')'],
                           telemetry=True)
    session = telemetry.Telemetry()
    try:
        first, second = (runs.run_once(opts, session) for _ in range(2))
    finally:
        session.close()
        busy.stop()
    a, b = first["telemetry"]["neighbours"], second["telemetry"]["neighbours"]
    assert a["scans"] == 2 and b["scans"] == 1  # runs under a second: start and end; the next reuses the end
    for found in (a, b):
        entry = next(e for e in found["top"] if "nbr-back-to-back-2f" in e["command"])
        assert entry["cpus"] > 0.1 and found["window_s"] >= 0.4


@pytest.mark.slow
def test_another_job_on_the_gpu_during_bads_runs_is_the_mechanism_and_the_first_cause(tmp_path):
    # Real runs and their real telemetry on both sides; NVML's answers from the stand-in: on BAD another job
    # (a real process of someone else's, mapping a file named like the driver library) holds GPU 0 all along.
    from envsnap.analysis.result import analyze

    fake_lib = tmp_path / "libcuda.so.1"
    fake_lib.write_bytes(b"\0" * 4096)
    job = Neighbour("nbr-gpu-job-e2e-4f", "sleep", 60, mapped=str(fake_lib))
    listed: dict = {}
    nvml = make_fake_pynvml(processes=lambda i: listed.get(i, []), process_util=lambda i: [
        (pid, 70) for pid, _ in listed.get(i, [])])
    opts = runs.RunOptions(command=[sys.executable, "-c", 'import time; time.sleep(0.2); print(\'{"work": 1}\')'],
                           telemetry=True)

    def side():
        session = telemetry.Telemetry(nvml=nvml)
        try:
            return {"runs": [runs.run_once(opts, session) for _ in range(3)]}
        finally:
            session.close()
    try:
        good = side()
        listed[0] = [(job.pid, 30 << 30)]
        bad = side()
    finally:
        job.stop()
    result = analyze(good, bad)
    mechanism = result["verdict"]["mechanism"]
    assert mechanism["kind"] == "gpu_shared", mechanism["line"]
    assert mechanism["line"].startswith(f"GPU 0 shared with pid {job.pid} (") and "nbr-gpu-job-e2e-4f" in mechanism["line"]
    first = result["causes"][0]
    assert first["key"].startswith("neighbour.gpu.0.") and "nbr-gpu-job-e2e-4f" in first["key"], first["key"]
    assert first["key"] in mechanism["neighbours"] and "SM 70%" in first["bad"], first
