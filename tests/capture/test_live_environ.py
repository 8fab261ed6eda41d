"""The live environment (the C `environ` array read from a process's memory) on real processes.

Three views of one process are compared: what the process itself has in os.environ (what the in-process
probe records), its `environ` read from memory, and /proc/PID/environ (the block as it was at exec).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time

import pytest
from helpers.workers import clean_env

from envsnap.capture.collectors import live_environ, proctree
from envsnap.capture.collectors.live_environ import read_live_environ

# Prints its own os.environ (the probe's view) once it has changed it in-process, then waits.
TARGET = """\
import json, os, sys
os.environ["SET_IN_PROCESS"] = "after-exec"
os.environ["CHANGED"] = "new"
del os.environ["REMOVED"]
if "--title" in sys.argv:
    import setproctitle
    setproctitle.setproctitle("sglang::scheduler_TP0")
print(json.dumps(dict(os.environ)), flush=True)
sys.stdin.read()
"""


def _start(argv, env):
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    line = proc.stdout.readline()
    return proc, line


def _stop(proc):
    proc.stdin.close()
    proc.wait(30)


def _proc_environ(pid):
    """/proc/PID/environ as the process walk reads it (None: overwritten by a title)."""
    return proctree.read_environ(pid)[1]


@pytest.mark.parametrize("title", [False, True])
def test_memory_shows_in_process_changes_that_proc_environ_does_not(title):
    env = clean_env(CHANGED="old", REMOVED="gone-later", AT_EXEC="kept")
    proc, line = _start([sys.executable, "-c", TARGET] + (["--title"] if title else []), env)
    try:
        inside = json.loads(line)  # the probe's view: os.environ inside the process
        live = read_live_environ(proc.pid)
        at_exec = _proc_environ(proc.pid)
    finally:
        _stop(proc)
    assert live.status == "ok", live
    assert live.env == inside  # memory and the process's own view agree exactly
    assert (live.env["SET_IN_PROCESS"], live.env["CHANGED"], live.env["AT_EXEC"]) == ("after-exec", "new", "kept")
    assert "REMOVED" not in live.env
    assert os.path.basename(live.source).startswith("libc")  # this Python uses libc's own `environ`
    if title:  # setproctitle cleared the exec-time block: /proc shows no environment at all
        assert at_exec is None
    else:  # /proc: the block as at exec, none of the in-process changes
        assert at_exec["CHANGED"] == "old" and at_exec["REMOVED"] == "gone-later" and "SET_IN_PROCESS" not in at_exec


def test_a_second_read_at_the_found_place_reads_the_same_and_a_wrong_place_is_found_again():
    """Run telemetry reads a process again as it ages: where `environ` is does not move, so the second read skips the
    maps and symbols; a place that is wrong (the process exec'd since) reads no NAME=value and is looked up again."""
    from envsnap.capture.collectors.live_environ import read_live_environ_at

    proc, line = _start([sys.executable, "-c", TARGET], clean_env(CHANGED="old", REMOVED="x", AT_EXEC="kept"))
    try:
        inside = json.loads(line)
        first, located = read_live_environ_at(proc.pid)
        again, kept = read_live_environ_at(proc.pid, located=located)
        address, size, source = located
        wrong, found = read_live_environ_at(proc.pid, located=(address + 4096 * 64, size, source))
    finally:
        _stop(proc)
    assert first.status == again.status == wrong.status == "ok"
    assert first.env == again.env == wrong.env == inside
    assert kept == located and found == located  # the wrong place was not kept: it was looked up again



# Changes its environment once per line read, then says so: a process a reader reads again as it changes.
CHANGER = """\
import os, sys
for n, line in enumerate(sys.stdin):
    os.environ["STEP"] = str(n)
    print("set", n, flush=True)
"""


def test_a_read_again_keeps_the_strings_where_nothing_moved_and_reads_a_change(monkeypatch):
    """Run telemetry reads a process again as it ages: where `environ` and every entry are where the last read
    found them, the strings are not read again; os.environ's change (a new string, a new place) is read."""
    from envsnap.capture.collectors.live_environ import read_live_environ_at

    proc = subprocess.Popen([sys.executable, "-c", CHANGER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=clean_env(AT_EXEC="kept"))
    strings = []
    real = live_environ._read_strings
    monkeypatch.setattr(live_environ, "_read_strings", lambda memory, pointers: strings.append(1) or real(memory, pointers))
    try:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "set 0"
        first, located = read_live_environ_at(proc.pid)
        again, _ = read_live_environ_at(proc.pid, located=located, previous=first)
        assert len(strings) == 1 and again.env == first.env and again.entries == first.entries
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline().strip() == "set 1"
        changed, _ = read_live_environ_at(proc.pid, located=located, previous=again)
    finally:
        proc.stdin.close()
        proc.wait(30)
    assert first.env["STEP"] == "0" and first.env["AT_EXEC"] == "kept"
    assert len(strings) == 2 and changed.env["STEP"] == "1" and changed.entries != first.entries


C_PROGRAM = """\
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
extern char **environ;  /* used by the program itself: a copy relocation puts it in the executable */
int main(void) {
    setenv("PLANTED", "by-setenv", 1);
    unsetenv("DROPPED");
    printf("ready %d\\n", environ != 0);
    fflush(stdout);
    getchar();
    return 0;
}
"""


@pytest.fixture(scope="module")
def c_programs(tmp_path_factory):
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler")
    where = tmp_path_factory.mktemp("cprog")
    (where / "t.c").write_text(C_PROGRAM)
    built = {}
    for name, extra in (("dynamic", []), ("static", ["-static"])):
        done = subprocess.run([compiler, "-O1", "-o", str(where / name), str(where / "t.c"), *extra],
                              capture_output=True, timeout=120)
        if done.returncode == 0:
            built[name] = str(where / name)
    return built


def test_copy_relocated_environ_is_read_from_the_executable(c_programs):
    if "dynamic" not in c_programs:
        pytest.skip("could not build the C program")
    proc, _ = _start([c_programs["dynamic"]], clean_env(DROPPED="x"))
    try:
        live = read_live_environ(proc.pid)
    finally:
        _stop(proc)
    assert live.status == "ok", live
    assert live.env["PLANTED"] == "by-setenv" and "DROPPED" not in live.env
    assert live.source == c_programs["dynamic"]  # the executable's copy, not libc's stale one


def test_statically_linked_program_is_recorded_with_why(c_programs):
    if "static" not in c_programs:
        pytest.skip("no static C library to link against")
    proc, _ = _start([c_programs["static"]], clean_env())
    try:
        live = read_live_environ(proc.pid)
    finally:
        _stop(proc)
    assert (live.status, live.env) == ("unlocated", None)
    assert "statically linked" in live.note


def test_another_users_process_is_denied_with_the_reason():
    """Read by a process of another user: as root, a child that dropped to nobody reads our own process."""
    if os.geteuid() != 0:
        target = 1  # init: root's, and we are not root
        result = read_live_environ(target)
    else:
        code = ("import os, sys; from envsnap.capture.collectors.live_environ import read_live_environ; "
                "os.setgid(65534); os.setuid(65534); "  # imported first: root's files need not be readable
                f"r = read_live_environ({os.getpid()}); print(r.status); print(r.note)")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        status, note = done.stdout.splitlines()[:2]
        result = live_environ.LiveEnviron(status, None, note, "")
    assert result.status == "denied", result
    assert "PTRACE_MODE_ATTACH_REALCREDS" in result.note and "ptrace_scope" in result.note


def test_an_exited_process_and_a_zombie_are_recorded_not_raised():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    while proc.poll() is None:
        time.sleep(0.01)
    assert read_live_environ(proc.pid).status == "gone"  # reaped: no such pid
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # exited, not yet reaped
        with open(f"/proc/{zombie.pid}/stat") as handle:
            if handle.read().rsplit(")", 1)[1].split()[0] == "Z":
                break
        time.sleep(0.01)
    result = read_live_environ(zombie.pid)
    zombie.wait()
    assert result.status == "unreadable" and result.env is None and "exited" in result.note


@pytest.mark.slow
def test_processes_that_exit_mid_read_never_raise():
    big = clean_env(**{f"V{i}": "y" * 100 for i in range(5000)})  # ~0.5 MB: a read long enough to interrupt
    statuses = set()
    for attempt in range(12):
        proc, _ = _start([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"], big)
        killer = threading.Timer(0.0005 * attempt, proc.kill)
        killer.start()
        result = read_live_environ(proc.pid)
        killer.join()
        proc.wait()
        statuses.add(result.status)
        assert result.status in ("ok", "gone", "unreadable"), result
        assert (result.env is not None) == (result.status == "ok")
    assert statuses  # something was read each time


@pytest.mark.slow
def test_a_one_megabyte_environment_and_a_huge_argv_are_read_within_bounds():
    env = clean_env(**{f"BIG_{i}": str(i) * 20 + "v" * 100 for i in range(8000)})  # ~1.1 MB
    argv = [sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"] + ["a" * 1000] * 500
    assert sum(len(k) + len(v) + 2 for k, v in env.items()) > 1 << 20
    proc, _ = _start(argv, env)
    try:
        started = time.monotonic()
        live = read_live_environ(proc.pid, deadline=time.monotonic() + 60)
        took = time.monotonic() - started
        at_exec = _proc_environ(proc.pid)
    finally:
        _stop(proc)
    assert live.status == "ok", live
    assert live.env == at_exec  # nothing changed in-process: both views agree entry for entry
    assert took < 30  # generous: two loaded cores; measured ~0.05 s


def test_reads_are_bounded_in_entries_and_time(monkeypatch):
    env = clean_env(**{f"MANY_{i}": "v" for i in range(300)})
    proc, _ = _start([sys.executable, "-c", "import sys; print('ready', flush=True); sys.stdin.read()"], env)
    try:
        monkeypatch.setattr(live_environ, "MAX_ENTRIES", 100)
        capped = read_live_environ(proc.pid)
        monkeypatch.undo()
        late = read_live_environ(proc.pid, deadline=time.monotonic() - 1)
        monkeypatch.setattr(live_environ, "MAX_BYTES", live_environ.PAGE * live_environ.READ_AHEAD_PAGES)
        small = read_live_environ(proc.pid)
    finally:
        _stop(proc)
    assert capped.status == "truncated" and "100 entries" in capped.note and capped.env is None
    assert late.status == "timeout" and late.env is None
    assert small.status == "truncated" and "MiB" in small.note
