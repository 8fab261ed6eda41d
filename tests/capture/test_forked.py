"""The packages collector of `envsnap capture` runs in a forked process of its own (capture/forked.py):
the same section as in a thread, an error or a hang reported as for a thread, a child the capture
gives up on killed, no fork where the capturing process already runs other threads, and none unless
the one-shot capture command asks (CaptureContext.own_process). Each capture runs in a fresh
interpreter: forking is the point, and the test process itself never forks."""
from __future__ import annotations

import json
import subprocess
import sys
import time

import psutil
from helpers import REPO_ROOT

_SCRIPT = r"""
import json, os, sys, threading, time
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext, ok
from envsnap.capture.collectors import packages

def whose_pid(ctx):
    return ok({"pid": os.getpid(), "deadline_set": ctx.deadline > 0})

def broken(ctx):
    raise ValueError("RECORD unreadable")

def hangs(ctx):
    print(json.dumps({"child": os.getpid()}), flush=True)
    time.sleep(600)
    return ok({})

case = sys.argv[1]
own = case != "threaded"
collectors = {"real": None, "threaded": None, "pid": [("packages", whose_pid)], "broken": [("packages", broken)],
              "hangs": [("packages", hangs), ("env", whose_pid)], "busy": [("packages", whose_pid)]}[case]
if case == "busy":
    threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
ctx = CaptureContext(timeout=1.5 if case == "hangs" else 60.0, own_process=own)
snap = runner.capture(ctx, only=["packages"] if collectors is None else None, collectors=collectors)
for section in snap["sections"].values():
    section.pop("elapsed_s", None)
    (section.get("data") or {}).pop("hash_cache", None)  # hits/misses: the first capture warms it
print(json.dumps({"me": os.getpid(), "sections": snap["sections"]}, default=str), flush=True)
"""


def _capture(case: str) -> dict:
    proc = subprocess.run([sys.executable, "-c", _SCRIPT, case], capture_output=True, text=True, timeout=120,
                          cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    found = lines[-1]
    found["printed"] = lines[:-1]
    return found


def test_the_packages_section_is_the_same_from_its_own_process_as_from_a_thread():
    forked, threaded = _capture("real"), _capture("threaded")
    assert forked["sections"] == threaded["sections"]
    data = forked["sections"]["packages"]["data"]
    assert forked["sections"]["packages"]["status"] == "ok"
    assert data["dists"] and data["count"] == len(data["dists"])  # this interpreter's, whatever is installed


def test_the_collector_runs_in_a_child_only_when_asked_and_no_other_thread_runs():
    alone = _capture("pid")
    data = alone["sections"]["packages"]["data"]
    assert data["pid"] != alone["me"] and data["deadline_set"]
    busy = _capture("busy")
    assert busy["sections"]["packages"]["data"]["pid"] == busy["me"]  # in a thread: forking could deadlock


def test_an_error_in_the_child_is_reported_as_a_threads_would_be():
    section = _capture("broken")["sections"]["packages"]
    assert section["status"] == "error"
    assert "ValueError: RECORD unreadable" in section["error"]


def test_a_hung_child_is_recorded_as_timeout_and_killed():
    started = time.monotonic()
    found = _capture("hangs")
    assert time.monotonic() - started < 30
    assert found["sections"]["packages"]["status"] == "timeout"
    assert found["sections"]["env"]["status"] == "ok"  # the others are not held up
    child = found["printed"][0]["child"]
    assert child != found["me"]
    assert not psutil.pid_exists(child), "the child the capture gave up on still runs"


PACKAGES = "envsnap.capture.collectors.packages"
_CLI_SCRIPT = r"""
import json, sys
from envsnap.capture import forked
started = []
real = forked.start
# What had been imported when the child was forked: the capture command forks first thing (prestart).
forked.start = lambda func, ctx: started.append(
    [func.__module__, sorted(m for m in ("envsnap.capture.runner", "envsnap.capture.collectors.git", "psutil")
                             if m in sys.modules)]) or real(func, ctx)
from envsnap.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    print(json.dumps({"code": exc.code, "forked": started}))
"""


def test_the_capture_command_forks_and_run_does_not(tmp_path):
    from envsnap.capture.base import CaptureContext

    assert CaptureContext().own_process is False  # a library caller keeps threads
    # (run exits 1 here: `python -c pass` prints no metric; what matters is that it captured without a fork)
    for args, expected in ((["capture", "-o", str(tmp_path / "c.json")], {"code": 0, "forked": [[PACKAGES, []]]}),
                           (["run", "-o", str(tmp_path / "r.json"), "--", sys.executable, "-c", "pass"],
                            {"code": 1, "forked": []})):
        proc = subprocess.run([sys.executable, "-c", _CLI_SCRIPT, *args], capture_output=True, text=True, timeout=120,
                              cwd=REPO_ROOT, check=False)
        found = json.loads(proc.stdout.strip().splitlines()[-1])
        assert found == expected, (args[0], proc.stderr)


_AT_START_SCRIPT = r"""
import json, os, sys
from envsnap.capture import forked
started = []
real = forked.start
forked.start = lambda func, ctx: started.append(
    [func.__module__, "click" in sys.modules, ctx.deep]) or real(func, ctx)
sys.argv = ["envsnap", *sys.argv[1:]]
from envsnap.cli import main
import atexit
atexit.register(lambda: print(json.dumps({"forked": started}), flush=True))
main()
"""


def _cli_at_start(args, tmp_path, env=None):
    import os

    proc = subprocess.run([sys.executable, "-c", _AT_START_SCRIPT, *args], capture_output=True, text=True,
                          timeout=120, cwd=REPO_ROOT, check=False, env={**os.environ, **(env or {})})
    return proc, json.loads(proc.stdout.strip().splitlines()[-1])["forked"]


def test_the_capture_command_forks_before_click_when_its_options_leave_the_child_as_forked(tmp_path):
    """As the process starts, before click's import, with the options' defaults; taken once they are parsed."""
    out = tmp_path / "c.json"
    proc, forked = _cli_at_start(["capture", "-o", str(out), "--label", "early", "--force"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert forked == [[PACKAGES, False, False]]  # once, before click
    snap = json.loads(out.read_text())
    assert snap["label"] == "early" and snap["sections"]["packages"]["status"] == "ok"


def test_an_option_the_child_reads_forks_it_after_the_parsing(tmp_path):
    out = tmp_path / "c.json"
    proc, forked = _cli_at_start(["capture", "-o", str(out), "--deep", "--timeout", "60"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert forked == [[PACKAGES, True, True]]  # after the parsing, with --deep
    proc, forked = _cli_at_start(["capture", "-o", str(out), "--force"], tmp_path,
                                 env={"ENVSNAP_PYTHON": sys.executable})
    assert proc.returncode == 0, proc.stderr
    assert forked == [[PACKAGES, True, False]]  # --python's variable: also after


def test_a_child_forked_at_the_start_whose_context_disagrees_is_killed_and_forked_again():
    script = r"""
import json, os, sys
from envsnap.capture import forked
from envsnap.capture.base import CaptureContext
forked.prestart_at_start(["-o", "x.json"])
[(early_ctx, early)] = forked._AT_START
first = early["packages"].pid
children = forked.prestart(CaptureContext(own_process=True, content_max_file=1024))  # not the default
again = children["packages"].pid
alive = os.path.exists(f"/proc/{first}") and open(f"/proc/{first}/stat").read().split()[2] != "Z"
section = children["packages"](None)
print(json.dumps({"first": first, "again": again, "first_alive": alive, "status": section["status"],
                  "left": len(forked._AT_START)}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=REPO_ROOT, check=False)
    assert proc.returncode == 0, proc.stderr
    found = json.loads(proc.stdout.strip().splitlines()[-1])
    assert found["first"] != found["again"] and not found["first_alive"]
    assert found["status"] == "ok" and found["left"] == 0


def test_a_usage_error_leaves_no_child_forked_at_the_start_running(tmp_path):
    marker = f"no-orphan-{time.time_ns()}"
    # Output to files, not pipes: a child left behind holds the pipes open, and run() would wait for it to end.
    with open(tmp_path / "out", "w") as out, open(tmp_path / "err", "w") as err:
        proc = subprocess.run([sys.executable, "-m", "envsnap", "capture", "-o", str(tmp_path / "c.json"), "--label",
                               marker, "--no-such-option"], stdout=out, stderr=err, timeout=120, cwd=REPO_ROOT,
                              check=False)
    # At once: a child left behind would still be stat'ing the packages' files (~0.1 s) or writing to the closed
    # pipe; the one killed at exit was reaped before the command's process ended.
    left = [p.pid for p in psutil.process_iter(["cmdline"]) if marker in (p.info["cmdline"] or [])]
    stderr = (tmp_path / "err").read_text()
    assert proc.returncode == 2 and "no-such-option" in stderr
    assert stderr.count("\n") == 1  # one line
    assert left == []
