"""The investigation that found the real-use defects, on real processes, with the user's own steps.

A launcher (not SGLang) imports its `engine.py`, whose `configure()` sets WORK_MS in os.environ (the edit
between the two days: 1 on GOOD, 6 on BAD), then spawns two workers (multiprocessing spawn, titled
with setproctitle, which clobbers /proc/PID/environ) that join a real torch.distributed gloo group and
read WORK_MS only *after* init_process_group, when each request comes in; a benchmark client measures
them. Steps: `envsnap probe install --python VENV/bin/python`; start the launcher with a fresh
ENVSNAP_PROBE_DIR; `envsnap run --pid LAUNCHER --probe-dir DIR -- python client.py`; the same for BAD;
`envsnap diff`. The server keeps running through the capture and the runs, so no exit record covers them.

What must hold (each was wrong before):
  1. the workers' reads after init are known: WORK_MS is "read by" them, never "not read";
  2. one process, one entry: the probe's records and the /proc walk are joined by pid (no worker twice,
     no warning that the workers' environments are unreadable when the probe saw them);
  3. the client's processes are the command's, kept apart from the server's workers (no worker
     "python-N", no `workers.disagree` for a change all server workers share).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap

import pytest
from helpers import run_envsnap
from helpers.planted import figures, make_venv, outputs, side_env
from helpers.workers import start, stop, wait_line

pytestmark = pytest.mark.slow

ENGINE = textwrap.dedent('''\
    import os
    def configure():
        os.environ["WORK_MS"] = "{work_ms}"  # set in-process for the workers, like _set_envs_and_config
    ''')
LAUNCHER = textwrap.dedent('''\
    import multiprocessing as mp, os, socket, sys
    import engine

    def serve(rank, master_port, ports):
        import setproctitle
        setproctitle.setproctitle(f"myserver_scheduler_TP{rank}")
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{master_port}", rank=rank, world_size=2)
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        ports.put((rank, listener.getsockname()[1]))
        while True:
            conn, _ = listener.accept()
            with conn:
                while conn.recv(1):
                    work_s = float(os.environ.get("WORK_MS", "0")) / 1000  # read per request, after init
                    import time
                    end = time.perf_counter() + work_s
                    while time.perf_counter() < end:
                        pass
                    conn.sendall(b"k")

    if __name__ == "__main__":
        engine.configure()
        probe = socket.socket(); probe.bind(("127.0.0.1", 0)); master = probe.getsockname()[1]; probe.close()
        ctx = mp.get_context("spawn")
        ports = ctx.Queue()
        workers = [ctx.Process(target=serve, args=(r, master, ports), daemon=True) for r in range(2)]
        for w in workers:
            w.start()
        found = dict(ports.get(timeout=120) for _ in workers)
        print("ready", found[0], found[1], flush=True)
        sys.stdin.read()  # serve until stdin closes; the daemon workers end with it
    ''')
CLIENT = textwrap.dedent('''\
    import json, socket, sys, time
    ports = [int(p) for p in open(sys.argv[1]).read().split()]
    conns = [socket.create_connection(("127.0.0.1", p)) for p in ports]
    start, n = time.perf_counter(), 60
    for i in range(n):
        c = conns[i % len(conns)]
        c.sendall(b"x"); c.recv(1)
    print(json.dumps({"output_throughput": n / (time.perf_counter() - start)}))
    ''')


def _launch(venv, app, probe_dir, env):
    proc = start([str(venv["python"]), str(app / "launch.py")], env=dict(env, ENVSNAP_PROBE_DIR=str(probe_dir)),
                 cwd=str(app))
    line = wait_line(proc, "ready", timeout=180)
    (app / "ports").write_text(line.split(" ", 1)[1])
    return proc


@pytest.fixture(scope="module")
def investigation(tmp_path_factory):
    base = tmp_path_factory.mktemp("investigation")
    venv = make_venv(base / "venv", probe=True)
    app = base / "app"
    app.mkdir()
    (app / "launch.py").write_text(LAUNCHER)
    (app / "client.py").write_text(CLIENT)
    snaps = {}
    for label, work_ms in (("good", "1"), ("bad", "6")):
        (app / "engine.py").write_text(ENGINE.format(work_ms=work_ms))
        env = side_env(bad=label == "bad", SPT_NOENV=None)
        probe_dir = base / f"probe-{label}"
        server = _launch(venv, app, probe_dir, env)
        try:
            out = base / f"{label}.json"
            proc = subprocess.run(
                [str(venv["python"]), "-m", "envsnap", "run", "-o", str(out), "--label", label, "--repeat", "5",
                 "--pid", str(server.pid), "--probe-dir", str(probe_dir), "--timeout", "60", "--",
                 str(venv["python"]), str(app / "client.py"), str(app / "ports")],
                cwd=str(app), env=env, capture_output=True, text=True, timeout=300)
            assert proc.returncode == 0, proc.stderr[-3000:]
            snaps[label] = out
        finally:
            stop(server)
            try:
                os.killpg(server.pid, signal.SIGKILL)  # the workers, should the launcher have left them
            except OSError:
                pass
    yield snaps, base


def test_reads_after_init_are_known_and_the_variable_ranks_first(investigation):
    snaps, base = investigation
    result, text, page = outputs(snaps["good"], snaps["bad"], base)
    causes = result["causes"]
    mine = [c for c in causes if c.get("variable") == "WORK_MS"]
    assert mine, [c["key"] for c in causes[:10]]
    evidence = " ".join(" ".join(c["evidence"]) for c in mine)
    assert "not read" not in evidence, evidence
    assert "read by rank0" in evidence and "rank1" in evidence, evidence
    found = figures("server WORK_MS read after init", result, lambda c: c.get("variable") == "WORK_MS")
    assert found["rank"] == 1 and not found["tied"], (found, [c["key"] for c in causes[:6]])
    assert found["margin"] >= 0.1, found
    assert "WORK_MS" in text.split("likely causes", 1)[1].split("\n  2", 1)[0]


def test_one_process_one_entry_and_the_client_apart(investigation):
    snaps, base = investigation
    result, text, page = outputs(snaps["good"], snaps["bad"], base)
    keys = [d["key"] for d in result["differences"]]
    # The client's processes are the command's: never among the server's workers, never a "disagree".
    assert not any(k.startswith("workers.disagree.") for k in keys), keys
    assert not any(k.startswith("workers.python-") for k in keys), keys
    snap = json.loads(snaps["bad"].read_text())
    probe = snap["sections"]["probe"]["data"]
    assert probe.get("command_records"), sorted(probe)
    assert all(not str(r.get("title", "")).endswith("client.py") and "client.py" not in " ".join(r.get("argv") or [])
               for r in probe["records"].values())
    # One entry per worker process in the workers matrix (the probe's records joined to the walk by pid).
    columns = result["tables"]["workers"]["columns"]["bad"]
    pids_titles = [c["title"] for c in columns]
    assert sum("myserver_scheduler_TP" in t for t in pids_titles) == 2, pids_titles  # each worker once
    assert [c["key"] for c in columns if "client.py" in c["title"]] == ["command/python-0"], columns
    warnings = " ".join(result["warnings"])
    assert "unreadable" not in warnings, warnings
    shown = run_envsnap("show", snaps["bad"])
    assert shown.returncode == 0 and "command" in shown.stdout
