"""Run telemetry with real processes: CPU time, context switches, memory, threads, CPU sets, watched
server processes; the GPU path against the H200 stand-in (no GPU here). Assertions compare CPU time
and counts, never wall time, so a loaded machine cannot flip them."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pynvml
import pytest
from helpers.nvml import h200_dump, make_fake_pynvml

from envsnap.measure import gpu_sampling, process_tree, runs, telemetry
from envsnap.model.schema import validate


def run(code: str, nvml=None, watch=None, command=None) -> dict:
    """One run of a Python snippet that prints its own CPU time as the metric."""
    code = textwrap.dedent(code) + "\nimport json, time\nprint(json.dumps({'own_cpu_s': time.process_time()}))\n"
    opts = runs.RunOptions(command=command or [sys.executable, "-c", code], telemetry=True, watch=watch or {})
    session = telemetry.Telemetry(opts.watch, nvml=nvml)
    try:
        record = runs.run_once(opts, session)
    finally:
        session.close()
    assert record["ok"], record
    return record


def busy(seconds: float) -> str:
    return f"""
import time
end = time.process_time() + {seconds}
while time.process_time() < end:
    pass
"""


def test_cpu_time_of_the_tree_is_exact_rusage_including_grandchildren():
    code = busy(0.3) + textwrap.dedent(f"""
        import subprocess, sys
        subprocess.run([sys.executable, "-c", {busy(0.4)!r}], check=True)
    """)
    record = run(code)
    usage = record["telemetry"]
    cpu = usage["cpu_user_s"] + usage["cpu_system_s"]
    # 0.3 s in the child, 0.4 s in the grandchild, plus two interpreter start-ups.
    assert 0.7 <= cpu < 0.7 + 1.0, usage
    assert usage["wall_s"] == pytest.approx(record["duration_s"], abs=0.01)
    assert usage["samples"] >= 1 and usage["peak_processes"] >= 1
    validate({"schema_version": 1, "runs": [record]})


def test_voluntary_switches_count_waits_of_every_thread():
    code = """
import threading, time
def nap():
    for _ in range(60):
        time.sleep(0.002)
threads = [threading.Thread(target=nap) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
"""
    usage = run(code)["telemetry"]
    assert usage["ctx_voluntary"] >= 3 * 60, usage  # every sleep blocks once, in whichever thread
    assert usage["peak_threads"] >= 2


def test_peak_memory_and_threads_are_sampled_while_it_runs():
    code = """
import threading, time
block = bytearray(150 * 1024 * 1024)
for i in range(0, len(block), 4096):
    block[i] = 1
stop = threading.Event()
threads = [threading.Thread(target=stop.wait) for _ in range(4)]
for t in threads: t.start()
time.sleep(0.8)
stop.set()
for t in threads: t.join()
"""
    usage = run(code)["telemetry"]
    assert usage["peak_rss_bytes"] >= 150 * 1024 * 1024, usage
    assert usage["peak_threads"] >= 5


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"),
                    reason="needs two CPUs to restrict one away, and taskset")
def test_cpu_set_is_the_one_the_command_ran_on():
    one = sorted(os.sched_getaffinity(0))[:1]
    code = f"import os, time\nos.sched_setaffinity(0, {set(one)!r})\ntime.sleep(0.7)\n"
    usage = run(code)["telemetry"]
    # The process narrowed its own CPU set after start: only sampling sees it. (It was allowed all
    # CPUs for the first milliseconds, which a sample may catch: the union then holds both.)
    assert usage["cpu_set_source"] == "sampled"
    assert one[0] in usage["cpu_set"]
    # Started with one CPU (as `taskset -c` does): every sample and the inherited set agree.
    pinned = run("", command=["taskset", "-c", str(one[0]), sys.executable, "-c",
                          "import time, json; time.sleep(0.5); print(json.dumps({'x': 1}))"])
    assert pinned["telemetry"]["cpu_set"] == one


def test_a_run_over_before_the_first_sample_falls_back_to_the_inherited_cpu_set(monkeypatch):
    monkeypatch.setattr(telemetry, "FIRST_SAMPLES_S", (30.0,))
    record = run("", command=[sys.executable, "-S", "-c", "print('{\"x\": 1}')"])
    usage = record["telemetry"]
    assert usage["samples"] == 0
    assert usage["cpu_set_source"] == "inherited"
    assert usage["cpu_set"] == sorted(os.sched_getaffinity(0))
    assert "peak_rss_bytes" not in usage
    assert usage["cpu_user_s"] + usage["cpu_system_s"] > 0  # the exact counts need no sample


def test_watched_server_counters_are_deltas_over_the_run_summed_over_threads(tmp_path):
    server = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import threading, time
        def nap():
            while True:
                time.sleep(0.001)
        def spin():
            while True:
                pass
        for target in (nap, nap, spin):
            threading.Thread(target=target, daemon=True).start()
        print("started", flush=True)
        time.sleep(600)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout.readline() == "started\n"  # its threads run (instead of a fixed wait)
        record = run(busy(0.0) + "import time\ntime.sleep(0.8)\n", watch={"server": server.pid})
        watched = record["telemetry"]["watched"]["server"]
        assert watched["pid"] == server.pid
        # The spinning thread burned CPU during the run's window; the napping threads switched
        # hundreds of times though the main thread (all that /proc/PID/status counts) never did.
        assert watched["cpu_user_s"] + watched["cpu_system_s"] > 0.05, watched
        assert watched["ctx_voluntary"] > 100, watched
        assert watched["peak_threads"] >= 4 and watched["peak_rss_bytes"] > 0
        assert watched["cpu_set"]
        # A server that is gone says so, and the run itself is not affected.
        server.kill()
        server.wait()
        gone = run("pass", watch={"server": server.pid})["telemetry"]["watched"]["server"]
        assert "error" in gone and "cpu_user_s" not in gone
    finally:
        server.kill()
        server.wait()
        server.stdout.close()


def test_gpu_samples_with_nvml_answering_like_an_h200():
    calls: dict = {}
    record = run("import time\ntime.sleep(0.4)", nvml=make_fake_pynvml(calls=calls))
    usage = record["telemetry"]
    assert usage["gpu"] == "nvml"
    gpu = usage["gpus"]["0"]
    dump = h200_dump()["gpus"][0]
    assert gpu["samples"] >= 1 and gpu["util_pct_mean"] == 0.0
    assert gpu["sm_clock_mhz_median"] == dump["clock_sm"]
    assert gpu["power_w_median"] == pytest.approx(80.2)
    assert gpu["clock_event_reasons"] == {"GpuIdle": 1.0}  # mask 1 on the idle H200
    assert calls["nvmlInit"] == 1 and calls["nvmlShutdown"] == 1
    validate({"schema_version": 1, "runs": [record]})


def test_gpu_sampler_degrades_without_nvml_or_with_unsupported_calls():
    missing = run("pass", nvml=make_fake_pynvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))["telemetry"]
    assert missing["gpu"].startswith("unavailable:") and "gpus" not in missing
    assert missing["cpu_user_s"] + missing["cpu_system_s"] > 0  # the rest of the record is whole
    partial = run("import time\ntime.sleep(0.4)",
                  nvml=make_fake_pynvml(errors={"nvmlDeviceGetPowerUsage": pynvml.NVML_ERROR_NOT_SUPPORTED}))
    gpu = partial["telemetry"]["gpus"]["0"]
    assert "power_w_median" not in gpu and gpu["sm_clock_mhz_median"] > 0


def test_the_process_tree_finds_what_the_command_left_behind():
    record = run("", command=["sh", "-c", "(sleep 1 &) ; sleep 0.6; echo '{\"x\": 1}'"])
    usage = record["telemetry"]
    assert usage["peak_processes"] >= 2  # sh and the orphaned sleep, found through the session
    assert any("outlived their parent" in n for n in usage["notes"])


def test_run_session_shares_one_nvml_and_records_run_windows(monkeypatch):
    calls: dict = {}
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(calls=calls))
    opts = runs.RunOptions(command=[sys.executable, "-c", "print('{\"x\": 1}')"], repeat=3, warmup=1, telemetry=True)
    session = runs.RunSession(opts)
    session.execute()
    assert calls["nvmlInit"] == 1 and calls["nvmlShutdown"] == 1
    assert [w["run"] for w in session.windows] == ["warmup 1", 1, 2, 3]
    assert all(w["start"] <= w["end"] for w in session.windows)
    assert all("telemetry" in r for r in session.records)
    # Without telemetry (bisect's runs) nothing is sampled and the record has no telemetry.
    plain = runs.run_once(runs.RunOptions(command=opts.command))
    assert "telemetry" not in plain
    json.dumps(session.records)


def test_gpu_figures_of_the_active_span_leave_out_the_idle_start_up():
    idle = {"util": 0.0, "sm_mhz": 345.0, "power_w": 80.0, "reasons": 1}
    busy = {"util": 98.0, "sm_mhz": 1980.0, "power_w": 600.0, "reasons": 0}
    out = gpu_sampling.summarize_gpu([idle] * 4 + [busy] * 6 + [dict(busy, power_w=None)], {1: "GpuIdle"})
    assert out["samples"] == 11 and out["util_pct_mean"] == pytest.approx(98.0 * 7 / 11, abs=0.01)
    assert out["active_samples"] == 7 and out["util_pct_active_mean"] == 98.0
    assert out["sm_clock_mhz_active_median"] == 1980.0 and out["sm_clock_mhz_min"] == 345.0
    assert out["power_w_median"] == 600.0  # the reading NVML did not answer is left out, not zero
    assert out["clock_event_reasons"] == {"GpuIdle": round(4 / 11, 3)}
    assert "active_samples" not in gpu_sampling.summarize_gpu([idle] * 3, {1: "GpuIdle"})


def test_one_stat_read_gives_what_psutil_reads_from_three_files():
    import psutil

    proc = subprocess.Popen([sys.executable, "-c", "import threading, time\n"
                             "ts = [threading.Thread(target=time.sleep, args=(5,)) for _ in range(3)]\n"
                             "[t.start() for t in ts]\nblock = bytearray(64 << 20)\nprint('ready', flush=True)\n"
                             "time.sleep(5)"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"  # threads started, block allocated (not a fixed wait)
        ppid, session, threads, rss = process_tree.read_process_stat(proc.pid)
        handle = psutil.Process(proc.pid)
        assert (ppid, session) == (os.getpid(), os.getsid(proc.pid))
        assert threads == handle.num_threads() == 4
        assert rss == pytest.approx(handle.memory_info().rss, rel=0.05) and rss > 64 << 20
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
    assert process_tree.read_process_stat(proc.pid) is None  # reaped: gone


def test_steady_utilisation_leaves_out_the_edges_and_busy_seconds_weigh_by_interval():
    def reading(t, util):
        return {"t": t, "util": util, "sm_mhz": 1980.0, "power_w": 600.0, "reasons": 0}

    # Real H200 shape (tests/gpu, pytest_gpu of the lead's run): idle start-up, a partial reading where
    # the GEMM loop began mid-period, the loop at 100%, a partial last reading, the exit.
    readings = ([reading(t, 0.0) for t in (0.05, 0.15, 0.3, 0.8, 1.3)] + [reading(1.8, 40.0)]
                + [reading(1.8 + 0.5 * i, 100.0) for i in range(1, 9)] + [reading(6.3, 30.0), reading(6.8, 0.0)])
    out = gpu_sampling.summarize_gpu(readings, {})
    assert out["active_samples"] == 10
    assert out["util_pct_active_mean"] == pytest.approx((40 + 800 + 30) / 10)
    assert out["util_pct_steady_mean"] == 100.0  # the 8 readings inside the span
    assert out["busy_s"] == pytest.approx(0.5 * (0.4 + 8 * 1.0 + 0.3))
    short = gpu_sampling.summarize_gpu([reading(0.5, 50.0), reading(1.0, 60.0)], {})
    assert short["util_pct_steady_mean"] == short["util_pct_active_mean"] == 55.0  # too short to trim


def test_steady_utilisation_is_the_main_phase_not_a_start_up_that_keeps_the_gpu_a_little_busy():
    def reading(t, util):
        return {"t": t, "util": util, "sm_mhz": 1980.0}

    # CUDA_MODULE_LOADING=EAGER: seconds of module loading at a few percent, then the GEMM loop.
    readings = ([reading(0.5 * i, u) for i, u in enumerate([0.0, 4.0, 7.0, 3.0, 6.0, 2.0], 1)]
                + [reading(3.0 + 0.5 * i, 100.0) for i in range(1, 6)] + [reading(6.0, 45.0), reading(6.5, 0.0)])
    out = gpu_sampling.summarize_gpu(readings, {})
    assert out["active_samples"] == 11  # the whole busy span: start-up included
    assert out["util_pct_active_mean"] < 60.0 and out["util_pct_steady_mean"] == 100.0
    # A workload that never saturates keeps its own level: nothing above half its peak is left out.
    launch_bound = [reading(0.5 * i, u) for i, u in enumerate([0.0, 55.0, 50.0, 58.0, 52.0, 56.0, 0.0], 1)]
    assert gpu_sampling.summarize_gpu(launch_bound, {})["util_pct_steady_mean"] == round((50 + 58 + 52) / 3, 2)


def test_a_gpu_field_not_supported_is_not_asked_again():
    calls: dict = {}
    gpus = gpu_sampling.Gpus(make_fake_pynvml(calls=calls, errors={"nvmlDeviceGetPowerUsage":
                                                                pynvml.NVML_ERROR_NOT_SUPPORTED}))
    gpus.open()
    series: dict = {}
    for i in range(5):
        gpus.sample(series, 0.5 * i)
    gpus.close()
    assert calls["nvmlDeviceGetPowerUsage"] == 1 and calls["nvmlDeviceGetUtilizationRates"] == 5
    assert all(r["power_w"] is None for r in series[0]) and len(series[0]) == 5


def test_busy_readings_from_before_the_run_do_not_open_its_active_span():
    """The H200 runs of tests/gpu ran back to back: the first readings (0.05-0.3 s) still saw the
    previous run's GEMM loop within NVML's sample period, then torch imported for ~2 s with the GPU
    idle. Those readings are not the run's work."""
    def reading(t, util):
        return {"t": t, "util": util, "sm_mhz": 1980.0}

    readings = ([reading(0.05, 100.0), reading(0.15, 35.0)] + [reading(t, 0.0) for t in (0.3, 0.8, 1.3, 1.8)]
                + [reading(2.3 + 0.5 * i, 100.0) for i in range(9)] + [reading(6.8, 20.0)])
    out = gpu_sampling.summarize_gpu(readings, {})
    assert out["active_samples"] == 10 and out["util_pct_steady_mean"] == 100.0
    assert out["busy_s"] == pytest.approx(0.5 * 100 / 100 + 8 * 0.5 + 0.5 * 0.2)
    # Busy past the first second, or the only busy readings: the run's own.
    late = [reading(0.5, 50.0), reading(1.2, 50.0), reading(1.7, 0.0), reading(2.2, 90.0)]
    assert gpu_sampling.summarize_gpu(late, {})["active_samples"] == 4
    only = [reading(0.05, 80.0), reading(0.3, 0.0), reading(0.8, 0.0)]
    assert gpu_sampling.summarize_gpu(only, {})["active_samples"] == 1
