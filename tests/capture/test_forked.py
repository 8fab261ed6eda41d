"""The packages collector runs in a forked process of its own (capture/forked.py): same section as in a
thread, an error or a hang reported as for a thread, a child the capture gives up on killed, and no
fork where the capturing process already runs other threads."""
from __future__ import annotations

import os
import threading
import time

import psutil

from envsnap.capture import runner
from envsnap.capture.base import CaptureContext, ok
from envsnap.capture.collectors import packages


def _whose_pid(ctx):
    return ok({"pid": os.getpid(), "deadline_set": ctx.deadline > 0})


def test_the_packages_section_is_the_same_from_its_own_process_as_from_a_thread(monkeypatch):
    forked = runner.capture(CaptureContext(timeout=60.0), only=["packages"])
    monkeypatch.setattr(runner, "OWN_PROCESS", frozenset())
    threaded = runner.capture(CaptureContext(timeout=60.0), only=["packages"])
    for snap in (forked, threaded):
        snap["sections"]["packages"].pop("elapsed_s")
        snap["sections"]["packages"]["data"].pop("hash_cache", None)  # hits/misses: the first one warmed it
    assert forked["sections"] == threaded["sections"]
    assert forked["sections"]["packages"]["status"] == "ok"
    assert forked["sections"]["packages"]["data"]["count"] > 10


def test_the_collector_runs_in_a_child_only_while_no_other_thread_runs():
    snap = runner.capture(CaptureContext(timeout=20.0), collectors=[("packages", _whose_pid)])
    data = snap["sections"]["packages"]["data"]
    assert data["pid"] != os.getpid() and data["deadline_set"]
    stop = threading.Event()
    other = threading.Thread(target=stop.wait, daemon=True)
    other.start()
    try:
        snap = runner.capture(CaptureContext(timeout=20.0), collectors=[("packages", _whose_pid)])
    finally:
        stop.set()
        other.join()
    assert snap["sections"]["packages"]["data"]["pid"] == os.getpid()  # in a thread: forking could deadlock


def test_an_error_in_the_child_is_reported_as_a_threads_would_be():
    def broken(ctx):
        raise ValueError("RECORD unreadable")

    snap = runner.capture(CaptureContext(timeout=20.0), collectors=[("packages", broken)])
    section = snap["sections"]["packages"]
    assert section["status"] == "error"
    assert "ValueError: RECORD unreadable" in section["error"]


def test_a_hung_child_is_recorded_as_timeout_and_killed(tmp_path):
    pid_file = tmp_path / "pid"

    def hangs(ctx):
        pid_file.write_text(str(os.getpid()))
        time.sleep(600)
        return ok({})

    started = time.monotonic()
    snap = runner.capture(CaptureContext(timeout=1.5), collectors=[("packages", hangs), ("env", _whose_pid)])
    assert time.monotonic() - started < 10
    assert snap["sections"]["packages"]["status"] == "timeout"
    assert snap["sections"]["env"]["status"] == "ok"  # the others are not held up
    child = int(pid_file.read_text())
    assert child != os.getpid()
    assert not psutil.pid_exists(child), "the child the capture gave up on still runs"


def test_a_real_packages_collect_in_the_child_sees_the_same_environment():
    """The child is a fork: the same sys.path, the same cache directory, the same deadline."""
    snap = runner.capture(CaptureContext(timeout=60.0), collectors=[("packages", packages.collect)])
    data = snap["sections"]["packages"]["data"]
    assert data["dists"] and data["count"] == len(data["dists"])  # this interpreter's, whatever is installed
    assert data["hash_cache"]["used"] in (True, False)
