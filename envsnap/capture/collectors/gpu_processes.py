"""The compute processes on each GPU during a window (NVML), told apart as the work's own or a neighbour.

With NVML (nvidia-ml-py 13.615, pynvml.py): nvmlDeviceGetComputeRunningProcesses (a list of
c_nvmlProcessInfo_v3_t: pid, usedGpuMemory in bytes or None where the driver does not say,
gpuInstanceId, computeInstanceId) and nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)
(c_nvmlProcessUtilizationSample_t: pid, timeStamp in microseconds, smUtil, memUtil, encUtil, decUtil,
the samples newer than the timestamp; NVML_ERROR_NOT_FOUND when there are none). The driver reports
pids of the host's pid namespace: in a container they may not exist here, and such a process is
recorded as not visible, never guessed.
"""
from __future__ import annotations

import time
from typing import Any, Dict, List, Set, Tuple

from envsnap.capture.collectors.cpu_window import CpuWindow, ProcStat, process_user, read_command, read_proc_stat

_UNSET = object()
MAX_GPUS = 64  # the most GPUs whose handles are asked for


def _nvml_code(nvml: Any, name: str) -> Any:
    return getattr(nvml, name, _UNSET)


PHASES = ("capture", "before", "during", "after")


class GpuProcesses:
    """Compute processes on each GPU, read at phases ("before", "during", "after" a run; "capture"), with
    their per-process SM utilisation where the driver keeps it. A process is told apart (the run's own or
    not, its command) when first seen, while it is alive."""

    def __init__(self, nvml: Any, handles: List[Any]) -> None:
        self.nvml = nvml
        self.handles = handles
        self.seen: Dict[Tuple[int, int], Dict[str, Any]] = {}
        self.errors: Dict[int, str] = {}
        self.no_util: Set[int] = set()
        # NVML's process samples carry CPU timestamps in microseconds: only those from now on.
        self.last_ts: Dict[int, int] = {i: int(time.time() * 1e6) for i in range(len(handles))}

    def _entry(self, index: int, pid: int, window: CpuWindow) -> Dict[str, Any]:
        entry = self.seen.get((index, pid))
        if entry is None:
            entry = self.seen[(index, pid)] = {"seen": set(), "memory": None, "sm": []}
            own = window.is_own(pid)
            if own is False and _maps_show_no_gpu(pid):
                own = None  # a process of this namespace with the same number: not the one NVML means
            entry["own"] = own
            if own is False:
                entry["command"], entry["note"] = read_command(pid, _comm(pid))
                entry["user"] = process_user(pid)
        return entry

    def read(self, phase: str, window: CpuWindow) -> None:
        nvml = self.nvml
        for index, handle in enumerate(self.handles):
            try:
                procs = nvml.nvmlDeviceGetComputeRunningProcesses(handle)
            except Exception as exc:  # NotSupported, a lost GPU: a fact of this GPU, recorded
                self.errors[index] = error_text(exc)
                procs = []
            for proc in procs or []:
                pid = getattr(proc, "pid", None)
                if not isinstance(pid, int):
                    continue
                entry = self._entry(index, pid, window)
                entry["seen"].add(phase)
                used = getattr(proc, "usedGpuMemory", None)
                if isinstance(used, int) and used >= 0:
                    entry["memory"] = max(entry["memory"] or 0, used)
            # Utilisation samples are asked for those newer than the last read's (or the window's opening): at a
            # run's "before", read as its window opens, there are none, and asking costs ~2.4 ms of CPU a GPU
            # (H100 VM, 2026-12-07; the process list 7 us).
            if index not in self.no_util and phase != "before":
                self._utilisation(index, handle, window)

    def _utilisation(self, index: int, handle: Any, window: CpuWindow) -> None:
        nvml = self.nvml
        getter = getattr(nvml, "nvmlDeviceGetProcessUtilization", None)
        if getter is None:
            self.no_util.add(index)
            return
        try:
            samples = getter(handle, self.last_ts[index])
        except Exception as exc:
            code = getattr(exc, "value", None)
            if code == _nvml_code(nvml, "NVML_ERROR_NOT_FOUND"):
                return  # no sample newer than the last one
            if code == _nvml_code(nvml, "NVML_ERROR_NOT_SUPPORTED"):
                self.no_util.add(index)
            return
        for sample in samples or []:
            pid, stamp = getattr(sample, "pid", None), getattr(sample, "timeStamp", 0)
            sm = getattr(sample, "smUtil", None)
            if not isinstance(pid, int) or not isinstance(sm, int) or stamp <= self.last_ts[index]:
                continue
            self._entry(index, pid, window)["sm"].append(sm)
        stamps = [getattr(s, "timeStamp", 0) for s in samples or []]
        if stamps:
            self.last_ts[index] = max([self.last_ts[index]] + [s for s in stamps if isinstance(s, int)])

    def result(self, during_only_is_own: bool) -> Dict[str, Any]:
        """{gpu index: {"processes": [...]}}: each process with its command where this pid namespace shows it,
        and whether it is the run's own ("own": true), not ("own": false) or cannot be told (null, "why")."""
        out: Dict[str, Any] = {}
        for index in range(len(self.handles)):
            listed = [_gpu_process(pid, entry, during_only_is_own)
                      for (gpu, pid), entry in sorted(self.seen.items()) if gpu == index]
            gpu_out: Dict[str, Any] = {"processes": listed}
            if index in self.errors:
                gpu_out["error"] = self.errors[index]
            out[str(index)] = gpu_out
        return out


_HIDDEN = "its pid is not visible here (NVML reports the host's pids: another pid namespace, a container)"


def _gpu_process(pid: int, entry: Dict[str, Any], during_only_is_own: bool) -> Dict[str, Any]:
    seen = sorted(entry["seen"], key=PHASES.index)
    item: Dict[str, Any] = {"pid": pid, "seen": seen, "own": entry["own"]}
    if entry["memory"] is not None:
        item["used_memory_bytes"] = entry["memory"]
    if entry["sm"]:
        item["sm_util_pct_mean"] = round(sum(entry["sm"]) / len(entry["sm"]), 1)
        item["sm_util_pct_max"] = max(entry["sm"])
        item["util_samples"] = len(entry["sm"])
    if entry["own"] is False:
        item["command"] = entry["command"]
        if entry.get("user"):
            item["user"] = entry["user"]
        if entry.get("note"):
            item["why"] = entry["note"]
    elif entry["own"] is None:
        if set(seen) & {"before", "after"}:
            item["own"] = False
            item["why"] = f"on the GPU before or after the run, so not the run's; {_HIDDEN}"
        elif during_only_is_own and seen:
            item["why"] = f"seen only while the run ran, probably the run's own; {_HIDDEN}"
        else:
            item["why"] = _HIDDEN
    return item


def _comm(pid: int) -> str:
    stat = read_proc_stat(pid)
    return stat.comm if isinstance(stat, ProcStat) else "?"


def _maps_show_no_gpu(pid: int) -> bool:
    """True when /proc/PID/maps is readable and maps neither a /dev/nvidia* device nor libcuda: then this
    pid here is not the process NVML listed. Unreadable (another user's process): not disproved."""
    try:
        with open(f"/proc/{pid}/maps", "rb") as handle:
            text = handle.read()
    except OSError:
        return False
    return b"/dev/nvidia" not in text and b"libcuda" not in text


def error_text(exc: BaseException) -> str:
    """An NVML exception's message on one line, at most 200 characters."""
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def open_nvml(module: Any = None) -> Tuple[Any, List[Any], str]:
    """(NVML, the handles of its GPUs, status) for a window: status "nvml", or "unavailable: why" (with None
    and no handles, unless NVML opened and reports no GPU). `module`: a pynvml to use (tests pass a
    stand-in); else pynvml itself (nvidia-ml-py: pure Python over ctypes)."""
    try:
        nvml = module
        if nvml is None:
            import pynvml

            nvml = pynvml
        nvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no GPU: a fact, not an error
        return None, [], f"unavailable: {error_text(exc)}"
    try:
        handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(min(int(nvml.nvmlDeviceGetCount()), MAX_GPUS))]
    except Exception as exc:
        if module is None:  # a module passed in is its caller's to close
            close_nvml(nvml)
        return None, [], f"unavailable: {error_text(exc)}"
    return nvml, handles, "nvml" if handles else "unavailable: NVML reports no GPU"


def close_nvml(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass  # nothing to do about a failed shutdown
