"""Process-tree walking on real processes: roles, /proc environments, setproctitle, races, permissions."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers import run_envsnap
from helpers.workers import WORKERS_DATA, clean_env, start, stop, wait_gone, wait_line

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import processes, proctree, roles

TITLED = str(WORKERS_DATA / "titled.py")
TREE = str(WORKERS_DATA / "tree.py")


# --- roles from titles (strings as SGLang writes them; versions in envsnap/roles.py) ---

@pytest.mark.parametrize("title, key, fields", [
    ("sglang::scheduler", "scheduler", {}),                                        # 0.5.x, TP=1
    ("sglang::scheduler_TP3", "scheduler_TP3", {"tp": 3}),
    ("sglang::scheduler_DP1_TP0", "scheduler_DP1_TP0", {"dp": 1, "tp": 0}),         # 0.4.6 with DP
    ("sglang::scheduler_DP0_TP2_EP2_PP1", "scheduler_DP0_TP2_EP2_PP1", {"dp": 0, "tp": 2, "ep": 2, "pp": 1}),  # 0.5.5 order
    ("sglang::scheduler_DP0_PP1_ATTN_CP1_MOE_DP0_TP5_EP5", "scheduler_DP0_PP1_ATTN_CP1_MOE_DP0_TP5_EP5",
     {"dp": 0, "pp": 1, "attn_cp": 1, "moe_dp": 0, "tp": 5, "ep": 5}),              # 0.5.23 order
    ("sglang::detokenizer", "detokenizer", {}),
    ("sglang::data_parallel_controller", "data_parallel_controller", {}),
    ("sglang::detokenizer_router", "detokenizer_router", {}),
])
def test_sglang_titles_give_roles_and_stable_keys(title, key, fields):
    role = roles.parse_role([title])
    assert role["key"] == key
    for name, value in fields.items():
        assert role[name] == value
    assert role["kind"] in ("scheduler", "detokenizer", "dp_controller")


def test_main_and_tokenizer_workers_and_unknowns():
    assert roles.parse_role(["/v/bin/python3", "-m", "sglang.launch_server", "--tp", "8"])["kind"] == "main"
    assert roles.parse_role(["/v/bin/python3", "/v/bin/sglang", "serve", "--model-path", "m"])["kind"] == "main"
    assert roles.parse_role(["/v/bin/python3", "/v/bin/sglang", "generate", "--model-path", "m"])["kind"] == "main"
    assert roles.parse_role(["python", "-m", "sglang.multimodal_gen.runtime.launch_server"])["kind"] == "main"
    assert roles.describe_ranks([{"tp": t // 2, "ulysses": t % 2} for t in range(4)]) == "TP0-1 U0-1"
    assert roles.parse_role(["python", "-m", "sglang.bench_serving"]) is None
    assert roles.parse_role(["grep", "sglang.launch_server"]) is None  # not after -m
    worker = roles.parse_role(["sglang::tokenizer_worker:4242"])
    assert worker["kind"] == "tokenizer" and worker["numbered"]  # the pid part is volatile
    assert roles.rank_role({"RANK": "3", "LOCAL_RANK": "1"}) == {"kind": "other", "key": "rank3", "rank": 3, "local_rank": 1}
    assert roles.describe_ranks([{"tp": t} for t in range(8)]) == "TP0-7"


# --- /proc environ classification ---

def test_classify_environ_distinguishes_empty_from_clobbered():
    assert proctree.classify_environ(b"") == ("ok", {}, "")
    status, env, note = proctree.classify_environ(b"A=1\0B=x=y\0")
    assert (status, env) == ("ok", {"A": "1", "B": "x=y"})
    status, env, note = proctree.classify_environ(b"\0" * 300)
    assert status == "unreadable" and env is None and "SPT_NOENV=1" in note
    # A cleared head with stale entries left at the end (seen with setproctitle in spawn children).
    status, env, note = proctree.classify_environ(b"\0" * 200 + b"NCCL_PROTO=LL\0")
    assert status == "unreadable" and env is None and "1 stale fragment" in note


@pytest.fixture
def titled_pair():
    """Two real processes titled like SGLang schedulers: one default, one with SPT_NOENV=1."""
    env = clean_env(NCCL_PROTO="LL")
    default = start([sys.executable, TITLED, "sglang::scheduler_TP0"], env=env)
    noenv = start([sys.executable, TITLED, "sglang::scheduler_TP1"], env=dict(env, SPT_NOENV="1"))
    try:
        wait_line(default, "TITLED")
        wait_line(noenv, "TITLED")
        yield default, noenv
    finally:
        stop(default)
        stop(noenv)


def test_setproctitle_clobbers_environ_unless_spt_noenv(titled_pair):
    default, noenv = titled_pair
    raw = open(f"/proc/{default.pid}/environ", "rb").read()
    assert raw and not raw.strip(b"\0"), "setproctitle is expected to clear the environment area"
    data = proctree.walk([default.pid, noenv.pid], deadline=time.monotonic() + 20)
    clobbered = data["processes"]["scheduler_TP0"]
    assert clobbered["environ_status"] == "unreadable"
    assert "environ" not in clobbered  # never presented as an empty environment
    assert "SPT_NOENV=1" in clobbered["environ_note"]
    assert clobbered["cmdline"] == ["sglang::scheduler_TP0"] and clobbered["role"] == {"kind": "scheduler", "tp": 0}
    readable = data["processes"]["scheduler_TP1"]
    assert readable["environ_status"] == "ok"
    assert readable["environ"]["NCCL_PROTO"] == "LL"
    assert data["roots"] == ["scheduler_TP0", "scheduler_TP1"]
    assert "1 environment unreadable (setproctitle)" in processes.summarize(data)[0]


def test_empty_environment_is_reported_as_empty_not_unreadable():
    proc = start(["env", "-i", sys.executable, "-c", "import sys; print('UP', flush=True); sys.stdin.read()"])
    try:
        wait_line(proc, "UP")
        entry = proctree.walk([proc.pid], deadline=time.monotonic() + 10)["processes"]
        (only,) = entry.values()
        assert only["environ_status"] == "ok" and only["environ"] == {}
    finally:
        stop(proc)


# --- trees, divergence, redaction ---

def test_tree_divergence_and_redacted_arguments():
    env = clean_env(KEEP_ME="1")
    proc = start([sys.executable, TREE, "2", "--extra-env", "CHILD_ONLY=yes", "--extra-env", "KEEP_ME=2",
                  "--api-key", "sk-live-abcdefghijklmnop1234"], env=env)
    try:
        pids = [int(p) for p in wait_line(proc, "PIDS").split()[1:]]
        data = proctree.walk([proc.pid], deadline=time.monotonic() + 20)
    finally:
        stop(proc)
    procs = data["processes"]
    root_key = data["roots"][0]
    assert root_key.startswith("python") and procs[root_key]["pid"] == proc.pid
    children = {k: e for k, e in procs.items() if e["parent_key"] == root_key}
    assert sorted(e["pid"] for e in children.values()) == sorted(pids)
    assert sorted(children) == ["sleep-0", "sleep-1"]  # role-less processes: <name>-<n>
    div = children["sleep-0"]["divergence"]
    assert div["added"] == {"CHILD_ONLY": "yes"}
    assert div["changed"] == {"KEEP_ME": {"parent": "1", "child": "2"}}
    assert "HOME" in div["removed"]
    root = procs[root_key]
    assert "sk-live-abcdefghijklmnop1234" not in json.dumps(root)
    assert root["cmdline"][-2] == "--api-key" and root["cmdline"][-1].startswith("redacted:")
    for entry in procs.values():
        assert entry["status"] == "ok" and isinstance(entry["cpu_affinity"], list) and entry["num_threads"] >= 1


def test_collector_requires_a_request_and_reports_missing_pids():
    assert processes.collect(CaptureContext())["status"] == "unavailable"
    assert "--pid" in processes.collect(CaptureContext())["reason"]
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    result = processes.collect(CaptureContext(pids=[dead.pid], timeout=10))
    assert result["status"] == "error" and f"no such process: {dead.pid}" in result["error"]


# --- races: processes that exit mid-walk ---

def test_process_killed_just_before_it_is_read_becomes_gone():
    proc = start([sys.executable, TREE, "3"], env=clean_env())
    try:
        pids = [int(p) for p in wait_line(proc, "PIDS").split()[1:]]
        victim = pids[1]

        def kill_victim(pid):
            if pid == victim:
                os.kill(victim, signal.SIGKILL)
                wait_gone(victim)  # tree.py reaps it: gone from /proc, not a zombie

        data = proctree.walk([proc.pid], deadline=time.monotonic() + 20, on_visit=kill_victim)
    finally:
        stop(proc)
    by_pid = {e["pid"]: e for e in data["processes"].values()}
    assert by_pid[victim]["status"] == "gone"
    assert by_pid[victim]["environ_status"] == "gone"
    assert "environ" not in by_pid[victim]
    assert [by_pid[p]["status"] for p in (pids[0], pids[2])] == ["ok", "ok"]


def test_walks_survive_a_churning_tree():
    """Children live 0-30 ms and are replaced continuously: every walk must finish cleanly."""
    proc = start([sys.executable, TREE, "6", "--churn", "2.0"], env=clean_env())
    statuses = set()
    walks = 0
    try:
        wait_line(proc, "PIDS")
        end = time.monotonic() + 1.5
        while time.monotonic() < end:
            data = proctree.walk([proc.pid], deadline=time.monotonic() + 10)
            walks += 1
            for entry in data["processes"].values():
                statuses.add(entry["status"])
                assert entry["environ_status"] in ("ok", "gone", "unreadable", "denied")
                if entry["status"] == "gone":
                    assert "environ" not in entry
    finally:
        stop(proc)
    assert walks >= 3
    assert statuses <= {"ok", "gone", "denied"} and "ok" in statuses


def test_a_pid_reused_between_listing_and_reading_is_not_taken_for_the_old_process():
    me = os.getpid()
    info = proctree.inspect(me, expected_create_time=1.0)  # wrong birth time: "another" process
    assert info["status"] == "gone" and "reused" in info["note"]
    assert proctree.inspect(me)["status"] == "ok"


# --- permissions: a real unprivileged reader ---

@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv to read as another user")
def test_another_users_process_environment_is_denied_not_empty(tmp_path):
    target = start([sys.executable, TITLED, "plain-title-not-sglang"], env=dict(clean_env(), SPT_NOENV="1"))
    try:
        wait_line(target, "TITLED")
        script = ("import json, sys, time\n"
                  "from envsnap.capture.collectors import proctree\n"
                  f"print(json.dumps(proctree.walk([{target.pid}], deadline=time.monotonic() + 20)))\n")
        env = clean_env(PYTHONPATH=os.pathsep.join(sys.path))
        result = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", sys.executable, "-c", script],
                                capture_output=True, text=True, timeout=60, env=env, cwd=str(tmp_path))
    finally:
        stop(target)
    if result.returncode != 0 and "Permission denied" in result.stderr and "envsnap" in result.stderr:
        pytest.skip("the checkout is not readable by an unprivileged user here")
    assert result.returncode == 0, result.stderr
    (entry,) = json.loads(result.stdout)["processes"].values()
    assert entry["status"] == "ok" and entry["environ_status"] == "denied"
    assert "environ" not in entry and "another user" in entry["environ_note"]
    assert "cwd" in entry.get("denied_fields", [])


@pytest.mark.gpu
def test_process_holding_a_gpu_lists_it():
    """NVML's running-process list maps the pid to its GPU (checked on an H200: gpus [0])."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch without CUDA")
    code = ("import sys, torch\n"
            "x = torch.ones(1 << 20, device='cuda:0'); torch.cuda.synchronize()\n"
            "print('UP', flush=True); sys.stdin.read()\n")
    proc = start([sys.executable, "-c", code], env=clean_env())
    try:
        wait_line(proc, "UP", timeout=120)
        result = processes.collect(CaptureContext(pids=[proc.pid], timeout=30))
    finally:
        stop(proc)
    data = result["data"]
    assert data["gpu_source"] == "nvml"
    (entry,) = data["processes"].values()
    assert entry["gpus"] == [0]


# --- SGLang 0.5.23 diffusion titles and `sglang generate`, on real processes ---

@pytest.mark.parametrize("title, key, fields", [
    ("sgl_diffusion::scheduler", "diffusion_scheduler", {}),                              # 0.5.23, every group of 1
    ("sgl_diffusion::scheduler_3", "diffusion_scheduler_3", {"local_rank": 3}),           # 0.5.23, before model parallel
    ("sgl_diffusion::scheduler:2", "diffusion_scheduler_2", {"local_rank": 2}),           # 0.5.5
    ("sgl_diffusion::scheduler_TP0_U1", "diffusion_scheduler_TP0_U1", {"tp": 0, "ulysses": 1}),
    ("sgl_diffusion::scheduler_TP1_U0_R1_C0", "diffusion_scheduler_TP1_U0_R1_C0",
     {"tp": 1, "ulysses": 0, "ring": 1, "cfg": 0}),
])
def test_diffusion_titles_give_scheduler_roles(title, key, fields):
    role = roles.parse_role([title])
    assert role["kind"] == "scheduler" and role["key"] == key, role
    for name, value in fields.items():
        assert role[name] == value


@pytest.mark.slow
def test_sglang_generate_tree_is_found_with_diffusion_worker_roles(tmp_path):
    """`sglang generate` as the main process and its GPU workers titled as sglang 0.5.23 titles them,
    captured by `envsnap capture --pid` (real processes, real setproctitle)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    console = bin_dir / "sglang"  # the console script's name, as pip installs it
    console.write_text(f"#!{sys.executable}\n" + (WORKERS_DATA / "fake_sglang_generate.py").read_text())
    console.chmod(0o755)
    titles = ["sgl_diffusion::scheduler_TP0_U0", "sgl_diffusion::scheduler_TP0_U1",
              "sgl_diffusion::scheduler_TP1_U0", "sgl_diffusion::scheduler_TP1_U1"]
    argv = [console, "generate", "--model-path", "tiny-diffusion"]
    for title in titles:
        argv += ["--worker-title", title]
    server = start(argv, env=clean_env())
    out = tmp_path / "snap.json"
    try:
        wait_line(server, "READY")
        # --pid, not --sglang: other SGLang-like trees on a shared test machine must not join this one.
        result = run_envsnap("capture", "--pid", server.pid, "-o", out, "--timeout", "60")
    finally:
        stop(server)
    assert result.returncode == 0, result.stderr
    section = json.loads(out.read_text())["sections"]["processes"]
    assert section["status"] == "ok", section
    procs = section["data"]["processes"]
    assert procs["sglang-main"]["role"]["kind"] == "main"
    workers = {k: p for k, p in procs.items() if p["role"].get("kind") == "scheduler"}
    assert sorted(workers) == ["diffusion_scheduler_TP0_U0", "diffusion_scheduler_TP0_U1",
                               "diffusion_scheduler_TP1_U0", "diffusion_scheduler_TP1_U1"], sorted(procs)
    assert {(p["role"]["tp"], p["role"]["ulysses"]) for p in workers.values()} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert all(p["parent_key"] == "sglang-main" for p in workers.values())


_LAUNCHER = f"""
import subprocess, sys
children = [subprocess.Popen([sys.executable, {str(WORKERS_DATA / "titled.py")!r}, f"sglang::scheduler_TP{{r}}"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) for r in (0, 1)]
for child in children:
    child.stdout.readline()  # TITLED <pid>
print("READY", flush=True)
sys.stdin.read()
for child in children:
    child.stdin.close(); child.wait()
"""


@pytest.mark.parametrize("how", ["module of another package", "script"])
def test_a_parent_of_sglang_titled_processes_is_sglang_main_only_when_it_may_be(tmp_path, how):
    """`python -m minisgl.engine` starting processes titled like SGLang's schedulers is another package's
    program, not SGLang's main; a script (an app embedding sglang.Engine) still is, by position. Real
    processes, real setproctitle (tests/data/workers/titled.py)."""
    package = tmp_path / "minisgl"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "engine.py").write_text(_LAUNCHER)
    argv = ([sys.executable, str(package / "engine.py")] if how == "script"
            else [sys.executable, "-m", "minisgl.engine"])
    server = start(argv, env=clean_env(PYTHONPATH=str(tmp_path)), cwd=str(tmp_path))
    try:
        wait_line(server, "READY")
        roots, by_position = proctree.find_sglang_roots()
        data = proctree.walk([server.pid], deadline=time.monotonic() + 60, redact=True,
                             forced_main=[p for p in by_position if p == server.pid])
    finally:
        stop(server)
    assert server.pid in roots
    launcher = next(k for k, p in data["processes"].items() if p["pid"] == server.pid)
    if how == "script":
        assert server.pid in by_position and launcher == "sglang-main"
    else:
        assert server.pid not in by_position and launcher == "python-0", launcher
    assert sorted(k for k, p in data["processes"].items() if p["role"].get("kind") == "scheduler") == [
        "scheduler_TP0", "scheduler_TP1"]
    assert not roles.is_sglang_main(["python", str(tmp_path / "mini-sglang" / "launch_server.py")])
    assert roles.is_sglang_main(["python", "/src/sglang/python/sglang/launch_server.py"])
