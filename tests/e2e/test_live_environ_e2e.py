"""A variable set in-process reaches a titled worker; no probe: the worker's memory is the only witness.

The launcher (SGLang's shape: a main that edits os.environ before it spawns a scheduler, which titles
itself `sglang::scheduler_TP0` with setproctitle, as SGLang's run_scheduler_process does) reads its
allocation-tracing setting from a config file: none on the good day, PYTHONTRACEMALLOC=1 on the bad one. The
worker is spawned with it (multiprocessing "spawn" execs with the launcher's environ), so its Python runs
with tracemalloc tracing every allocation and its allocation-heavy work is several times slower (about 9x
measured: far beyond what a loaded machine does to its CPU time; PYTHONMALLOC=debug's ~1.5x was not).
/proc/PID/environ of the worker was
cleared by the title, and the launcher's /proc block predates the change: without the probe only the C
`environ` in their memory shows it. Both launches also differ as two real launches do (20+ innocent
variables: job ids, shell bookkeeping, the capturing shell's own settings).
"""
from __future__ import annotations

import json
import sys
import time

import pytest
from helpers import causes_by_key, run_envsnap
from helpers.workers import clean_env, make_venv, start, stop, wait_line

pytestmark = pytest.mark.slow

LAUNCHER = '''\
import multiprocessing as mp, os, sys, time

def work(rounds):
    for _ in range(rounds):  # allocation-heavy, as a tokenizer or a scheduler's bookkeeping is
        batch = [{"id": i, "text": str(i) * 3, "ids": [i, i + 1]} for i in range(2000)]
        del batch

def serve(address):
    import setproctitle
    setproctitle.setproctitle("sglang::scheduler_TP0")
    from multiprocessing.connection import Listener
    with Listener(address, family="AF_UNIX") as listener:
        open(address + ".ready", "w").close()
        while True:
            with listener.accept() as conn:
                rounds = conn.recv()
                if rounds is None:
                    return
                started = time.thread_time()  # CPU time: what the allocator costs, whatever else runs beside
                work(rounds)
                conn.send(time.thread_time() - started)

if __name__ == "__main__":
    address = sys.argv[1]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracing.conf")) as config:
        setting = config.read().strip()
    if setting:
        os.environ["PYTHONTRACEMALLOC"] = setting  # in-process, after exec: /proc/PID/environ never shows it
    mp.set_start_method("spawn")
    worker = mp.Process(target=serve, args=(address,))
    worker.start()
    while not os.path.exists(address + ".ready"):
        time.sleep(0.05)
    print("ready", worker.pid, flush=True)
    sys.stdin.read()
    from multiprocessing.connection import Client
    with Client(address, family="AF_UNIX") as conn:
        conn.send(None)
    worker.join()
'''

BENCH = '''\
import json, sys
from multiprocessing.connection import Client
total = 0.0
for _ in range(4):
    with Client(sys.argv[1], family="AF_UNIX") as conn:
        conn.send(int(sys.argv[2]))
        total += conn.recv()
print(json.dumps({"work_cpu_ms": round(total * 1000, 3)}))
'''

# What differs between the two launches besides the tracing: none of it acts on the work.
INNOCENT = {
    "good": {"JOB_ID": "4711", "BUILD_NUMBER": "88", "DEPLOY_COLOR": "blue", "REQUEST_SOURCE": "cron",
             "TEAM": "serving", "RUNBOOK_URL": "https://wiki/a", "TICKET": "OPS-1", "SHIFT": "day",
             "OPERATOR": "alice", "RELEASE_NAME": "r1", "DASHBOARD": "d1", "NOTES": "first",
             "_": "/usr/bin/python3", "SHLVL": "1", "OLDPWD": "/root", "TERM": "xterm", "HISTSIZE": "1000",
             "LESS": "-R", "EDITOR": "vi", "PAGER": "less"},
    "bad": {"JOB_ID": "4712", "BUILD_NUMBER": "89", "DEPLOY_COLOR": "green", "REQUEST_SOURCE": "manual",
            "TEAM": "serving-2", "RUNBOOK_URL": "https://wiki/b", "TICKET": "OPS-2", "SHIFT": "night",
            "OPERATOR": "bob", "RELEASE_NAME": "r2", "DASHBOARD": "d2", "NOTES": "second",
            "_": "/usr/bin/env", "SHLVL": "3", "OLDPWD": "/srv/x", "TERM": "screen", "HISTSIZE": "5000",
            "LESS": "-FRX", "EDITOR": "nano", "PAGER": "more"},
}
ROUNDS = "15"


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    base = tmp_path_factory.mktemp("liveenv")
    venv = make_venv(base / "venv", with_deps=True)  # setproctitle importable there, envsnap not
    app = base / "app"
    app.mkdir()
    (app / "launch.py").write_text(LAUNCHER)
    (app / "bench.py").write_text(BENCH)
    out = {}
    for label, setting in (("good", ""), ("bad", "1")):
        (app / "tracing.conf").write_text(setting + "\n")
        env = clean_env(**INNOCENT[label], PWD=str(base / label))
        env.pop("PYTHONTRACEMALLOC", None)
        (base / label).mkdir()
        address = "worker.sock"  # relative, in each side's own directory: the same command on both sides
        proc = start([venv["python"], app / "launch.py", address], env=env, cwd=str(base / label))
        try:
            worker_pid = int(wait_line(proc, "ready").split()[1])
            snap = base / f"{label}.json"
            started = time.monotonic()
            ran = run_envsnap("run", "-o", snap, "--label", label, "--pid", proc.pid, "--timeout", "60",
                              "--repeat", "5", "--warmup", "1", "--", sys.executable, app / "bench.py", address,
                              ROUNDS, env=env, cwd=str(base / label), timeout=300)
            assert ran.returncode == 0, ran.stderr
            out[label] = {"snap": snap, "worker": worker_pid, "took": time.monotonic() - started}
        finally:
            assert stop(proc) == 0
    return out


def _worker(snap_file):
    procs = json.loads(snap_file.read_text())["sections"]["processes"]["data"]["processes"]
    return procs["scheduler_TP0"], procs


def test_the_titled_workers_memory_shows_what_proc_cannot(launches):
    worker, procs = _worker(launches["bad"]["snap"])
    assert worker["pid"] == launches["bad"]["worker"]
    assert worker["environ_status"] == "unreadable"  # the title cleared the exec-time block
    assert worker["live_environ_status"] == "ok"
    assert worker["live_environ"]["PYTHONTRACEMALLOC"] == "1"
    assert worker["live_environ"]["JOB_ID"] == "4712"
    launcher = next(p for p in procs.values() if p.get("parent_key") is None)
    assert "PYTHONTRACEMALLOC" not in launcher["environ"]  # /proc: as at exec, before the in-process change
    assert launcher["live_environ"]["PYTHONTRACEMALLOC"] == "1"
    good, _ = _worker(launches["good"]["snap"])
    assert "PYTHONTRACEMALLOC" not in good["live_environ"]


def test_diff_ranks_the_in_process_variable_first_among_innocent_differences(launches):
    result = run_envsnap("diff", launches["good"]["snap"], launches["bad"]["snap"], "--format", "json")
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)
    causes = found["causes"]
    keys = [c["key"] for c in causes]
    faces = list(causes_by_key(causes))  # one change, one cause: the shell's copy of a variable is folded
    innocent = [k for k in faces if any(k.endswith("." + name) for name in INNOCENT["good"])]
    assert len(innocent) >= 20, keys  # the innocent variables are differences too, in the workers and the shell
    assert found["verdict"]["headline"] == "REGRESSION" and found["verdict"]["metric"] == "work_cpu_ms"
    # Other programs on a shared machine (the neighbours, measured during the runs) are real differences of
    # their own and may rank anywhere; of what the two launches differ in, the tracing comes first.
    first = next(c for c in causes if not c["key"].startswith("neighbour."))
    assert first["key"] == "workers.env.PYTHONTRACEMALLOC", keys[:6]
    assert (first["good"], first["bad"], first["tied"]) == (None, "1", 0)  # first alone, no tie
    assert "read from memory at capture" in first["why"], first["why"]
    # Attributed to the worker: the difference stands on the scheduler's own memory, nothing else.
    difference = next(d for d in found["differences"] if d["key"] == first["key"])
    assert difference["flat_keys"] == ["processes.processes.scheduler_TP0.live_environ.PYTHONTRACEMALLOC"]
    # The launcher's in-process change is the same change, folded under the worker's.
    launcher = next(c for c in causes_by_key(causes).values() if c["key"].endswith(".changed_in_process.PYTHONTRACEMALLOC"))
    assert launcher["folded_into"] == first["key"] and launcher["relation"] == "the same change"
