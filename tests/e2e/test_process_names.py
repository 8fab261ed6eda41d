"""One process, one name in every key of a snapshot: the libraries section keys processes by the walk's key
or the probe's, the workers' view joins the two by pid under one name (a role, else a rank, else the walk's).

Real processes: benchmarks/tp2_allreduce.py's launcher with two spawned gloo workers titled with setproctitle
(`sglang::scheduler_TP<r>`), the probe installed in their venv. The launcher is "python-0" to the process walk
(--pid) and "sglang-main" to the probe; captured once with --pid and once from the probe alone, the same
unchanged libraries must not read as changes (issue 36: one unchanged mapped library showed as two).
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from helpers import REPO_ROOT, run_envsnap
from helpers.workers import clean_env, make_venv, start, stop

TP2 = REPO_ROOT / "benchmarks" / "tp2_allreduce.py"


@pytest.mark.slow
def test_a_process_walked_on_one_side_and_probed_on_the_other_has_one_name(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("setproctitle")
    venv = make_venv(tmp_path / "venv")
    assert run_envsnap("probe", "install", "--site", venv["site"], cwd=tmp_path).returncode == 0
    probe = tmp_path / "probe"
    probe.mkdir()
    server = start([venv["python"], TP2, "serve", "--backend", "gloo", "--mode", "none",
                    "--socket", tmp_path / "tp2.sock", "--ready-file", tmp_path / "ready.json", "--idle-exit", "120"],
                   env=clean_env(ENVSNAP_PROBE_DIR=str(probe), GLOO_SOCKET_IFNAME="lo"))
    try:
        deadline = time.monotonic() + 150
        while not (tmp_path / "ready.json").exists():
            assert server.poll() is None, server.stderr.read()[-2000:]
            assert time.monotonic() < deadline, "the server never became ready"
            time.sleep(0.1)
        walked = run_envsnap("capture", "-o", tmp_path / "walked.json", "--pid", server.pid, "--probe-dir", probe,
                             "--timeout", "60", cwd=tmp_path, timeout=180)
        assert walked.returncode == 0, walked.stderr
        probed = run_envsnap("capture", "-o", tmp_path / "probed.json", "--probe-dir", probe, "--timeout", "60",
                             cwd=tmp_path, timeout=180)
        assert probed.returncode == 0, probed.stderr
    finally:
        subprocess.run([sys.executable, str(TP2), "bench", "--socket", str(tmp_path / "tp2.sock"), "--stop",
                        "--timeout", "10"], capture_output=True, timeout=30)
        stop(server, timeout=20)
    libraries = {side: json.loads((tmp_path / f"{side}.json").read_text())["sections"]["libraries"]["data"]
                 for side in ("walked", "probed")}
    launcher = {side: next(k for k, e in data["processes"].items() if e["pid"] == server.pid)
                for side, data in libraries.items()}
    assert launcher == {"walked": "python-0", "probed": "sglang-main"}  # the section's own keys differ
    result = json.loads(run_envsnap("diff", "--format", "json", tmp_path / "walked.json",
                                    tmp_path / "probed.json").stdout)
    mapped = [d["key"] for d in result["differences"] if d["key"].startswith("libraries.")]
    assert not [k for k in mapped if ".sglang-main." in k or ".python-0." in k], mapped
    assert not [k for k in (d["key"] for d in result["differences"]) if k.startswith("workers.python-0")]
