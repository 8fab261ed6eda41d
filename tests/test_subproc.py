"""run_command's children never outlive envsnap: a real Python process runs a hanging command in a daemon
thread (as a capture's collector does) and exits while it still waits; the command must be gone."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

from helpers.hardening import wait_for

from envsnap.subproc import run_command

# A collector's thread waits on a command that hangs (a dead NFS mount under `git`); the process exits
# the way the given exit does while the thread still waits. The command's own child (`sleep`) records its
# pid first: the whole group must go, not only the command.
EXITING_WITH_A_HUNG_COMMAND = textwrap.dedent("""
    import os, sys, threading, time
    from envsnap.subproc import run_command

    pidfile, how = sys.argv[1], sys.argv[2]
    command = ["sh", "-c", f"sleep 1000 & echo $! > {pidfile}.tmp; mv {pidfile}.tmp {pidfile}; wait"]
    threading.Thread(target=run_command, args=(command,), kwargs={"timeout": 600}, daemon=True).start()
    deadline = time.monotonic() + 60
    while not os.path.exists(pidfile) and time.monotonic() < deadline:
        time.sleep(0.01)
    if how == "handlers-then-os-exit":  # the CLI's exit without teardown (envsnap/cli/__init__.py)
        import atexit
        atexit._run_exitfuncs()
        os._exit(0)
    sys.exit(0)
""")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _run_and_exit(tmp_path, how: str) -> int:
    pidfile = tmp_path / "sleep.pid"
    subprocess.run([sys.executable, "-c", EXITING_WITH_A_HUNG_COMMAND, str(pidfile), how], check=True, timeout=120)
    return int(pidfile.read_text())


def test_a_command_still_running_at_exit_is_killed_with_its_group(tmp_path):
    sleeper = _run_and_exit(tmp_path, "sys-exit")
    try:
        # Killed by the exit handler before the process ended; the margin is for a loaded machine's reaping.
        assert wait_for(lambda: not _alive(sleeper), timeout=30), f"sleep {sleeper} outlived envsnap"
    finally:
        if _alive(sleeper):
            os.kill(sleeper, 9)


def test_the_clis_exit_without_teardown_kills_it_too(tmp_path):
    sleeper = _run_and_exit(tmp_path, "handlers-then-os-exit")
    try:
        assert wait_for(lambda: not _alive(sleeper), timeout=30), f"sleep {sleeper} outlived envsnap"
    finally:
        if _alive(sleeper):
            os.kill(sleeper, 9)


def test_no_command_starts_once_envsnap_is_exiting():
    code = ("import atexit, sys; from envsnap.subproc import run_command, _RUNNING; "
            "assert run_command(['true']).ok; _RUNNING.kill_all(); r = run_command(['true']); "
            "print(r.error, r.pid)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "not started: envsnap is exiting (true) None"


def test_a_finished_command_is_not_kept():
    from envsnap.subproc import _RUNNING

    result = run_command(["sh", "-c", "echo hi"], timeout=60)
    assert result.ok and result.stdout == "hi\n"
    assert all(proc.pid != result.pid for proc in _RUNNING._procs)
