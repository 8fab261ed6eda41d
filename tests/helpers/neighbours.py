"""Real neighbour processes for the neighbours tests: busy loops and sleepers that are NOT descendants of
the process that starts them (double fork + setsid, as a daemon detaches), so envsnap running in the test's
own process sees them as other people's processes, the way it sees a job someone else started.

`Neighbour(...)` starts one and knows its pid; `stop()` ends exactly that pid (and waits until it is gone).
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from typing import List, Optional

SCRIPT = os.path.abspath(__file__)


def _detached(marker: str, mode: str, seconds: float, mapped: str) -> None:
    """Runs as `python neighbours.py MARKER MODE SECONDS [MAPPED]` (the marker shows in its command line)."""
    if os.fork():
        os._exit(0)  # the intermediate exits: the grandchild is reparented, no longer the starter's
    os.setsid()
    if os.environ.get("NEIGHBOUR_COMM"):  # a name of its own choosing, as anyone may set (proc(5): /proc/PID/comm)
        with open("/proc/self/comm", "w", encoding="utf-8", errors="surrogateescape") as comm:
            comm.write(os.environ["NEIGHBOUR_COMM"])
    if os.environ.get("NEIGHBOUR_UID"):  # another user's process (started as root)
        os.setgid(int(os.environ["NEIGHBOUR_UID"]))
        os.setuid(int(os.environ["NEIGHBOUR_UID"]))
    keep = None
    if mapped:  # a real mapping /proc/PID/maps shows (e.g. a file named like libcuda)
        import mmap

        handle = open(mapped, "rb")
        keep = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    # The pid is announced only now, set up as the test asked: a scan right after the start sees the name,
    # the user and the mapping (a loaded machine may otherwise scan between the fork and the mmap).
    print(os.getpid(), flush=True)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the starter reads our stdout and stderr to their end: let go of both
    os.dup2(devnull, 2)
    end = time.monotonic() + seconds
    if mode == "busy":
        while time.monotonic() < end:
            pass
    elif mode == "spawner":  # busy children, each reaped by this process (its cutime grows)
        while time.monotonic() < end:
            subprocess.run([sys.executable, "-c", "import time\nt = time.monotonic() + 0.3\n"
                            "while time.monotonic() < t: pass"])
    elif mode == "exec":  # become the command given after the marker's arguments (another job: a GPU loop)
        os.execv(sys.executable, [sys.executable, *sys.argv[5:]])
    elif mode == "chain":  # busy for SECONDS in a grandchild (through an intermediate), then idle a minute
        busy = f"import time\nt = time.monotonic() + {seconds}\nwhile time.monotonic() < t: pass"
        subprocess.run([sys.executable, "-c", f"import subprocess, sys; subprocess.run([sys.executable, '-c', {busy!r}])"])
        time.sleep(60)
    else:
        time.sleep(seconds)
    del keep


class Neighbour:
    """One detached process: mode "busy" (a busy loop), "spawner" (busy short-lived children it reaps),
    "chain" (busy for `seconds` in a grandchild, through an intermediate, then idle), "exec" (becomes
    `python *extra_args`: another job, e.g. a GPU loop) or "sleep"; `marker` shows in its command line (not
    with "exec"); `mapped`: a file it maps (e.g. a fake libcuda); `comm`: the name it gives itself; `uid`:
    the user it runs as (when the test runs as root)."""

    def __init__(self, marker: str, mode: str = "busy", seconds: float = 60.0, mapped: str = "",
                 extra_args: Optional[List[str]] = None, comm: str = "", uid: Optional[int] = None) -> None:
        env = dict(os.environ, NEIGHBOUR_COMM=comm, NEIGHBOUR_UID="" if uid is None else str(uid))
        proc = subprocess.run([sys.executable, SCRIPT, marker, mode, str(seconds), mapped, *(extra_args or [])],
                              capture_output=True, text=True, timeout=30, env=env)
        self.pid = int(proc.stdout.split()[0])
        self.started = _starttime(self.pid)

    def alive(self) -> bool:
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        if self.started is None or _starttime(self.pid) != self.started:
            return  # gone already (and the pid perhaps someone else's by now): nothing of ours to end
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            return
        for _ in range(200):  # reaped by init (or a subreaper): wait until the pid is gone
            if not self.alive() or _zombie(self.pid):
                return
            time.sleep(0.01)


def _starttime(pid: int) -> Optional[int]:
    """The process's start time (proc(5) stat field 22): with the pid, who it is."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
        return int(text[text.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return True
    return text[text.rindex(b")") + 2:][:1] == b"Z"


def busy_neighbours(count: int, marker: str, seconds: float = 120.0) -> List[Neighbour]:
    return [Neighbour(marker, "busy", seconds) for _ in range(count)]


def stop_all(neighbours: List[Neighbour]) -> None:
    for neighbour in neighbours:
        neighbour.stop()


if __name__ == "__main__":
    _detached(sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "")
