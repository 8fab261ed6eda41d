"""benchmarks/tp2_allreduce.py (the 2-rank TP job of tp2_nccl_check.sh) and benchmarks/gpu_nccl_probe.py
(gpu_check.sh's step 5), run for real on CPU with gloo: spawned workers, setproctitle titles, a real
communicator. On GPUs the same scripts use NCCL (GPU-marked tests below; the 2-rank one needs 2 GPUs)."""
from __future__ import annotations

import importlib.util
import json
import math
import os
import subprocess
import sys
import time

import psutil
import pytest
from helpers import REPO_ROOT, run_envsnap

pytest.importorskip("torch")
pytest.importorskip("setproctitle")

BENCH = REPO_ROOT / "benchmarks"
TP2 = BENCH / "tp2_allreduce.py"
TUNING = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
SAFE = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if k not in TUNING and k not in SAFE}
    env.update(extra)
    return env


def _tp2(*args, env=None, timeout=180):
    return subprocess.run([sys.executable, str(TP2), *args], capture_output=True, text=True,
                          env=env or _env(), timeout=timeout)


def _metrics(stdout: str):
    last = _last_json(stdout)
    assert last and all(isinstance(v, float) and math.isfinite(v) and v > 0 for v in last.values())
    return last


SMALL = ("--backend", "gloo", "--sizes", "4096,65536", "--iters", "5", "--warmup", "1")


@pytest.mark.slow  # a real 2-rank gloo job: seconds
def test_bad_mode_workers_never_see_the_tuning_variables(tmp_path):
    status = tmp_path / "status.json"
    proc = _tp2("run", "--mode", "bad", *SMALL, "--status-file", str(status))
    assert proc.returncode == 0, proc.stderr
    metrics = _metrics(proc.stdout)
    assert set(metrics) == {"allreduce_4KiB_us", "allreduce_64KiB_us", "allreduce_mean_us"}
    views = json.loads(status.read_text())
    workers = views["workers"]
    assert sorted(workers) == ["scheduler_TP0", "scheduler_TP1"]
    for key, worker in workers.items():
        assert worker["title"] == f"sglang::{key}"  # SGLang's setproctitle form
        assert worker["sum_ok"] is True
        assert all(worker["env"][name] is None for name in TUNING), worker["env"]  # set too late for them
        assert all(worker["env"][name] == value for name, value in SAFE.items())  # always forced for children
        assert worker["pid"] != views["parent"]["pid"]
    # The parent did set them (after starting the workers); the detokenizer, started afterwards, sees them.
    assert all(views["parent"]["env_at_launch"][n] is None for n in TUNING)
    assert all(views["parent"]["env_now"][n] == v for n, v in TUNING.items())
    assert views["detokenizer"]["title"] == "sglang::detokenizer"
    assert all(views["detokenizer"]["env"][n] == v for n, v in TUNING.items())
    assert "scheduler_TP0" in proc.stdout and "NCCL_PROTO=<unset>" in proc.stdout


@pytest.mark.slow  # a real 2-rank gloo job: seconds
def test_good_mode_workers_see_the_tuning_variables(tmp_path):
    status = tmp_path / "status.json"
    proc = _tp2("run", "--mode", "good", *SMALL, "--status-file", str(status),
                env=_env(NCCL_NVLS_ENABLE="1"))  # an unsafe value from outside is overridden for the children
    assert proc.returncode == 0, proc.stderr
    _metrics(proc.stdout)
    views = json.loads(status.read_text())
    for worker in views["workers"].values():
        assert all(worker["env"][n] == v for n, v in TUNING.items())
        assert worker["env"]["NCCL_NVLS_ENABLE"] == "0"


@pytest.mark.slow
def test_serve_and_bench_like_a_server_with_titled_workers(tmp_path):
    sock, ready = tmp_path / "tp2.sock", tmp_path / "ready.json"
    server = subprocess.Popen([sys.executable, str(TP2), "serve", "--backend", "gloo", "--mode", "bad",
                               "--socket", str(sock), "--ready-file", str(ready), "--idle-exit", "60"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert server.poll() is None, server.communicate()[1]
            assert time.monotonic() < deadline, "server never became ready"
            time.sleep(0.2)
        info = json.loads(ready.read_text())
        assert info["pid"] == server.pid
        # What `ps` and envsnap's process walk see: the SGLang titles on the spawned children.
        ours = {w["pid"] for w in info["workers"].values()} | {info["detokenizer"]["pid"]}
        children = [c for c in psutil.Process(server.pid).children() if c.pid in ours]
        titles = sorted(" ".join(c.cmdline()).strip() for c in children)  # setproctitle pads with spaces
        assert titles == ["sglang::detokenizer", "sglang::scheduler_TP0", "sglang::scheduler_TP1"]
        for _ in range(2):  # a server answers several benchmark runs
            proc = _tp2("bench", "--socket", str(sock), "--sizes", "8192", "--iters", "4", "--warmup", "1")
            assert proc.returncode == 0, proc.stderr
            assert set(_metrics(proc.stdout)) == {"allreduce_8KiB_us", "allreduce_mean_us"}
        stop = _tp2("bench", "--socket", str(sock), "--stop")
        assert stop.returncode == 0, stop.stderr
        assert server.wait(timeout=60) == 0
        gone, alive = psutil.wait_procs(children, timeout=10)
        assert alive == []  # the server took its workers down with it
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)


def test_bench_without_a_server_fails_in_one_line(tmp_path):
    proc = _tp2("bench", "--socket", str(tmp_path / "none.sock"), "--timeout", "2")
    assert proc.returncode == 1
    assert proc.stderr.strip().count("\n") == 0 and "no answer from the server" in proc.stderr


@pytest.mark.slow  # a real torch.distributed job
def test_nccl_probe_job_late_env_and_one_rank_all_reduce():
    proc = subprocess.run([sys.executable, str(BENCH / "gpu_nccl_probe.py"), "--backend", "gloo", "--numel", "1024",
                           "--late-env", "NCCL_CUMEM_ENABLE=0"], capture_output=True, text=True, timeout=120,
                          env=_env())
    assert proc.returncode == 0, proc.stderr
    last = _last_json(proc.stdout)
    assert last["allreduce_ok"] == 1 and last["world_size"] == 1
    assert "late_env=['NCCL_CUMEM_ENABLE']" in proc.stdout


# ---------------------------------------------------------------- on real GPUs

@pytest.mark.gpu
def test_gpu_nccl_one_rank_job():
    import torch

    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    proc = subprocess.run([sys.executable, str(BENCH / "gpu_nccl_probe.py"), "--backend", "nccl"],
                          capture_output=True, text=True, timeout=300, env=_env(NCCL_DEBUG="INFO"))
    assert proc.returncode == 0, proc.stderr
    assert _last_json(proc.stdout)["allreduce_ok"] == 1
    assert "NCCL version" in proc.stdout + proc.stderr  # NCCL_DEBUG=INFO output of a real communicator


@pytest.mark.gpu
def test_gpu_two_rank_nccl_all_reduce_modes(tmp_path):
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs 2 GPUs (device kind nvidia-h200-x2)")
    for mode, seen in (("good", True), ("bad", False)):
        status = tmp_path / f"{mode}.json"
        proc = _tp2("run", "--mode", mode, "--backend", "nccl", "--iters", "50", "--status-file", str(status),
                    timeout=600)
        assert proc.returncode == 0, proc.stderr
        assert "allreduce_1MiB_us" in _metrics(proc.stdout)
        for worker in json.loads(status.read_text())["workers"].values():
            assert (worker["env"]["NCCL_PROTO"] == "LL") is seen
            assert worker["nccl_version"]


@pytest.mark.slow  # the whole script, real jobs
def test_tp2_nccl_check_sh_with_no_budget_still_packs_results(tmp_path):
    """Every step skipped for lack of time (no server is started): a summary and <= 8 files under $OUT."""
    out = tmp_path / "out"
    env = dict(_env(), OUT=str(out), TP2_BUDGET_S="1", TP2_BACKEND="gloo",
               PATH=f"{os.path.dirname(sys.executable)}{os.pathsep}{os.environ.get('PATH', '')}")
    proc = subprocess.run(["bash", str(BENCH / "tp2_nccl_check.sh")], capture_output=True, text=True, env=env,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "[good] SKIPPED" in proc.stdout and "[bad] SKIPPED" in proc.stdout
    files = sorted(p.name for p in out.iterdir())
    assert files == ["results_x2.tar.gz", "summary_x2.json", "summary_x2.txt", "tp2_nccl_check_x2.log"]
    steps = json.loads((out / "summary_x2.json").read_text())["steps"]
    assert steps and {s["result"] for s in steps} == {"skipped"}


@pytest.mark.slow
def test_probe_records_show_what_each_worker_and_the_nccl_job_saw(tmp_path):
    """The probe installed in a real venv: BAD's workers lack the tuning at init_process_group (probe records,
    read back through envsnap capture), and the 1-rank job's in-process variable is there at init only."""
    from helpers.workers import make_venv

    spec = importlib.util.spec_from_file_location("gpu_check_tools", BENCH / "gpu_check_tools.py")
    tools = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tools)

    venv = make_venv(tmp_path / "venv")
    proc = run_envsnap("probe", "install", "--site", venv["site"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    for name, argv in (("tp2", [TP2, "run", "--mode", "bad", *SMALL]),
                       ("one", [BENCH / "gpu_nccl_probe.py", "--backend", "gloo", "--numel", "64",
                                "--late-env", "NCCL_CUMEM_ENABLE=0"])):
        probe_dir = tmp_path / f"probe-{name}"
        probe_dir.mkdir()
        job = subprocess.run([str(venv["python"]), *map(str, argv)], capture_output=True, text=True, timeout=180,
                             env=_env(ENVSNAP_PROBE_DIR=str(probe_dir)))
        assert job.returncode == 0, job.stderr
        snap = tmp_path / f"{name}.json"
        proc = run_envsnap("capture", "-o", snap, "--probe-dir", probe_dir, "--timeout", "30", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        figures = tmp_path / f"{name}-fig.json"
        if name == "tp2":
            rc = tools.main(["workers-check", str(snap), "--tuning", "NCCL_PROTO=LL,NCCL_ALGO=Ring",
                             "--expect", "unseen", "--tag", "bad", "--figures", str(figures)])
            fig = json.loads(figures.read_text())
            assert rc == 0 and fig["bad.workers"] == 2 and fig["bad.workers_source"] == "probe env_at_init"
        else:
            rc = tools.main(["probe-check", str(snap), "--late", "NCCL_CUMEM_ENABLE=0", "--backend", "gloo",
                             "--figures", str(figures)])
            assert rc == 0 and json.loads(figures.read_text())["probe.late_env_seen_at_init"] is True


def _last_json(text):
    """The last output line that is a JSON object: NCCL prints INFO lines to stdout even at shutdown."""
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise AssertionError(f"no JSON line in output: {text[-500:]!r}")
