"""The run command's own processes' environments, read from their memory while each run goes on: real runs
of a client that sets a variable in-process and starts a child, no probe; then compared."""
from __future__ import annotations

import json
import sys

import pytest

from envsnap.analysis.compare import diff
from envsnap.measure import runs

# Sets its mode in-process (from its argument, as a config file would), starts a child that inherits it,
# and lives long enough to be sampled.
CLIENT = """\
import json, os, subprocess, sys, time
os.environ["CLIENT_MODE"] = sys.argv[1]
os.environ["API_TOKEN"] = "sk-abcdefghijklmnopqrstuvwxyz0123"
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(2.0)"])
time.sleep(2.0)  # sampled as it ages: read again after its in-process change
child.wait()
print(json.dumps({"latency_ms": 10.0}))
"""


def _measured(mode: str) -> dict:
    opts = runs.RunOptions(command=[sys.executable, "-c", CLIENT, mode], repeat=2, telemetry=True)
    session = runs.RunSession(opts)
    session.execute()
    assert all(r["ok"] for r in session.records), session.records
    return {"schema_version": 1, "sections": {}, "runs": session.records}


@pytest.mark.slow
def test_the_clients_in_process_variable_is_read_from_memory_and_compared():
    good, bad = _measured("fast"), _measured("slow")
    environs = bad["runs"][-1]["telemetry"]["environs"]
    # The client: memory has it, /proc (as at exec, before the in-process change) does not.
    clients = [e for e in environs.values()
               if e.get("live_environ", {}).get("CLIENT_MODE") == "slow" and "CLIENT_MODE" not in e.get("environ", {})]
    assert len(clients) == 1, environs
    client = clients[0]
    assert client["live_environ"]["API_TOKEN"].startswith("redacted:")  # redacted like every environment
    child = [e for e in environs.values() if e is not client and e.get("environ", {}).get("CLIENT_MODE") == "slow"]
    assert child, environs  # the child inherited it at exec: its /proc block shows it
    found = {d.key: d for d in diff.compare(good, bad).differences}
    changed = [k for k in found if k.endswith("changed_in_process.CLIENT_MODE")]
    assert changed, sorted(found)
    assert found[changed[0]].bad == {"start": None, "after": ["slow"]}
    assert found["workers.env.CLIENT_MODE"].bad == "slow" or found.get("workers.disagree.CLIENT_MODE")


def _children_of(pid: int, timeout_s: float = 10.0) -> list:
    """The pids of a process's children once it has some (its main thread's /proc children list)."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        time.sleep(0.05)
        with open(f"/proc/{pid}/task/{pid}/children") as handle:
            children = [int(p) for p in handle.read().split()]
        if children:
            return children
    raise AssertionError(f"process {pid} started no child in {timeout_s:g} s")


# Forks a child that sets its own variable; in "exec" mode the child then execs the very same command line (a
# process that only looks like a pool's worker: same command line, another address space).
FORKER = """\
import os, sys, time
if os.environ.get("FORKER_AGAIN"):
    time.sleep(30)
    sys.exit(0)
pid = os.fork()
if pid == 0:
    os.environ["WORKER_ONLY"] = "1"
    if sys.argv[1] == "exec":
        os.environ["FORKER_AGAIN"] = "1"
        os.execv(sys.executable, [sys.executable, "-c", sys.argv[2], "exec", sys.argv[2]])
    time.sleep(30)
    os._exit(0)
time.sleep(30)
"""


@pytest.mark.parametrize("mode", ["fork", "exec"])
def test_a_forked_child_is_read_where_its_parent_keeps_environ_and_checked(mode, monkeypatch):
    import os
    import signal
    import subprocess
    import time

    from envsnap.capture.collectors import live_environ
    from envsnap.measure.environ_sampling import EnvironSampler

    located: list = []
    real_locate = live_environ._locate
    monkeypatch.setattr(live_environ, "_locate", lambda pid, maps, exe: located.append(pid) or real_locate(pid, maps, exe))
    parent = subprocess.Popen([sys.executable, "-c", FORKER, mode, FORKER], start_new_session=True)
    try:
        children = _children_of(parent.pid)
        time.sleep(0.5)  # the child has set its variable (and exec'd, in "exec" mode)
        with open(f"/proc/{children[0]}/cmdline", "rb") as handle:
            assert handle.read().split(b"\0")[:3] == [os.fsencode(sys.executable), b"-c", FORKER.encode()]
        sampler = EnvironSampler(redact=False)
        sampler.begin_run()
        sampler.sample([parent.pid], 0.0)
        sampler.sample([parent.pid, children[0]], 0.01)
        tracked = {t.pid: t for t in sampler._current.values()}
        child, parent_read = tracked[children[0]], tracked[parent.pid]
        assert child.live.status == "ok", child.live
        assert child.live.env.get("WORKER_ONLY") == "1" and "WORKER_ONLY" not in parent_read.live.env
        if mode == "fork":  # the parent's place was right: read in the child's own memory, nothing located again
            assert child.located == parent_read.located and located == [parent.pid]
        else:  # a new image at another address: the guess failed its checks and environ was located anew
            assert child.located is not None and child.located[0] != parent_read.located[0]
            assert located == [parent.pid, children[0]]
            assert child.live.env.get("FORKER_AGAIN") == "1"
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()


def test_one_maps_read_serves_both_samplers_and_each_variable_is_redacted_once(monkeypatch):
    """A new process's maps are read once a sample: the maps sampler's text locates the environment too (the kernel
    writes /proc/PID/maps afresh at every read). The environment read that way, and redacted through the session's
    memo, is what a read of its own and redact_env give."""
    import os
    import subprocess
    import time

    from envsnap.capture.collectors import live_environ
    from envsnap.measure.environ_sampling import EnvironSampler
    from envsnap.measure.maps_sampling import MapsSampler
    from envsnap.measure.sample_reads import SampleReads
    from envsnap.redact import redact_env

    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
    env = dict(os.environ, PLANTED_TOKEN=token, PLAIN="1")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], env=env)
    opened: list = []
    import builtins

    real_open = builtins.open

    def counting_open(path, *args, **kwargs):
        opened.append(str(path))
        return real_open(path, *args, **kwargs)

    try:
        time.sleep(0.5)
        maps, environs = MapsSampler(), EnvironSampler()
        maps.begin_run()
        environs.begin_run()
        reads = SampleReads()
        maps.sample([child.pid], 0.0, reads)
        assert reads.maps_raw[child.pid].count(b"\n") > 10
        monkeypatch.setattr(live_environ, "open", counting_open, raising=False)
        environs.sample([child.pid], 0.0, reads)
        assert f"/proc/{child.pid}/maps" not in opened
        tracked = next(iter(environs._current.values()))
        alone, _ = live_environ.read_live_environ_at(child.pid)
        assert tracked.live.status == "ok" and tracked.live.env == alone.env
        first = environs.end_run()
        environs.begin_run()
        environs.sample([child.pid], 1.0)  # a second run: the memo answers
        second = environs.end_run()
    finally:
        child.kill()
        child.wait()
    (entry,), (again,) = first.values(), second.values()
    assert entry["live_environ"] == redact_env(alone.env) == again["live_environ"]
    assert entry["live_environ"]["PLAIN"] == "1" and token not in json.dumps(entry)


QUIET_FORKER = """\
import os, time
os.environ["SET_BEFORE_FORK"] = "yes"
if os.fork() == 0:
    time.sleep(30)
    os._exit(0)
time.sleep(30)
"""


def test_a_forked_child_that_changed_nothing_keeps_its_parents_strings_unread(monkeypatch):
    """A pool's worker, forked and not exec'd, holds its parent's environment at the same addresses: its first read
    finds every entry where the parent's read found it, and takes the strings that read decoded instead of reading
    them again. What it takes is what a read of its own finds."""
    import os
    import signal
    import subprocess
    import time

    from envsnap.capture.collectors import live_environ
    from envsnap.measure.environ_sampling import EnvironSampler

    string_reads: list = []
    real = live_environ._read_strings
    monkeypatch.setattr(live_environ, "_read_strings",
                        lambda memory, pointers: string_reads.append(memory.pid) or real(memory, pointers))
    parent = subprocess.Popen([sys.executable, "-c", QUIET_FORKER], start_new_session=True)
    try:
        children = _children_of(parent.pid)
        time.sleep(0.2)
        sampler = EnvironSampler(redact=False)
        sampler.begin_run()
        sampler.sample([parent.pid, children[0]], 0.0)
        tracked = {t.pid: t for t in sampler._current.values()}
        child, parent_read = tracked[children[0]], tracked[parent.pid]
        assert child.live.status == "ok" and child.live.env.get("SET_BEFORE_FORK") == "yes"
        assert string_reads == [parent.pid]  # the child's strings were not read again
        assert child.live.env == parent_read.live.env == live_environ.read_live_environ(children[0]).env
        assert not child.inherited  # the parent's read was lent for the read, and is not the child's record
    finally:
        os.killpg(parent.pid, signal.SIGKILL)
        parent.wait()
