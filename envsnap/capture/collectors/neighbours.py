"""Neighbours: who else used the machine while envsnap looked -- the load, the runnable threads, the CPU time
a hypervisor gave to other guests (steal), the other processes using the most CPU, and with NVML the other
processes on the GPUs.

The same readings serve a capture (this collector: one window, while the other collectors run) and every run of
`envsnap run` (measure/neighbours.py: the run is the window, scanned a few times while it runs): the CPU
readings are cpu_window.py's, the GPUs' processes gpu_processes.py's (each says what it reads and where from).

Not neighbours: envsnap itself, the processes it started (its descendants, and every process in the
session of one of its children: run_command starts each command in a session of its own, so a process the
command left behind is still found) and the processes given with --pid/--sglang and their descendants.

Everything here moves from moment to moment: the whole section is volatile for diff, and
analysis compares the neighbours of the two sides itself (a neighbour on one side only, or using much
more on one side, is a cause of its own).
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Dict, List

from envsnap.capture.base import CaptureContext, ok
from envsnap.capture.collectors.cpu_window import CpuWindow, read_loadavg, runnable_summary
from envsnap.capture.collectors.gpu_processes import GpuProcesses, close_nvml, open_nvml
from envsnap.model.rules import CPU_HOST, SectionRules, volatile
from envsnap.model.schema import NEIGHBOURS_SHAPE
from envsnap.model.types import Section

# The section's shape is run telemetry's "neighbours" too: one definition, in the model.
SHAPE = NEIGHBOURS_SHAPE
RULES = SectionRules(category="host", component=CPU_HOST, compares="the other processes on the machine", rules=(
    # Who else runs, and how busy it keeps the CPUs and GPUs, moves from moment to moment: analysis compares
    # the two sides' neighbours itself (by command, with thresholds), never leaf by leaf.
    volatile("neighbours*", "who else is running moves from moment to moment: compared as neighbours, not leaves"),
))

# A capture's window: as long as the other collectors run beside it, so that it costs the capture nothing
# (a warm capture takes ~0.25 s), but at least CAPTURE_MIN_WINDOW_S -- long enough for a busy process to show
# (USER_HZ is 100: 0.12 s resolves 0.08 CPUs, a busy CPU is 12 ticks, compare/neighbours.py's MIN_CPUS 3) --
# and at most CAPTURE_WINDOW_S. The capture command opens it before its imports (open_window), so the floor
# runs beside them; the runs' own neighbour readings (measure/neighbours.py) cover whole runs.
CAPTURE_MIN_WINDOW_S = 0.12
CAPTURE_WINDOW_S = 0.5
# The runnable count is read this often during the window.
CAPTURE_RUNNABLE_EVERY_S = 0.03


def _other_collectors_running() -> bool:
    """Whether another collector of a capture is still at work (capture/runner.py names the thread that runs
    each one envsnap-run-<section>): for a caller that runs this collector without the runner's progress."""
    return any(t.name.startswith("envsnap-run-") and t.name != "envsnap-run-neighbours" for t in threading.enumerate())


def _others_done_within(ctx: CaptureContext, seconds: float) -> bool:
    """Wait up to `seconds`, and less once every other collector of the capture is done; whether they are. The
    runner's progress wakes the window as the last of them ends (a fixed sleep kept the capture waiting up to
    CAPTURE_RUNNABLE_EVERY_S more)."""
    if ctx.progress is not None:
        return ctx.progress.wait_for_others("neighbours", seconds)
    time.sleep(seconds)
    return not _other_collectors_running()


_opened_at_start: List[CpuWindow] = []


def open_window_at_start() -> None:
    """Open a capture's window as the process starts, before its options are parsed (the command line's first
    word is `capture`: cli.main): the floor then runs beside the command-line layer's imports too (~40 ms),
    which otherwise kept the capture waiting for it after the other collectors had finished."""
    _opened_at_start[:] = [CpuWindow(os.getpid())]


def open_window(ctx: CaptureContext) -> None:
    """Open the capture's window now (ctx.early_window), or take the one opened at the process's start: the
    capture command calls it first thing, so that CAPTURE_MIN_WINDOW_S runs beside its own imports rather than
    after them. The processes given with --pid are not neighbours, from the window's next scan on."""
    if _opened_at_start:
        window = _opened_at_start.pop()
        window.excluded.update(ctx.pids)
        window.own_pids.update(ctx.pids)
        ctx.early_window = window
    else:
        ctx.early_window = CpuWindow(os.getpid(), ctx.pids)


def collect(ctx: CaptureContext, nvml: Any = None) -> Section:
    """One window, while the other collectors run (CAPTURE_MIN_WINDOW_S to CAPTURE_WINDOW_S; shorter when the
    capture's deadline is nearer). `nvml`: a pynvml module to use (tests pass a stand-in); else pynvml itself
    when it loads."""
    window, ctx.early_window = ctx.early_window or CpuWindow(os.getpid(), ctx.pids), None
    own_nvml = nvml is None  # a module passed in is the caller's to close
    nvml, handles, status = open_nvml(nvml)
    gpus = GpuProcesses(nvml, handles) if nvml is not None and handles else None
    runnable = []
    try:
        most = min(CAPTURE_WINDOW_S, max(0.05, ctx.remaining() / 4)) if ctx.deadline else CAPTURE_WINDOW_S
        while True:
            spent = time.monotonic() - window.started
            if spent < CAPTURE_MIN_WINDOW_S:  # the floor: readings only
                time.sleep(min(CAPTURE_RUNNABLE_EVERY_S, CAPTURE_MIN_WINDOW_S - spent))
                done = False
            else:
                done = _others_done_within(ctx, min(CAPTURE_RUNNABLE_EVERY_S, max(0.0, most - spent)))
            load = read_loadavg()
            if load is not None:
                runnable.append(load[1])
            if done or time.monotonic() - window.started >= most:
                break
        if gpus is not None:
            gpus.read("capture", window)
        window.scan()
        data = window.result()
        if runnable:
            data["runnable"] = runnable_summary(runnable)
        data["gpu"] = status
        if gpus is not None:
            data["gpus"] = gpus.result(during_only_is_own=False)
    finally:
        if own_nvml and nvml is not None:
            close_nvml(nvml)
    return ok(data)


def describe_process(entry: Dict[str, Any]) -> str:
    """'pid 123 python3 busy.py (alice): 0.97 CPUs'."""
    user = f" ({entry['user']})" if entry.get("user") else ""
    cpus = entry.get("cpus")
    used = f": {cpus:.2f} CPUs" if isinstance(cpus, (int, float)) else ""
    return f"pid {entry.get('pid')} {entry.get('command', '?')}{user}{used}"


def summarize(data: Dict[str, Any]) -> List[str]:
    lines = [f"over {data.get('window_s', '?')} s: the machine kept {data.get('host_busy_cpus', '?')} of "
             f"{data.get('cpus_online', '?')} CPUs busy, other processes {data.get('others_cpus', '?')}; "
             f"steal {data.get('steal_pct', '?')}%, runnable threads {(data.get('runnable') or {}).get('median', '?')}"]
    lines += [describe_process(entry) for entry in data.get("top") or []]
    for index, gpu in sorted((data.get("gpus") or {}).items()):
        for proc in gpu.get("processes") or []:
            if proc.get("own") is not True:
                lines.append(f"GPU {index}: pid {proc.get('pid')} {proc.get('command') or ''}".rstrip()
                             + (f" ({proc['why']})" if proc.get("why") else ""))
    if data.get("unreadable"):
        lines.append("unreadable: " + ", ".join(f"{n} {why}" for why, n in sorted(data["unreadable"].items())))
    return lines
