"""Neighbours during a run: who else used the CPUs and the GPUs while the benchmark ran.

The run is the window of capture/collectors/cpu_window.py's and gpu_processes.py's readings (their docs
say what each one is and where it comes from): every process is read when the run starts (before the command does), a few
times while it runs, and once more when it has ended; the runnable count at every telemetry sample;
/proc/stat and the load with every scan; with NVML, each GPU's compute processes before, during and
after. The record is the run telemetry's "neighbours". Rates are over the window between the first and
the last scan (a little longer than the command: it holds the command's start and reaping).

Cost: reading every process on a busy machine is the one part that grows with the machine (a few
microseconds a process: 0.7-1.5 ms for 80 processes on the loaded 2-core test VM). During a run the
scans are spaced so that they take at most SCAN_BUDGET of one CPU, as measured while they go: with 80
processes one a second (the first after MIN_SCAN_INTERVAL_S: a run shorter than that has only its end
scan), with 2,000 one every few seconds. The end scan of a run is the start scan of the next when that
one starts at once (back-to-back runs: CpuWindow's `previous`), so a run costs one scan outside the
command's time, not two. A process that lives only between two scans is not seen (its CPU time still
shows in the machine's busy CPUs, and in its parent's once reaped). NVML's process lists are read at the
start, with each scan, and at the end; what they cost (2.4 ms of CPU a GPU on an H100 VM, the per-process
utilisation nearly all of it, seven times a scan of its 23 processes) counts in the scan's cost that spaces the
scans; the utilisation is not asked at the start, where no sample is newer than the window. A GPU process that
lives only between two reads is not listed (its work still shows in the GPU's utilisation series): the run's own,
in a run shorter than MIN_SCAN_INTERVAL_S, is not; it is no neighbour.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from envsnap.capture.collectors.cpu_window import CpuWindow, read_loadavg, runnable_summary
from envsnap.capture.collectors.gpu_processes import GpuProcesses

# At most this share of one CPU goes to scanning processes during a run (the whole telemetry's target is 1%).
SCAN_BUDGET = 0.002
# ... and never closer than this, nor further apart than this (a process of a few seconds is then seen).
MIN_SCAN_INTERVAL_S = 1.0
MAX_SCAN_INTERVAL_S = 5.0


def scan_interval(cost_s: float) -> float:
    """Seconds to the next scan after one that cost `cost_s` of CPU: SCAN_BUDGET of one CPU, within bounds."""
    return min(MAX_SCAN_INTERVAL_S, max(MIN_SCAN_INTERVAL_S, cost_s / SCAN_BUDGET))


class NeighbourSampler:
    """One run's neighbours: the start scan now (before the command starts: or the previous run's end scan),
    `sample()` from the telemetry thread, `finish()` once the command has been reaped."""

    def __init__(self, watched: Iterable[int] = (), nvml: Any = None, handles: Optional[List[Any]] = None,
                 previous: Optional[CpuWindow] = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.window = CpuWindow(os.getpid(), watched, previous)
        self.gpus = GpuProcesses(nvml, list(handles)) if nvml is not None and handles else None
        if self.gpus is not None:
            self.gpus.read("before", self.window)
        self.runnable: List[int] = []
        self.next_scan = self.clock() + MIN_SCAN_INTERVAL_S

    def sample(self) -> None:
        """The runnable count now; every process (and the GPUs' processes) when a scan is due."""
        load = read_loadavg()
        if load is not None:
            self.runnable.append(load[1])
        now = self.clock()
        if now < self.next_scan:
            return
        spent = self.window.scan_cpu_s
        self.window.scan()
        cost = self.window.scan_cpu_s - spent
        if self.gpus is not None:
            began = time.thread_time()
            self.gpus.read("during", self.window)
            cost += time.thread_time() - began
        self.next_scan = now + scan_interval(cost)

    def finish(self, gpu_status: Optional[str] = None) -> Dict[str, Any]:
        """The last scan (the command has ended) and the record."""
        if self.gpus is not None:
            self.gpus.read("after", self.window)
        self.window.scan()
        record = self.window.result()
        if self.runnable:
            record["runnable"] = runnable_summary(self.runnable)
        if gpu_status is not None:
            record["gpu"] = gpu_status
        if self.gpus is not None:
            record["gpus"] = self.gpus.result(during_only_is_own=True)
        return record


class Neighbours:
    """A session's neighbour sampling (one per Telemetry): a NeighbourSampler per run, each starting from
    the previous run's end scan when the runs follow each other."""

    def __init__(self, watched: Iterable[int] = (), gpus: Any = None) -> None:
        self.watched = list(watched)
        self.gpus = gpus  # gpu_sampling.Gpus: its NVML module and handles, once opened
        self.last: Optional[CpuWindow] = None

    def begin(self) -> Tuple[Optional[NeighbourSampler], Optional[str]]:
        """(the run's sampler, None), or (None, why it could not start): the run goes on without it."""
        try:
            nvml = getattr(self.gpus, "nvml", None)
            sampler = NeighbourSampler(self.watched, nvml, getattr(self.gpus, "handles", None), self.last)
        except Exception as exc:
            return None, f"{type(exc).__name__}: {exc}"
        self.last = sampler.window
        return sampler, None
