"""What the scheduler did to a run's threads: run-queue wait, time on CPU, major faults, threads by name.

proc(5) "/proc/PID/task/TID/schedstat" (Documentation/scheduler/sched-stats.rst): three numbers per thread,
time spent on the CPU (ns), time spent waiting on a run queue (ns) and the number of timeslices run. The
wait is the direct measure of what a neighbour, a smaller CPU set or a lower priority took from the work:
runnable, not running. The kernel keeps them per thread, so a thread that ends takes its counts with it:
each thread's counts are kept as last sampled, and a run's figure is the sum over the threads seen of
(last - first), a thread first seen after the start counting from zero (it was born in the run). A thread
that lived between two samples is missed: the figures are a lower bound, exact for threads alive at
both ends (a server given with --pid: read at the start and at the end of the run).

Major page faults (a page read from disk): /proc/PID/stat field 12 for a watched process, and the
command's tree from getrusage(RUSAGE_CHILDREN) in telemetry.py (exact once reaped). Threads by name:
/proc/PID/task/TID/comm read once per thread (placement.thread_groups' grouping: trailing numbers off),
the peak count of each name over the run's samples.
"""
from __future__ import annotations

import os
from typing import Dict, Iterable, Mapping, Optional, Tuple

from envsnap.capture import procfs
from envsnap.capture.collectors.placement import group_name

_Counts = Tuple[int, int, int]  # (on-CPU ns, run-queue wait ns, timeslices)


def read_schedstat(pid: int, tid: int) -> Optional[_Counts]:
    try:
        fd = os.open(f"/proc/{pid}/task/{tid}/schedstat", os.O_RDONLY)
    except OSError:
        return None
    try:
        fields = os.read(fd, 256).split()
        return int(fields[0]), int(fields[1]), int(fields[2])
    except (OSError, ValueError, IndexError):
        return None
    finally:
        os.close(fd)


def major_faults(pid: int) -> Optional[int]:
    """Major page faults of a live process (its threads together: proc(5) stat field 12)."""
    try:
        _, fields = procfs.stat_fields(procfs.read_stat(pid))
        return int(fields[9])
    except (OSError, ValueError, IndexError):
        return None


def _tids(pid: int) -> Iterable[int]:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task") if t.isdigit()]
    except OSError:
        return []


class ThreadSampler:
    """Per-thread scheduler counts and names of a set of processes, over one run."""

    def __init__(self) -> None:
        self.first: Dict[Tuple[int, int], _Counts] = {}
        self.last: Dict[Tuple[int, int], _Counts] = {}
        self.names: Dict[Tuple[int, int], str] = {}
        self.peak_names: Dict[str, int] = {}

    def baseline(self, pids: Iterable[int]) -> None:
        """The counts before the run: threads alive now count from here, not from their birth."""
        for pid in pids:
            for tid in _tids(pid):
                counts = read_schedstat(pid, tid)
                if counts is not None:
                    self.first[(pid, tid)] = counts

    def sample(self, pids: Iterable[int], thread_counts: Optional[Mapping[int, int]] = None) -> None:
        """`thread_counts`: {pid: threads} from this sample's stat reads; a process of one thread is that thread,
        and its task directory is not listed."""
        now: Dict[str, int] = {}
        for pid in pids:
            single = thread_counts is not None and thread_counts.get(pid) == 1
            for tid in [pid] if single else _tids(pid):
                counts = read_schedstat(pid, tid)
                if counts is None:
                    continue  # ended between the listing and the read
                self.last[(pid, tid)] = counts
                name = self.names.get((pid, tid))
                if name is None:
                    name = self.names[(pid, tid)] = _comm(pid, tid)
                now[name] = now.get(name, 0) + 1
        for name, count in now.items():
            self.peak_names[name] = max(self.peak_names.get(name, 0), count)

    def summary(self) -> Dict[str, object]:
        """{"run_delay_s", "on_cpu_s", "timeslices", "threads_seen", "thread_names"} (empty: nothing sampled)."""
        if not self.last:
            return {}
        cpu = wait = slices = 0
        for key, (on_cpu, waited, ran) in self.last.items():
            start = self.first.get(key, (0, 0, 0))
            cpu += max(0, on_cpu - start[0])
            wait += max(0, waited - start[1])
            slices += max(0, ran - start[2])
        return {"run_delay_s": round(wait / 1e9, 4), "on_cpu_s": round(cpu / 1e9, 4), "timeslices": slices,
                "threads_seen": len(self.last), "thread_names": dict(sorted(self.peak_names.items()))}


def _comm(pid: int, tid: int) -> str:
    try:
        return group_name(procfs.read_file(f"/proc/{pid}/task/{tid}/comm", 64).decode("utf-8", "replace").rstrip("\n"))
    except OSError:
        return "?"
