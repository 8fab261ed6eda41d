"""Bad input found in real use, met as a user meets it: the real CLI in a subprocess says one line on
stderr, exits 2, and writes nothing.

Each of these used to capture, write a snapshot and exit 0 or 1 with the problem recorded in a
section: a typo in --pid, --watch, --repo or --sglang-url, a benchmark command that does not
exist, the same snapshot given twice to rank, a metric too large for the loader to read back.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from helpers import REPO_ROOT, interruptible, run_envsnap

GOOD = REPO_ROOT / "snapshots" / "h200-spec-decode-good.json"
BAD = REPO_ROOT / "snapshots" / "h200-spec-decode-bad.json"


def _one_line_error(result, *expected):
    """Exit 2, nothing on stdout, one `envsnap: error:` line on stderr holding each expected text."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("envsnap: error: "), result.stderr
    for text in expected:
        assert text in lines[0], (text, lines[0])
    return lines[0]


def _free_port() -> int:
    """A port on 127.0.0.1 with nobody listening (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_run_of_a_command_that_does_not_exist_captures_nothing(tmp_path):
    out = tmp_path / "s.json"
    result = run_envsnap("run", "-o", out, "--", "nosuchcommand-envsnap", "--flag", cwd=tmp_path)
    _one_line_error(result, "nosuchcommand-envsnap", "not found")
    script = tmp_path / "bench.py"  # a file that is there but not executable
    script.write_text("print('{\"tok_s\": 1}')\n")
    result = run_envsnap("run", "-o", out, "--", "./bench.py", cwd=tmp_path)
    _one_line_error(result, "./bench.py", "not executable", "python3 ./bench.py")
    result = run_envsnap("run", "-o", out, "--", "./missing.sh", cwd=tmp_path)
    _one_line_error(result, "./missing.sh", "no such file")
    assert sorted(os.listdir(tmp_path)) == ["bench.py"]  # no snapshot, no temporary file


def test_run_through_a_shell_and_by_path_still_runs(tmp_path):
    """What resolves is run: a shell's builtins through `sh -c`, an executable given by its path."""
    script = tmp_path / "bench.sh"
    script.write_text('#!/bin/sh\necho \'{"tok_s": 2}\'\n')
    script.chmod(0o755)
    for command in (["sh", "-c", 'echo "{\\"tok_s\\": 1}"'], ["./bench.sh"], [str(script)]):
        out = tmp_path / "s.json"
        result = run_envsnap("run", "-o", out, "--force", "--repeat", "5", "--timeout", "20", "--", *command,
                             cwd=tmp_path)
        assert result.returncode == 0, (command, result.stderr)
        assert all(r["ok"] for r in json.loads(out.read_text())["runs"])


def test_capture_of_a_process_that_does_not_exist(tmp_path):
    out = tmp_path / "s.json"
    pid = _dead_pid()
    result = run_envsnap("capture", "-o", out, "--pid", os.getpid(), "--pid", pid)
    _one_line_error(result, "--pid", f"no process {pid} is running")
    assert not out.exists()


def test_capture_of_a_python_that_does_not_exist_names_the_flag(tmp_path):
    """`--python` as `probe status --python` has it: bad input, exit 2, the option named; the variable
    only when the value came from it."""
    out = tmp_path / "s.json"
    missing = tmp_path / "nonexistent" / "python"
    line = _one_line_error(run_envsnap("capture", "-o", out, "--python", missing), "'--python'", str(missing))
    assert "ENVSNAP_PYTHON" not in line
    _one_line_error(run_envsnap("capture", "-o", out, env={"ENVSNAP_PYTHON": str(missing)}),
                    "'--python'", str(missing), "(from ENVSNAP_PYTHON)")
    _one_line_error(run_envsnap("run", "-o", out, "--python", tmp_path, "--", sys.executable, "-c", "pass"),
                    "'--python'", "is a directory")
    assert not out.exists()
    assert run_envsnap("probe", "status", "--python", missing).returncode == 2


def test_a_process_of_another_user_is_no_input_error():
    """It exists: the capture records what it may read (the processes collector says `denied`)."""
    code = "from envsnap.capture.preflight import check_pid; print(check_pid(1))"
    argv = [sys.executable, "-c", code]
    if os.geteuid() == 0:  # as root every process is ours: ask as nobody
        if not shutil.which("setpriv"):
            pytest.skip("needs setpriv to drop root")
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *argv]
    elif os.stat("/proc/1").st_uid == os.geteuid():
        pytest.skip("pid 1 is this user's")
    result = subprocess.run(argv, capture_output=True, text=True, timeout=60, cwd=REPO_ROOT,
                            env=dict(os.environ, PYTHONPATH=str(REPO_ROOT)))
    assert result.returncode == 0 and result.stdout.strip() == "1", result.stderr


def test_capture_of_paths_that_do_not_exist(tmp_path):
    out = tmp_path / "s.json"
    missing = tmp_path / "no" / "such"
    _one_line_error(run_envsnap("capture", "-o", out, "--watch", missing), "--watch", f"'{missing}' does not exist")
    _one_line_error(run_envsnap("capture", "-o", out, "--repo", missing), "--repo", f"'{missing}' does not exist")
    assert not out.exists()
    # A symbolic link to nowhere is there: the files collector records what it is.
    link = tmp_path / "dangling"
    link.symlink_to(tmp_path / "gone")
    result = run_envsnap("capture", "-o", out, "--watch", link, "--timeout", "20")
    assert result.returncode == 0, result.stderr


def test_capture_of_a_server_that_does_not_answer(tmp_path):
    out = tmp_path / "s.json"
    url = f"http://127.0.0.1:{_free_port()}"
    line = _one_line_error(run_envsnap("capture", "-o", out, "--sglang-url", url), "--sglang-url",
                           f"cannot reach {url}", "refused")
    assert "Traceback" not in line
    # A password in the URL never shows, refused before anything is tried.
    password = "hunter" + "2"  # put together here: see test_sglang_url.py
    result = run_envsnap("capture", "-o", out, "--sglang-url", f"http://bob:{password}@127.0.0.1:{_free_port()}/")
    _one_line_error(result, "--sglang-url", "ENVSNAP_SGLANG_API_KEY")
    assert password not in result.stderr and "bob" not in result.stderr
    assert not out.exists()


def test_a_server_that_accepts_no_connection_in_time_is_unreachable():
    """A listening socket whose accept queue is full drops new connections (Linux): the check gives up
    after its bound instead of waiting for the kernel's retries."""
    from envsnap.capture.preflight import check_server
    from envsnap.errors import EnvsnapError

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(0)
        port = server.getsockname()[1]
        fillers = []
        try:
            for _ in range(4):  # fill the queue (never accepted)
                filler = socket.socket()
                filler.setblocking(False)
                filler.connect_ex(("127.0.0.1", port))
                fillers.append(filler)
            with pytest.raises(EnvsnapError, match="no answer within 0.5 s"):
                check_server(f"127.0.0.1:{port}", timeout=0.5)
        finally:
            for filler in fillers:
                filler.close()
        server.settimeout(1.0)
        server.accept()[0].close()  # room in the queue again: the same server answers
        assert check_server(f"http://127.0.0.1:{port}", timeout=0.5) == f"http://127.0.0.1:{port}"


def test_rank_counts_each_snapshot_once(tmp_path):
    _one_line_error(run_envsnap("rank", GOOD, GOOD, BAD), "given twice")
    link = tmp_path / "link.json"
    link.symlink_to(GOOD)
    _one_line_error(run_envsnap("rank", GOOD, BAD, link), "the same file as")
    copy = tmp_path / "copy.json"
    shutil.copyfile(GOOD, copy)
    _one_line_error(run_envsnap("rank", GOOD, BAD, copy), "are the same snapshot")
    different = tmp_path / "third.json"
    third = json.loads(GOOD.read_text())
    third["label"] = "third"
    different.write_text(json.dumps(third))
    assert run_envsnap("rank", GOOD, BAD, different).returncode == 0


def test_a_metric_is_refused_when_the_loader_would_refuse_it(tmp_path):
    """-1e308 is finite: what refuses it is the bound of a plausible measurement, and every message says so.
    attach used to write it, and the file then no longer loaded ("must be a finite number, got -1e+308")."""
    snap = tmp_path / "s.json"
    shutil.copyfile(GOOD, snap)
    before = snap.read_bytes()
    _one_line_error(run_envsnap("attach", snap, "--metric", "x=-1e308"), "x=-1e308", "between -1e+15 and 1e+15")
    _one_line_error(run_envsnap("attach", snap, "--metric", "x=1e309"), "must be a finite number")
    _one_line_error(run_envsnap("attach", snap, "--metric", "x=nan"), "must be a finite number")
    assert snap.read_bytes() == before
    data = json.loads(before)
    data["runs"][0]["metrics"]["x"] = -1e308  # a file written by an older envsnap
    snap.write_text(json.dumps(data))
    _one_line_error(run_envsnap("show", snap), "metric 'x' must be between -1e+15 and 1e+15", "-1e+308")
    assert "finite" not in run_envsnap("show", snap).stderr


def test_a_benchmark_printing_an_absurd_metric_still_gives_a_loadable_snapshot(tmp_path):
    out = tmp_path / "s.json"
    result = run_envsnap("run", "-o", out, "--timeout", "20", "--", sys.executable, "-c",
                         "print('{\"tok_s\": 1e20, \"lat_ms\": 3}')")
    assert result.returncode == 0, result.stderr
    shown = run_envsnap("show", out)
    assert shown.returncode == 0, shown.stderr
    runs = json.loads(out.read_text())["runs"]
    assert [r["metrics"] for r in runs] == [{"lat_ms": 3.0}] * 5
    assert "tok_s = 1e+20 not kept" in runs[0]["note"]


def test_interrupted_is_said_on_stderr_only(tmp_path):
    """Ctrl-C: exit 130, the snapshot to stdout (`-o -`) stays alone there, the message goes to stderr."""
    started = tmp_path / "started"
    proc = subprocess.Popen(
        [sys.executable, "-m", "envsnap", "run", "-o", "-", "--timeout", "20", "--", sys.executable, "-c",
         f"import time; open({str(started)!r}, 'w').close(); time.sleep(60)"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert started.exists(), proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert out == ""  # no run completed: nothing written, not even to stdout
    assert err.strip().splitlines() == ["envsnap: error: interrupted before any run completed; nothing written"]
