"""The mechanism line from real runs: real benchmark processes measured with run telemetry on this
machine (more CPU work, fewer CPUs, waiting), and the GPU branches from telemetry shaped as NVML
reports it (no GPU here; tests/gpu has the real one). Every real-process case rests on CPU time,
CPU sets and switch counts, never on wall time alone, so a loaded machine cannot flip it."""
from __future__ import annotations

import json
import os
import shutil
import sys

import pytest
from helpers.bench import bench_cmd
from helpers.result_types import mismatches

from envsnap.analysis import knowledge
from envsnap.analysis.runs.mechanism import GPU_BUSY_PCT, compare, mechanism
from envsnap.measure import runs
from envsnap.model.result_types import Mechanism, MechanismFactor

RUNS = 3


def measured(*args: str, prefix=(), repeat: int = RUNS) -> dict:
    """A snapshot-shaped dict whose runs are real runs of tests/helpers/bench.py with telemetry."""
    opts = runs.RunOptions(command=[*prefix, *bench_cmd("work", *args)], repeat=repeat, telemetry=True)
    session = runs.RunSession(opts)
    session.execute()
    assert all(r["ok"] for r in session.records), session.records
    return {"runs": session.records}


@pytest.mark.slow
def test_more_cpu_work_is_cpu_work():
    good = measured("--cpu", "0.15")
    bad = measured("--cpu", "0.6")
    result = mechanism(good, bad)
    assert result["kind"] == "cpu_work", result["line"]
    assert result["line"].startswith("CPU time per run +") and "more work on the CPU" in result["line"]
    assert "CPU set unchanged" in result["line"]
    assert result["factors"]["cpu_s"]["beyond_noise"]
    assert result["components"]["matches"] == [knowledge.CPU_HOST]
    assert result["runs"] == {"good": RUNS, "bad": RUNS}
    # The mechanism as serialised has its types (model/result_types: no golden output has run telemetry).
    met: set = set()
    assert mismatches(json.loads(json.dumps(result)), Mechanism, met=met) == []
    assert MechanismFactor in met


@pytest.mark.slow
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2 or not shutil.which("taskset"),
                    reason="needs two CPUs and taskset")
def test_a_halved_cpu_set_is_fewer_cpus():
    cpus = sorted(os.sched_getaffinity(0))[:2]
    work = ("--cpu", "0.5", "--procs", "2")
    good = measured(*work, prefix=("taskset", "-c", f"{cpus[0]},{cpus[1]}"))
    bad = measured(*work, prefix=("taskset", "-c", str(cpus[0])))
    result = mechanism(good, bad)
    assert result["kind"] == "fewer_cpus", result["line"]
    assert result["line"].startswith("ran on 1 CPU instead of 2")
    assert result["factors"]["cpus"] == {**result["factors"]["cpus"], "good": 2.0, "bad": 1.0, "beyond_noise": True}
    # The same work in CPU time on both sides: the CPUs, not the work, changed. Squeezed onto one CPU the same
    # work can cost a few percent more CPU time (cache and scheduling), which a loaded 2-core machine's runs
    # may separate: the line then says so, and says it as measured.
    cpu = result["factors"]["cpu_s"]
    assert abs(cpu["bad"] / cpu["good"] - 1.0) < 0.15, cpu
    if cpu["beyond_noise"]:
        assert "; CPU time per run " in result["line"] and "unchanged" not in result["line"], result["line"]
    else:
        assert "CPU time per run unchanged" in result["line"]


@pytest.mark.slow
def test_sleeping_is_io_wait():
    good = measured("--cpu", "0.15")
    bad = measured("--cpu", "0.15", "--waits", "40", "--wait-ms", "15")
    result = mechanism(good, bad)
    assert result["kind"] == "io_wait", result["line"]
    assert "voluntary context switches" in result["line"] and "waiting" in result["line"]
    assert result["factors"]["ctx_voluntary"]["beyond_noise"]


@pytest.mark.slow
def test_the_same_benchmark_twice_claims_no_cpu_mechanism():
    good = measured("--cpu", "0.2", repeat=5)
    bad = measured("--cpu", "0.2", repeat=5)
    result = mechanism(good, bad)
    # Identical work on an unchanged CPU set: neither more CPU work nor fewer CPUs may be claimed.
    # (Other programs loading this shared machine can make a real "contention" between the series.)
    assert result["kind"] not in ("cpu_work", "fewer_cpus"), result["line"]
    assert not result["factors"]["cpus"]["beyond_noise"]


def test_no_telemetry_says_so():
    result = mechanism({"runs": [{"ok": True, "metrics": {"x": 1}}]}, {"runs": []})
    assert result["kind"] == "unknown" and "no run telemetry on GOOD and BAD" in result["line"]


# ---------------------------------------------------------------- the noise rule

def test_beyond_noise_needs_separated_runs_and_a_change_larger_than_their_spread():
    assert compare([1.0, 1.01, 1.02], [1.5, 1.52, 1.49])["beyond_noise"]
    # Overlapping runs: no.
    assert not compare([1.0, 1.3, 1.6], [1.2, 1.5, 1.7])["beyond_noise"]
    # Separated but by less than either side's own spread: no.
    wide = compare([1.0, 1.5, 2.0], [2.05, 2.2, 3.0])
    assert wide["noise_pct"] == pytest.approx(66.67) and not wide["beyond_noise"]
    # One run a side: no spread, so only a large change counts, and the factor says so.
    single = compare([1.0], [1.1])
    assert not single["beyond_noise"] and single["noise"].startswith("single run")
    assert compare([1.0], [1.5])["beyond_noise"]
    # From zero: any separated rise is a change; it has no percentage.
    zero = compare([0, 0, 0], [3, 4, 5])
    assert zero["beyond_noise"] and zero["change_pct"] is None


# ---------------------------------------------------------------- GPU branches (NVML-shaped telemetry)

def _usage(wall, cpu, util, clock, cpus=(0, 1), reasons=None):
    gpu = {"samples": 20, "util_pct_mean": util, "util_pct_median": util, "sm_clock_mhz_median": clock,
           "power_w_median": 500.0}
    if reasons:
        gpu["clock_event_reasons"] = reasons
    return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": cpu, "cpu_system_s": 0.0, "ctx_voluntary": 100,
                                      "ctx_involuntary": 10, "cpu_set": list(cpus), "gpu": "nvml",
                                      "gpus": {"0": gpu, "1": {"samples": 20, "util_pct_mean": 0.0}}}}


def _side(*usages):
    return {"runs": list(usages)}


def test_gpu_busy_on_both_sides_with_the_clock_held_is_gpu_work():
    good = _side(*(_usage(10.0 + i * 0.05, 10.0, 99.0, 1980) for i in range(3)))
    bad = _side(*(_usage(14.0 + i * 0.05, 10.1, 99.0 - i * 0.2, 1980) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "gpu_work"
    assert result["line"] == "GPU busy 99% on both sides, SM clock held: GPU work got slower"
    assert knowledge.KERNELS in result["components"]["matches"]
    assert set(result["components"]["contradicts"]) == {knowledge.CPU_HOST, knowledge.GRAPHS}


def test_gpu_busy_at_a_lower_clock_names_the_clock():
    good = _side(*(_usage(10.0, 10.0, 99.0, 1980 - i) for i in range(3)))
    bad = _side(*(_usage(13.0, 10.0, 99.0, 1410 + i, reasons={"SwPowerCap": 0.9}) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "gpu_work"
    assert "SM clock 1979 \u2192 1411 MHz (SwPowerCap): the GPU ran at a lower clock" in result["line"]
    assert result["components"]["matches"] == [knowledge.KERNELS]


def test_gpu_idling_more_is_launch_bound():
    good = _side(*(_usage(10.0, 10.0, 97.0 + i * 0.5, 1980) for i in range(3)))
    bad = _side(*(_usage(18.0, 30.0, 55.0 + i, 1980) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "launch_bound"
    assert result["line"].startswith("GPU idle 44% (GOOD: 2%): launch/CPU bound")
    assert knowledge.GRAPHS in result["components"]["matches"]
    assert result["components"]["contradicts"] == [knowledge.KERNELS]
    # The idle GPU 1 (never used on either side) is not averaged in.
    assert result["factors"]["gpu_util_pct"]["bad"] == pytest.approx(56.0)


def test_a_gpu_never_busy_leaves_the_cpu_side_to_decide():
    good = _side(*(_usage(10.0, 10.0 + i * 0.01, 30.0, 1980) for i in range(3)))
    bad = _side(*(_usage(20.0, 20.0 + i * 0.01, 30.0, 1980) for i in range(3)))
    result = mechanism(good, bad)
    assert GPU_BUSY_PCT > 30.0
    assert result["kind"] == "cpu_work" and result["line"].endswith("GPU busy 30%")


def _gpu_usage(wall, cpu, util, busy_s):
    gpu = {"samples": 16, "util_pct_mean": util - 9, "active_samples": 11, "util_pct_active_mean": util,
           "busy_s": busy_s, "sm_clock_mhz_median": 1980.0}
    return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": cpu * 0.9, "cpu_system_s": cpu * 0.1,
                                      "ctx_voluntary": 400, "ctx_involuntary": 40, "cpu_set": list(range(16)),
                                      "gpu": "nvml", "gpus": {"0": gpu}}}


def test_more_gpu_work_with_the_host_spinning_on_it_is_gpu_work_not_cpu_work():
    """The H200 shape (tests/gpu/test_mechanism_gpu.py, the lead's run): 3000 then 6000 bf16 products,
    active-span utilisation 72% and 81%, CPU time per run +62% because the host thread spins in
    torch.cuda.synchronize while the GPU works twice as long."""
    good = _side(*(_gpu_usage(6.88 + i * 0.05, 8.76 + i * 0.05, 72.0 + i, 4.4 + i * 0.02) for i in range(3)))
    bad = _side(*(_gpu_usage(11.3 + i * 0.05, 14.2 + i * 0.05, 81.0 + i, 8.8 + i * 0.02) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "gpu_work", result["line"]
    assert result["line"] == ("GPU busy 73% on both sides, GPU-busy time per run +100%, CPU time +62% with it "
                              "(the host waits on the GPU): GPU work grew")
    assert knowledge.KERNELS in result["components"]["matches"]
    assert knowledge.CPU_HOST in result["components"]["contradicts"]


def test_more_cpu_work_beside_a_busy_gpu_is_still_cpu_work():
    # The GPU's busy time per run is unchanged: the extra time is the host's own work.
    good = _side(*(_gpu_usage(6.0 + i * 0.05, 6.0 + i * 0.05, 75.0, 4.4 + i * 0.02) for i in range(3)))
    bad = _side(*(_gpu_usage(8.0 + i * 0.05, 12.0 + i * 0.05, 72.0, 4.42 + i * 0.02) for i in range(3)))
    assert mechanism(good, bad)["kind"] == "cpu_work"
    # GPU-busy time up a little, CPU time up far more: still the host's work.
    bad = _side(*(_gpu_usage(9.0 + i * 0.05, 15.0 + i * 0.05, 72.0, 5.3 + i * 0.02) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "cpu_work", result["line"]
    assert result["factors"]["gpu_busy_s"]["beyond_noise"]


def test_fewer_threads_at_work_is_less_parallel():
    def usage(wall, cpu, threads):
        return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": cpu, "cpu_system_s": 0.0, "ctx_voluntary": 5,
                                          "ctx_involuntary": 50, "cpu_set": [0, 1], "peak_threads": threads}}
    good = _side(*(usage(1.0 + i * 0.01, 2.0, 3) for i in range(3)))
    bad = _side(*(usage(2.0 + i * 0.01, 2.0 + i * 0.01, 1) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "fewer_cpus"
    assert result["line"].startswith("kept 1.0 CPUs busy instead of 2.0 (peak threads 3 \u2192 1")


def test_a_server_pinned_to_fewer_cpus_is_named():
    def usage(server_cpus):
        return {"ok": True, "telemetry": {"wall_s": 5.0, "cpu_user_s": 0.1, "cpu_system_s": 0.0, "ctx_voluntary": 5,
                                          "ctx_involuntary": 5, "cpu_set": [0, 1, 2, 3],
                                          "watched": {"scheduler_TP0": {"pid": 1, "cpu_user_s": 4.0, "cpu_system_s": 0.1,
                                                                        "cpu_set": list(server_cpus)}}}}
    result = mechanism(_side(*(usage(range(4)) for _ in range(3))), _side(*(usage([0]) for _ in range(3))))
    assert result["kind"] == "fewer_cpus" and result["actor"] == "scheduler_TP0"
    assert result["line"].startswith("scheduler_TP0 ran on 1 CPU instead of 4")


def test_contention_is_involuntary_switches_per_cpu_second():
    def usage(wall, inv):
        return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": 1.0, "cpu_system_s": 0.0, "ctx_voluntary": 5,
                                          "ctx_involuntary": inv, "cpu_set": [0, 1]}}
    good = _side(*(usage(1.0 + i * 0.01, 20 + i) for i in range(3)))
    bad = _side(*(usage(1.8 + i * 0.01, 400 + i) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "contention"
    assert "involuntary context switches per CPU second \u00d7" in result["line"]


def _switches(wall, cpu, voluntary, involuntary):
    return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": cpu, "cpu_system_s": 0.0, "ctx_voluntary": voluntary,
                                      "ctx_involuntary": involuntary, "cpu_set": [0, 1]}}


def test_more_waits_beside_a_few_preemptions_from_none_are_io_wait():
    # GOOD was never preempted: any preemption on BAD is an "infinite" growth. A run gained ~40 waits and
    # ~3 preemptions (what test_sleeping_is_io_wait measured while another program briefly ran): the waits.
    good = _side(*(_switches(0.15 + i * 0.002, 0.15, 5 + i, 0) for i in range(3)))
    bad = _side(*(_switches(0.75 + i * 0.002, 0.15, 45 + i, 3 + i % 2) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "io_wait", result["line"]


def test_many_preemptions_from_none_beside_a_few_more_waits_are_contention():
    good = _side(*(_switches(1.0 + i * 0.01, 1.0, 5 + i, 0) for i in range(3)))
    bad = _side(*(_switches(1.8 + i * 0.01, 1.0, 9 + i, 400 + i) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "contention", result["line"]


def test_failed_runs_and_runs_without_telemetry_are_not_counted():
    good = _side(*(_usage(10.0, 10.0, 99.0, 1980) for _ in range(3)), {"ok": False, "telemetry": {"wall_s": 99.0}})
    bad = _side(*(_usage(10.0, 10.0, 99.0, 1980) for _ in range(2)), {"ok": True, "metrics": {"x": 1.0}})
    assert mechanism(good, bad)["runs"] == {"good": 3, "bad": 2}


def test_the_bench_mode_runs_standalone():
    import subprocess

    out = subprocess.run([sys.executable, *bench_cmd("work", "--cpu", "0.01")[1:]], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    assert '"work_per_s"' in out


# ---------------------------------------------------------------- neighbours and what moved (hand-built, as
# measure/neighbours.py records it; tests/e2e/test_planted_neighbour.py has the real processes)

def _neighbours(busy_cpus_of_others=(), runnable=2, host_busy=1.0, steal=0.0, gpu=None):
    """A run's "neighbours" record: `busy_cpus_of_others` = [(command, pid, cpus)]."""
    top = [{"pid": pid, "command": command, "cpu_s": cpus, "cpus": cpus, "ended": False, "user": "alice"}
           for command, pid, cpus in busy_cpus_of_others]
    record = {"window_s": 1.0, "cpus_online": 2, "host_busy_cpus": host_busy, "steal_pct": steal,
              "others_cpus": sum(c for _, _, c in busy_cpus_of_others), "top": top,
              "runnable": {"median": runnable, "max": runnable, "samples": 3, "source": "/proc/loadavg"}}
    if gpu is not None:
        record["gpus"] = gpu
    return record


def _cpu_run(wall, cpu, involuntary, neighbours):
    return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": cpu, "cpu_system_s": 0.0, "ctx_voluntary": 2,
                                      "ctx_involuntary": involuntary, "cpu_set": [0, 1], "peak_threads": 1,
                                      "neighbours": neighbours}}


BUSY = "python3 train.py --epochs 90"


def test_other_processes_taking_the_cpus_the_run_lost_are_named():
    good = _side(*(_cpu_run(1.0 + i * 0.01, 1.0, 20, _neighbours(runnable=1, host_busy=1.1)) for i in range(3)))
    bad = _side(*(_cpu_run(2.6 + i * 0.01, 1.0, 300, _neighbours([(BUSY, 4100, 0.9), (BUSY, 4101, 0.9)],
                                                                 runnable=3, host_busy=2.0)) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "contention", result["line"]
    assert result["line"].startswith(f"runnable but not running: 2 other processes used 1.8 CPUs ({BUSY}: pid 4100, "
                                     "4101; GOOD: none); CPUs kept busy 0.99 \u2192 0.38"), result["line"]
    assert "3 runnable threads for 2 CPUs" in result["line"]
    assert result["neighbours"] == [f"neighbour.cpu.{BUSY}"]
    assert result["components"]["matches"] == []  # the named neighbour is the mechanism, no setting of the run
    assert result["factors"]["others_cpus"]["beyond_noise"] and result["factors"]["runnable"]["beyond_noise"]


def test_a_neighbour_is_not_blamed_while_the_machine_had_cpus_to_spare():
    # 16 CPUs, half of them idle: the run's lost CPU went elsewhere (its own CPU set, a quota).
    def neighbours(others):
        return dict(_neighbours(others, runnable=4, host_busy=8.0), cpus_online=16)
    good = _side(*(_cpu_run(1.0 + i * 0.01, 1.0, 20, neighbours([])) for i in range(3)))
    bad = _side(*(_cpu_run(2.6 + i * 0.01, 1.0, 300, neighbours([(BUSY, 4100, 0.9)])) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "contention" and "neighbours" not in result
    assert result["line"].endswith(f"beside the runs on BAD 1 other process used 0.9 CPUs ({BUSY}: pid 4100; "
                                   "GOOD: none), but the machine had CPUs to spare"), result["line"]


def test_a_neighbour_beside_runs_that_wait_more_is_no_contention():
    # BAD's runs sleep more (voluntary switches), on a machine a busy neighbour keeps full: the waits, not it.
    def run(wall, voluntary, top):
        found = _cpu_run(wall, 1.0, 20, _neighbours(top, runnable=3 if top else 1, host_busy=2.0 if top else 1.0))
        found["telemetry"]["ctx_voluntary"] = voluntary
        return found
    good = _side(*(run(1.0 + i * 0.01, 2, []) for i in range(3)))
    bad = _side(*(run(1.6 + i * 0.01, 40, [(BUSY, 4100, 0.9)]) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "io_wait" and "neighbours" not in result, result["line"]
    assert result["line"].endswith(f"beside the runs on BAD 1 other process used 0.9 CPUs ({BUSY}: pid 4100; "
                                   "GOOD: none), but the runs' own waits account for their time off the CPU"), result["line"]


def test_more_cpu_work_of_the_runs_own_comes_before_a_neighbour():
    # BAD's runs do twice the CPU work, which accounts for most of their extra wall, beside a busy neighbour.
    good = _side(*(_cpu_run(1.0 + i * 0.01, 1.0 + i * 0.01, 20, _neighbours(runnable=1)) for i in range(3)))
    bad = _side(*(_cpu_run(2.4 + i * 0.01, 2.0 + i * 0.01, 60, _neighbours([(BUSY, 4100, 0.9)], runnable=3,
                                                                           host_busy=2.0)) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "cpu_work" and "neighbours" not in result, result["line"]
    assert result["line"].endswith("but the runs' own extra CPU work accounts for their time"), result["line"]


def test_on_a_pinned_run_the_cpus_it_may_use_decide_whether_a_neighbour_took_them():
    # 2 of 16 CPUs (taskset): the machine is mostly idle, the work's own 2 CPUs are not.
    def pinned(top, set_busy, on_set=True):
        found = dict(_neighbours(top, runnable=3, host_busy=set_busy + 0.2), cpus_online=16, cpu_set_size=2,
                     cpu_set_busy_cpus=set_busy)
        for entry in found["top"]:
            entry["on_cpu_set"] = on_set
        return found
    good = _side(*(_cpu_run(1.0 + i * 0.01, 1.0, 20, pinned([], 1.0)) for i in range(3)))
    bad = _side(*(_cpu_run(2.6 + i * 0.01, 1.0, 300, pinned([(BUSY, 4100, 1.6)], 1.99)) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "contention" and result["neighbours"] == [f"neighbour.cpu.{BUSY}"], result["line"]
    assert result["line"].endswith("the 2 CPUs the work may use kept 2 busy"), result["line"]
    # The same process on the other 14 CPUs took none of the work's.
    bad = _side(*(_cpu_run(2.6 + i * 0.01, 1.0, 300, pinned([(BUSY, 4100, 1.6)], 1.99, on_set=False))
                  for i in range(3)))
    result = mechanism(good, bad)
    assert "neighbours" not in result and result["line"].endswith("but they ran on other CPUs than the work's")


def test_steal_time_is_other_virtual_machines():
    good = _side(*(_cpu_run(1.0 + i * 0.01, 1.0, 20, _neighbours(steal=0.5 + i * 0.1, host_busy=1.0))
                   for i in range(3)))
    bad = _side(*(_cpu_run(1.9 + i * 0.01, 1.0, 250, _neighbours(steal=40.0 + i, host_busy=1.9, runnable=2))
                  for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "contention", result["line"]
    assert "the hypervisor gave 41% of the CPU time to other virtual machines (steal; GOOD: 0.6%)" in result["line"]
    assert result["neighbours"] == ["neighbour.steal"]


def test_a_line_never_says_no_counter_moved_while_one_moved():
    # Runs seen in the field: a benchmark of fixed duration (wall held) kept 1.64 CPUs busy on GOOD, 0.68 on BAD.
    def usage(cpu, runnable):
        return _cpu_run(10.0, cpu, round(cpu * 3), _neighbours(runnable=runnable))  # preempted as often per CPU s
    good = _side(*(usage(16.4 + i * 0.1, 2) for i in range(3)))
    bad = _side(*(usage(6.8 + i * 0.1, 2) for i in range(3)))
    result = mechanism(good, bad)
    assert "no run counter" not in result["line"] and "no counter" not in result["line"]
    assert result["line"].startswith("CPU time per run \u221258%, CPUs kept busy 1.65 \u2192 0.69, wall unchanged: "
                                     "the work got less CPU"), result["line"]
    # Whatever the case, an "unknown" line names every series that moved beyond noise.
    for bad_runnable, bad_switches in ((2, 40), (9, 40), (2, 400)):
        bad = _side(*(_cpu_run(10.0, 16.4 + i * 0.1, bad_switches, _neighbours(runnable=bad_runnable))
                      for i in range(3)))
        result = mechanism(good, bad)
        moved = [name for name, f in result["factors"].items() if f["beyond_noise"]]
        if moved:
            assert "no run counter" not in result["line"] and "no counter says" not in result["line"], result
            if result["kind"] == "unknown":
                assert "moved beyond the runs' spread" in result["line"] or "moved too" in result["line"]


def _gpu_run(wall, util, busy_s, gpu_procs):
    gpu = {"samples": 16, "util_pct_mean": util, "active_samples": 15, "util_pct_active_mean": util,
           "util_pct_steady_mean": util, "busy_s": busy_s, "sm_clock_mhz_median": 1980.0,
           "sm_clock_mhz_active_median": 1980.0}
    return {"ok": True, "telemetry": {"wall_s": wall, "cpu_user_s": wall * 0.9, "cpu_system_s": 0.1,
                                      "ctx_voluntary": 400, "ctx_involuntary": 40, "cpu_set": list(range(16)),
                                      "gpu": "nvml", "gpus": {"0": gpu},
                                      "neighbours": _neighbours(gpu={"0": {"processes": gpu_procs}})}}


OWN = {"pid": 900, "own": True, "seen": ["during"], "used_memory_bytes": 8 << 30}
OTHER = {"pid": 5150, "own": False, "command": "python3 other_job.py", "user": "bob", "seen": ["before", "during", "after"],
         "used_memory_bytes": 40 << 30, "sm_util_pct_mean": 45.0, "sm_util_pct_max": 80, "util_samples": 12}


def test_another_job_on_the_gpu_is_named_not_read_as_gpu_work():
    good = _side(*(_gpu_run(10.0 + i * 0.05, 97.0, 9.5 + i * 0.02, [OWN]) for i in range(3)))
    bad = _side(*(_gpu_run(16.0 + i * 0.05, 99.0, 15.5 + i * 0.02, [OWN, OTHER]) for i in range(3)))
    result = mechanism(good, bad)
    assert result["kind"] == "gpu_shared", result["line"]
    assert result["line"].startswith("GPU 0 shared with pid 5150 (python3 other_job.py) on BAD (held GPU 0 in 100% "
                                     "of the runs, 40.0 GiB, SM 45%"), result["line"]
    assert "GPU work grew" not in result["line"] and "GPU work got slower" not in result["line"]
    assert result["neighbours"] == ["neighbour.gpu.0.python3 other_job.py"]
    assert result["components"]["matches"] == [] and result["components"]["contradicts"] == []
    # Without the other job, the same counters read as the run's own GPU work.
    alone = _side(*(_gpu_run(16.0 + i * 0.05, 99.0, 15.5 + i * 0.02, [OWN]) for i in range(3)))
    assert mechanism(good, alone)["kind"] == "gpu_work"
