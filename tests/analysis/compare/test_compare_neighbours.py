"""Neighbours compared (analysis/compare/neighbours.py) and ranked, from records shaped as
measure/neighbours.py and the neighbours collector write them (hand-built here; the real processes are in
tests/capture/test_collector_neighbours.py, tests/measure/test_neighbours.py and
tests/e2e/test_planted_neighbour.py)."""
from __future__ import annotations

from envsnap.analysis.compare import diff, neighbours
from envsnap.analysis.result import analyze

BUSY = "python3 train.py --epochs 90"


def record(top=(), cpus_online=2, steal=0.0, gpus=None):
    others = sum(c for _, _, c in top)
    found = {"window_s": 2.0, "cpus_online": cpus_online, "host_busy_cpus": min(cpus_online, others + 0.5),
             "steal_pct": steal, "others_cpus": others,
             "runnable": {"median": 1 + len(top), "max": 2 + len(top), "samples": 4},
             "top": [{"pid": pid, "command": command, "cpus": cpus, "cpu_s": 2 * cpus, "ended": False}
                     for command, pid, cpus in top]}
    if gpus is not None:
        found["gpus"] = gpus
    return found


def runs(*records, metric=100.0):
    return {"runs": [{"ok": True, "metrics": {"tok_s": metric}, "telemetry": {"wall_s": 2.0, "neighbours": r}}
                     for r in records]}


def test_a_process_on_one_side_only_is_a_difference_matched_by_command_not_pid():
    good = runs(*(record([("sshd: alice", 10, 0.01)]) for _ in range(3)))
    bad = runs(*(record([("sshd: alice", 11, 0.02), (BUSY, 4100 + i, 0.95)]) for i in range(3)))
    found = neighbours.compare(good, bad)
    assert found["source"] == "runs" and found["count"] == {"good": 3, "bad": 3}
    rows = neighbours.changed_rows(found)
    assert [r["command"] for r in rows] == [BUSY]
    assert rows[0]["good"] is None and rows[0]["bad"]["cpus"] == 0.95 and rows[0]["bad"]["pids"] == [4100, 4101, 4102]
    (d,) = diff.neighbour_differences(good, bad)
    assert d.key == f"neighbour.cpu.{BUSY}" and d.category == "neighbours" and d.change == "added"
    assert d.absent == "not seen" and diff.display(d.subject, d.bad).startswith("0.95 CPUs")


def test_a_process_busy_in_one_run_of_five_is_not_a_neighbour_of_that_side():
    good = runs(*(record() for _ in range(5)))
    bad = runs(*(record([(BUSY, 4100, 1.5)] if i == 2 else []) for i in range(5)))
    assert neighbours.changed_rows(neighbours.compare(good, bad)) == []


def test_much_more_on_one_side_counts_a_little_more_does_not():
    def side(cpus):
        return runs(*(record([(BUSY, 4100, cpus)]) for _ in range(3)))
    assert not neighbours.changed_rows(neighbours.compare(side(0.5), side(0.7)))
    (row,) = neighbours.changed_rows(neighbours.compare(side(0.3), side(1.2)))
    assert row["good"]["cpus"] == 0.3 and row["bad"]["cpus"] == 1.2
    # Below a quarter of a CPU either way: background flicker, never a difference.
    assert not neighbours.changed_rows(neighbours.compare(side(0.0), side(0.2)))


def test_without_runs_the_captures_neighbours_are_compared():
    def snap(top):
        return {"sections": {"neighbours": {"status": "ok", "data": record(top)}}}
    found = neighbours.compare(snap([]), snap([(BUSY, 7, 1.4)]))
    assert found["source"] == "capture" and [r["command"] for r in neighbours.changed_rows(found)] == [BUSY]
    assert neighbours.compare({"runs": []}, snap([])) is None  # a side with nothing recorded: no comparison


def test_steal_time_counts_when_every_run_of_one_side_is_beyond_the_other():
    good = runs(*(record(steal=1.0 + i) for i in range(3)))
    bad = runs(*(record(steal=20.0 + i) for i in range(3)))
    (row,) = neighbours.changed_rows(neighbours.compare(good, bad))
    assert row["kind"] == "steal" and row["bad"]["steal_pct"] == 21.0
    overlapping = runs(*(record(steal=1.0 + 10 * i) for i in range(3)))
    assert not neighbours.changed_rows(neighbours.compare(good, overlapping))


def gpu(*procs):
    return {"0": {"processes": list(procs)}, "1": {"processes": [
        {"pid": 77, "own": False, "command": "python3 elsewhere.py", "seen": ["before"], "used_memory_bytes": 1 << 30}]}}


OWN = {"pid": 900, "own": True, "seen": ["during"]}


def test_a_gpu_neighbour_counts_on_the_gpus_the_run_used():
    other = {"pid": 5150, "own": False, "command": "python3 other_job.py", "seen": ["before", "during", "after"],
             "used_memory_bytes": 40 << 30, "sm_util_pct_mean": 60.0}
    hidden = {"pid": 123456, "own": False, "seen": ["before"], "why": "not visible here", "used_memory_bytes": 2 << 30}
    good = runs(*(record(gpus=gpu(OWN)) for _ in range(3)))
    bad = runs(*(record(gpus=gpu(OWN, other, hidden)) for _ in range(3)))
    rows = neighbours.changed_rows(neighbours.compare(good, bad))
    # GPU 1 (another job's, where the run never was) is not the run's concern.
    assert [(r["gpu"], r["command"]) for r in rows] == [("0", neighbours.NOT_VISIBLE), ("0", "python3 other_job.py")]
    job = rows[1]
    assert job["good"] is None and job["bad"]["present"] == 1.0 and job["bad"]["sm_util_pct"] == 60.0
    assert neighbours.row_key(job) == "neighbour.gpu.0.python3 other_job.py"


def test_the_neighbour_ranks_by_what_it_took_and_one_that_left_bad_cannot_be_the_cause():
    crowded = record([(BUSY, 4100, 1.6)])
    quiet = record()
    good = runs(*(quiet for _ in range(3)), metric=100.0)
    bad = runs(*(crowded for _ in range(3)), metric=60.0)
    result = analyze(good, bad)
    cause = next(c for c in result["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    factors = [f["factor"] for f in cause["factors"]]
    assert "neighbour_measured" in factors and cause["factors"][0]["value"] > 0.7  # 80% of the CPUs taken
    assert any("measured beside the benchmark in BAD's 3 runs: 1.6 CPUs (pid 4100)" in e for e in cause["evidence"])
    # The other way round: it was on GOOD only, and BAD got slower anyway.
    result = analyze(runs(*(crowded for _ in range(3)), metric=100.0), runs(*(quiet for _ in range(3)), metric=60.0))
    cause = next(c for c in result["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert cause["factors"][0]["value"] < 0.1 and "neighbour_measured" not in [f["factor"] for f in cause["factors"]]
    assert any("cannot have slowed BAD down" in e for e in cause["evidence"])


def test_seen_at_capture_only_weighs_less_than_measured_during_runs():
    def snap(top, metric):
        return {"sections": {"neighbours": {"status": "ok", "data": record(top)}},
                "runs": [{"ok": True, "metrics": {"tok_s": metric}} for _ in range(3)]}
    result = analyze(snap([], 100.0), snap([(BUSY, 7, 1.6)], 60.0))
    cause = next(c for c in result["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert [f["factor"] for f in cause["factors"]][1] == "neighbour_at_capture"
    assert any("seen at capture: BAD 1.6 CPUs (pid 7); GOOD not seen" in e for e in cause["evidence"])


def test_a_neighbour_is_argued_against_when_the_runs_time_went_into_more_work():
    def side(cpu, top, metric):
        return {"runs": [{"ok": True, "metrics": {"tok_s": metric + i}, "telemetry": {
            "wall_s": cpu + i * 0.01, "cpu_user_s": cpu + i * 0.01, "cpu_system_s": 0.0, "ctx_voluntary": 2,
            "ctx_involuntary": 5, "cpu_set": [0, 1], "neighbours": record(top)}} for i in range(3)]}
    result = analyze(side(1.0, [], 100.0), side(2.0, [(BUSY, 4100, 0.6)], 50.0))
    assert result["verdict"]["mechanism"]["kind"] == "cpu_work"
    cause = next(c for c in result["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert "mechanism_contradicts" in [f["factor"] for f in cause["factors"]]
    assert any("a neighbour slows a run only by taking the CPU or GPU time it waits for" in e for e in cause["evidence"])
    # On a machine it kept full, the runs lost no CPU to anyone (CPUs kept busy held, fewer preemptions per CPU
    # second): it took none of theirs.
    result = analyze(side(1.0, [], 100.0), side(2.0, [(BUSY, 4100, 1.6)], 50.0))
    cause = next(c for c in result["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert {"mechanism_contradicts", "neighbour_no_effect"} <= {f["factor"] for f in cause["factors"]}, cause
    assert any("the runs lost no CPU on BAD" in e for e in cause["evidence"]), cause["evidence"]


def test_a_neighbour_on_a_machine_with_cpus_to_spare_took_none_the_work_waited_for():
    good = runs(*(record(cpus_online=16) for _ in range(3)), metric=100.0)
    bad = runs(*(record([(BUSY, 4100, 1.6)], cpus_online=16) for _ in range(3)), metric=60.0)
    cause = next(c for c in analyze(good, bad)["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert "neighbour_no_effect" in [f["factor"] for f in cause["factors"]]
    assert any("BAD's machine had CPUs to spare (it kept 2.1 of 16 busy" in e for e in cause["evidence"]), cause


def test_the_processes_a_capture_measured_are_not_its_neighbours():
    def snap(top, server_pid):
        return {"sections": {"neighbours": {"status": "ok", "data": record(top)},
                             "processes": {"status": "ok", "data": {"processes": {
                                 "sglang::scheduler_TP0": {"pid": server_pid, "title": "sglang::scheduler_TP0"}}}}}}
    # The server spins on one side only (it was serving): the measured process, never a neighbour.
    found = neighbours.compare(snap([], 300), snap([("sglang::scheduler_TP0", 301, 1.0)], 301))
    assert neighbours.changed_rows(found) == [] and found["processes"] == []


def pinned(top=(), set_busy=1.98, on_cpu_set=True):
    """A record of a run given 2 of a 16-CPU machine's CPUs (taskset, a cpuset): the rest of the machine idle."""
    found = dict(record(top, cpus_online=16), cpu_set_size=2, cpu_set_busy_cpus=set_busy)
    for entry in found["top"]:
        entry["on_cpu_set"] = on_cpu_set
    return found


def test_a_neighbour_on_the_cpus_the_work_may_use_is_sized_against_those_cpus():
    good = runs(*(pinned(set_busy=1.0) for _ in range(3)), metric=100.0)
    bad = runs(*(pinned([(BUSY, 4100, 1.6)]) for _ in range(3)), metric=60.0)
    found = neighbours.compare(good, bad)
    assert found["machine"]["bad"]["cpu_set_size"] == 2 and found["machine"]["bad"]["cpu_set_busy_cpus"] == 1.98
    assert neighbours.machine_full(found["machine"]["bad"], 16) == "the 2 CPUs the work may use kept 2 busy"
    cause = next(c for c in analyze(good, bad)["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert cause["factors"][0]["value"] > 0.7 and "80% of the CPUs" in cause["factors"][0]["why"], cause
    assert "neighbour_no_effect" not in [f["factor"] for f in cause["factors"]]
    # The same process on the machine's other CPUs: 10% of the machine, and none of the work's.
    elsewhere = runs(*(pinned([(BUSY, 4100, 1.6)], set_busy=1.0, on_cpu_set=False) for _ in range(3)), metric=60.0)
    cause = next(c for c in analyze(good, elsewhere)["causes"] if c["key"] == f"neighbour.cpu.{BUSY}")
    assert cause["factors"][0]["value"] < 0.2 and "neighbour_no_effect" in [f["factor"] for f in cause["factors"]]
    assert any("it ran only on CPUs the work may not use" in e for e in cause["evidence"]), cause["evidence"]


def test_envsnap_itself_is_no_neighbour():
    # Two nodes' captures of one cluster started on one host see each other (tests/e2e/test_multinode_torchrun.py):
    # the tool measuring is not a workload beside the user's processes.
    from envsnap.analysis.compare.neighbours import is_envsnap

    for command in ("/opt/venv/bin/python /opt/venv/bin/envsnap capture --probe-dir /tmp/p", "[envsnap]",
                    "envsnap run -o good.json -- python bench.py", "python3 -m envsnap diff a.json b.json",
                    # another node's launcher of the README's capture line, seen from this node on one host
                    "/v/bin/python /v/bin/torchrun --nnodes=2 --master-port=40643 --no-python bash -c envsnap capture"):
        assert is_envsnap(command), command
    for command in ("python bench.py --name envsnap", "/usr/bin/stress --cpu 4", "python3 /src/envsnap/bench.py", "",
                    "python train.py --out /home/u/envsnap", "python train.py --out /home/u/envsnap --epochs 3"):
        assert not is_envsnap(command), command


def test_the_same_program_with_other_numbers_is_one_neighbour():
    # A port, a pid or a rank in a command line differs from run to run: the same program on both sides, not
    # one neighbour gone and another come.
    good = runs(*(record([("python3 serve.py --port 40643", 10, 0.9)]) for _ in range(3)))
    bad = runs(*(record([("python3 serve.py --port 51002", 11, 1.0)]) for _ in range(3)))
    found = neighbours.compare(good, bad)
    assert neighbours.changed_rows(found) == []
    (row,) = found["processes"]
    assert row["good"]["cpus"] == 0.9 and row["bad"]["cpus"] == 1.0
    assert row["command"] == "python3 serve.py --port 51002"  # shown as BAD ran it
