"""A server that lowered its own priority: the nice difference and the run-queue wait that shows its effect.

The server (given with --pid, as an inference server is) has a pool of two named threads ("hasher-N")
that hash buffers per request (hashlib releases the GIL for large data: they run in parallel), and a
housekeeping child that keeps the CPUs busy, in the same session: with sched_autogroup_enabled=1 the
kernel shares the CPU between sessions first, so a nice value ranks threads against their own session's
(sched(7) "The autogroup feature"), and this one is there on any machine, busy or idle. The server reads
its priority from a config file and applies it in-process (os.nice, as a launcher's `nice -n` would):
0 on the good day, 19 on the bad one. Its pool then waits on the run queue while the housekeeping runs.
"""
from __future__ import annotations

import json
import os
import sys

import pytest
from helpers import run_envsnap
from helpers.workers import clean_env, start, stop, wait_line

pytestmark = pytest.mark.slow

SERVER = '''\
import ctypes, hashlib, os, queue, sys, threading
from multiprocessing.connection import Listener

CPUS = sorted(os.sched_getaffinity(0))[:2]
os.sched_setaffinity(0, CPUS)  # two CPUs on any machine: the housekeeping fills both
SERVER_PID = os.getpid()
for _ in CPUS:  # housekeeping at the default priority, started before the server sets its own
    if os.fork() == 0:
        if os.fork() != 0:  # the grandchild runs it: in the server's session, not in its process tree
            os._exit(0)
        ctypes.CDLL(None).prctl(15, b"housekeeping")
        while os.path.exists(f"/proc/{SERVER_PID}"):
            sum(range(10000))
        os._exit(0)
    os.wait()
with open(sys.argv[2]) as config:
    niceness = int(config.read().strip() or 0)
os.nice(niceness)  # relative, capped at 19; the threads started below inherit it
DATA = os.urandom(1 << 20)
jobs, done = queue.Queue(), queue.Queue()

def hasher(name):
    ctypes.CDLL(None).prctl(15, name.encode())  # PR_SET_NAME: the thread's comm, as a named pool's threads have
    while True:
        rounds = jobs.get()
        for _ in range(rounds):
            hashlib.sha256(DATA).digest()
        done.put(rounds)

for i in range(2):
    threading.Thread(target=hasher, args=(f"hasher-{i}",), daemon=True).start()
with Listener(sys.argv[1], family="AF_UNIX") as listener:
    print("ready", flush=True)
    while True:
        with listener.accept() as conn:
            rounds = conn.recv()
            if rounds is None:
                break
            for _ in range(2):
                jobs.put(rounds)
            for _ in range(2):
                done.get()
            conn.send("done")
'''

BENCH = '''\
import json, sys, time
from multiprocessing.connection import Client
started = time.perf_counter()
for _ in range(3):
    with Client(sys.argv[1], family="AF_UNIX") as conn:
        conn.send(int(sys.argv[2]))
        conn.recv()
print(json.dumps({"request_ms": round((time.perf_counter() - started) * 1000, 3)}))
'''


# Innocent differences of the server's environment, famous names among them, out of context here (no NCCL, no GPU).
INNOCENT = {
    "good": {"JOB_ID": "4711", "BUILD_NUMBER": "88", "DEPLOY_COLOR": "blue", "TEAM": "serving", "TICKET": "OPS-1",
             "SHIFT": "day", "OPERATOR": "alice", "RELEASE_NAME": "r1", "NOTES": "first", "HISTSIZE": "1000",
             "EDITOR": "vi", "PAGER": "less", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "LANGUAGE": "en"},
    "bad": {"JOB_ID": "4712", "BUILD_NUMBER": "89", "DEPLOY_COLOR": "green", "TEAM": "serving-2", "TICKET": "OPS-2",
            "SHIFT": "night", "OPERATOR": "bob", "RELEASE_NAME": "r2", "NOTES": "second", "HISTSIZE": "5000",
            "EDITOR": "nano", "PAGER": "more", "NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple", "LANGUAGE": "de",
            "NCCL_P2P_DISABLE": "1", "NCCL_IB_DISABLE": "1", "MALLOC_ARENA_MAX": "2", "LD_BIND_NOW": "1",
            "CUDA_LAUNCH_BLOCKING": "1"},
}


@pytest.fixture(scope="module")
def placed(tmp_path_factory):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs two CPUs")
    base = tmp_path_factory.mktemp("placement")
    (base / "server.py").write_text(SERVER)
    (base / "bench.py").write_text(BENCH)
    out = {}
    for label, niceness in (("good", "0"), ("bad", "19")):
        side = base / label
        side.mkdir()
        (side / "nice.conf").write_text(niceness + "\n")
        proc = start([sys.executable, base / "server.py", "server.sock", "nice.conf"],
                     env=clean_env(**INNOCENT[label]), cwd=str(side))
        try:
            wait_line(proc, "ready")
            ran = run_envsnap("run", "-o", side / "snap.json", "--label", label, "--pid", proc.pid, "--timeout", "60",
                              "--repeat", "5", "--warmup", "1", "--", sys.executable, base / "bench.py", "server.sock",
                              "20", cwd=str(side), timeout=300)
            assert ran.returncode == 0, ran.stderr
        finally:
            proc.stdin.close()
            from multiprocessing.connection import Client
            try:
                with Client(str(side / "server.sock"), family="AF_UNIX") as conn:
                    conn.send(None)
            except OSError:
                pass
            stop(proc)
        out[label] = json.loads((side / "snap.json").read_text())
    out["base"] = base
    return out


def _slowed(placed) -> None:
    """The tests of the wait and the ranking need the plant to act: nice 19 beside the session's own busy loops slows
    the pool on a loaded VM, but on an idle one it was seen not to (86 -> 75 ms): then there is nothing to rank."""
    medians = [sorted(r["metrics"]["request_ms"] for r in placed[label]["runs"] if r.get("ok") is not False)
               for label in ("good", "bad")]
    good, bad = (m[len(m) // 2] for m in medians)
    if bad < 1.5 * good:
        pytest.skip(f"nice 19 did not slow the pool on this machine ({good:.0f} -> {bad:.0f} ms): nothing to rank")


def _server(snap):
    procs = snap["sections"]["processes"]["data"]["processes"]
    key = snap["sections"]["processes"]["data"]["roots"][0]
    return key, procs[key]


def test_the_priority_is_in_the_snapshot_of_the_measured_process(placed):
    _, good = _server(placed["good"])
    _, bad = _server(placed["bad"])
    assert bad["nice"] == 19 and good["nice"] < 19  # (pytest may itself run under `nice`: the good side inherits it)
    for entry in (good, bad):  # how it is scheduled and placed, beside its priority
        assert entry["placement"]["policy"] == "SCHED_OTHER"
        assert entry["placement"]["mems_allowed"]
        assert entry["threads"]["hasher"] == 2  # its pool, by name


def test_the_run_queue_wait_of_the_measured_process_shows_it(placed):
    _slowed(placed)
    key, _ = _server(placed["bad"])

    def waits(snap):
        return [run["telemetry"]["watched"][key] for run in snap["runs"] if run.get("ok") is not False]

    good, bad = waits(placed["good"]), waits(placed["bad"])
    assert all(w["thread_names"].get("hasher", 0) == 2 for w in good + bad)  # the pool, by name, sampled
    median = lambda values: sorted(values)[len(values) // 2]  # noqa: E731
    good_wait, bad_wait = median([w["run_delay_s"] for w in good]), median([w["run_delay_s"] for w in bad])
    good_cpu, bad_cpu = median([w["on_cpu_s"] for w in good]), median([w["on_cpu_s"] for w in bad])
    assert bad_cpu > 0.05 and good_cpu > 0.05  # the pool's hashing is counted (threads alive at both ends)
    # Runnable, not running: at nice 19 beside two busy CPU loops of its own session, the pool waits many
    # times as long as it runs (nice 19 weighs 15 against 1024: CFS gives it ~1.5% while they run).
    # (3x on a loaded VM; 2.2x seen on an idle one, where the session's own loops are the only competition)
    assert bad_wait > 1.5 * good_wait and bad_wait > 0.5 * bad_cpu, (good_wait, bad_wait, bad_cpu)


def test_diff_names_the_priority_and_the_mechanism_with_the_wait(placed):
    _slowed(placed)
    for label in ("good", "bad"):
        (placed["base"] / f"{label}.json").write_text(json.dumps(placed[label]))
    result = run_envsnap("diff", placed["base"] / "good.json", placed["base"] / "bad.json", "--format", "json")
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)
    key, _ = _server(placed["bad"])
    # Slower by far on BAD; with 5 runs a side the spread can keep the test short of significance on an idle VM
    # (+663% at p=0.15 was seen, and +70% at p=0.55 on an AMD EPYC VM): the direction and the mechanism are what
    # this test is about. _slowed made sure BAD's median is 1.5x GOOD's: the verdict must say at least that.
    verdict = found["verdict"]
    assert verdict["headline"] == "REGRESSION" or (verdict["change_pct"] or 0) >= 49.5, verdict["summary"]
    mechanism = found["verdict"]["mechanism"]
    # The mechanism names the run-queue wait when the runs' waits separate beyond their spread; on an idle VM
    # with 5 runs a side they were seen not to, so the wait is checked as a figure (the test above), not a line.
    assert f"run_delay_s.{key}" in mechanism["factors"], sorted(mechanism["factors"])
    causes = [c["key"] for c in found["causes"]]
    assert len(found["differences"]) >= 20
    # The priority is the process's own, read from /proc, and the runs sampled it: it acted, first and alone,
    # above every variable whose name only says it could act; the wait it caused is its size.
    first = found["causes"][0]
    assert first["key"] == f"workers.{key}.nice", causes
    assert first["reach"]["tier"] == "acted" and first["reach"]["basis"] == "scheduling"
    assert found["causes"][1]["score"] < first["score"] and found["causes"][1]["reach"]["tier"] != "acted"
    assert first["size"]["share"] > 0.5, first["size"]
    (placed["base"] / "ranking.txt").write_text("\n".join(causes) + "\n" + mechanism["line"])  # for the report
