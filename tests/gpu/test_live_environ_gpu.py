"""On a real NVIDIA GPU (skipped elsewhere): a GPU switch set in-process by a launcher reaches its titled worker,
and without the probe only the worker's memory shows it (issue: "see inside every measured process").

The launcher reads a config file and, on the bad day, sets NVIDIA_TF32_OVERRIDE=0 in its own os.environ (as
SGLang's _set_envs_and_config sets NCCL/CUDA variables), then spawns one worker that titles itself
`sglang::scheduler_TP0` with setproctitle (SGLang's run_scheduler_process does) and serves fp32 matrix products
with TF32 allowed. cuBLAS reads NVIDIA_TF32_OVERRIDE with getenv (cuBLAS documentation): with it the products
run in full FP32, several times slower. /proc/PID/environ of the worker was cleared by its title; the capture
runs with `--pid` and no probe. Prints the figures (`pytest -s`): the memory read's status, the slowdown, the
rank of the planted cause and the tiers the communication settings got.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import time

import pytest
from helpers import run_envsnap
from helpers.planted import make_venv
from helpers.workers import clean_env, start, stop, wait_line

pytestmark = [pytest.mark.gpu, pytest.mark.slow]

if importlib.util.find_spec("torch") is None:  # pragma: no cover - the GPU machine has torch
    pytest.skip("torch is not installed", allow_module_level=True)

LAUNCHER = '''\
import multiprocessing as mp, os, sys, time

def serve(address):
    import setproctitle
    setproctitle.setproctitle("sglang::scheduler_TP0")
    import torch
    torch.set_float32_matmul_precision("high")  # TF32 allowed, as inference code does
    a = torch.randn(4096, 4096, device="cuda")
    b = torch.randn(4096, 4096, device="cuda")
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    from multiprocessing.connection import Listener
    with Listener(address, family="AF_UNIX") as listener:
        open(address + ".ready", "w").close()
        while True:
            with listener.accept() as conn:
                rounds = conn.recv()
                if rounds is None:
                    return
                started = time.perf_counter()
                for _ in range(rounds):
                    a @ b
                torch.cuda.synchronize()
                conn.send(time.perf_counter() - started)

if __name__ == "__main__":
    address = sys.argv[1]
    with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "math.conf")) as config:
        setting = config.read().strip()
    if setting:
        os.environ["NVIDIA_TF32_OVERRIDE"] = setting  # in-process, after exec
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
for _ in range(3):
    with Client(sys.argv[1], family="AF_UNIX") as conn:
        conn.send(int(sys.argv[2]))
        total += conn.recv()
print(json.dumps({"matmul_ms": round(total * 1000, 3)}))
'''
INNOCENT = {
    "good": {"JOB_ID": "4711", "BUILD_NUMBER": "88", "DEPLOY_COLOR": "blue", "TEAM": "serving", "TICKET": "OPS-1",
             "SHIFT": "day", "OPERATOR": "alice", "RELEASE_NAME": "r1", "NOTES": "first", "HISTSIZE": "1000",
             "EDITOR": "vi", "PAGER": "less", "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL"},
    "bad": {"JOB_ID": "4712", "BUILD_NUMBER": "89", "DEPLOY_COLOR": "green", "TEAM": "serving-2", "TICKET": "OPS-2",
            "SHIFT": "night", "OPERATOR": "bob", "RELEASE_NAME": "r2", "NOTES": "second", "HISTSIZE": "5000",
            "EDITOR": "nano", "PAGER": "more", "NCCL_ALGO": "Tree", "NCCL_PROTO": "Simple", "NCCL_P2P_DISABLE": "1",
            "NCCL_IB_DISABLE": "1", "TORCH_NCCL_BLOCKING_WAIT": "1", "MALLOC_ARENA_MAX": "2", "LD_BIND_NOW": "1"},
}
ROUNDS = "20"


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    base = tmp_path_factory.mktemp("liveenv-gpu")
    venv = make_venv(base / "venv", probe=False)  # no probe: the worker's memory is the only witness
    app = base / "app"
    app.mkdir()
    (app / "launch.py").write_text(LAUNCHER)
    (app / "bench.py").write_text(BENCH)
    out = {}
    for label, setting in (("good", ""), ("bad", "0")):
        (app / "math.conf").write_text(setting + "\n")
        env = clean_env(**INNOCENT[label], PWD=str(base / label))
        env.pop("NVIDIA_TF32_OVERRIDE", None)
        (base / label).mkdir()
        proc = start([venv["python"], app / "launch.py", "worker.sock"], env=env, cwd=str(base / label))
        try:
            worker_pid = int(wait_line(proc, "ready", timeout=180).split()[1])
            snap = base / f"{label}.json"
            started = time.monotonic()
            ran = run_envsnap("run", "-o", snap, "--label", label, "--pid", proc.pid, "--timeout", "60",
                              "--repeat", "5", "--warmup", "1", "--", sys.executable, app / "bench.py",
                              "worker.sock", ROUNDS, env=env, cwd=str(base / label), timeout=300)
            assert ran.returncode == 0, ran.stderr
            out[label] = {"snap": snap, "worker": worker_pid, "took": time.monotonic() - started}
        finally:
            stop(proc)
    return out


def test_the_titled_gpu_workers_memory_shows_the_switch_and_it_ranks_first(launches):
    bad = json.loads(launches["bad"]["snap"].read_text())
    worker = bad["sections"]["processes"]["data"]["processes"]["scheduler_TP0"]
    print(f"\nLIVE-ENV GPU: worker pid {worker['pid']}, /proc environ {worker.get('environ_status')}, memory "
          f"{worker.get('live_environ_status')} ({worker.get('live_environ_reason', '')}), capture+runs "
          f"{launches['bad']['took']:.1f} s")
    assert worker["pid"] == launches["bad"]["worker"]
    assert worker.get("live_environ_status") == "ok", worker.get("live_environ_reason")
    assert worker["live_environ"]["NVIDIA_TF32_OVERRIDE"] == "0"
    result = run_envsnap("diff", launches["good"]["snap"], launches["bad"]["snap"], "--format", "json")
    assert result.returncode == 1, result.stderr
    found = json.loads(result.stdout)
    verdict = found["verdict"]
    print(f"LIVE-ENV GPU: {verdict['summary']}")
    assert verdict["headline"] == "REGRESSION"
    # The switch is a difference of the worker's own environment, read from its memory: without the probe,
    # nothing shows whether NCCL created a communicator, so NCCL's settings can only be "could act" too.
    switch = next(c for c in found["causes"] if c["key"] == "workers.env.NVIDIA_TF32_OVERRIDE")
    difference = next(d for d in found["differences"] if d["key"] == switch["key"])
    assert difference["flat_keys"] == ["processes.processes.scheduler_TP0.live_environ.NVIDIA_TF32_OVERRIDE"]
    first = found["causes"][0]
    comm = [c for c in found["causes"] if str(c.get("variable") or "").startswith("NCCL_")]
    print(f"LIVE-ENV GPU: the switch ranks {switch['rank']} ({switch['reach']['tier']}, {switch['score']}); first "
          f"{first['key']} ({first['reach']['tier']}, {first['score']}); NCCL settings' tiers "
          f"{sorted({c['reach']['tier'] for c in comm})}")
