"""The GPUs during a run (NVML): utilisation, SM clock, power and clock-event reasons, sampled and summarised.

NVML's utilisation is the share of its own sample period (1/6 s to 1 s, by product) in which a kernel
ran, so one reading per telemetry interval covers the run. NVML is asked 4 things per GPU per sample,
and a field a GPU answers Not Supported is not asked again. Summaries: the mean over the run, over
its active span (first to last busy reading) and the span's steady part (its edge readings left
out), and the seconds the GPU was busy (each reading over the interval since the previous one).
"""
from __future__ import annotations

import statistics
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from envsnap.capture.collectors.gpu_processes import close_nvml, open_nvml


class Gpus:
    """NVML opened once per session; samples utilisation, SM clock, power and clock-event reasons."""

    def __init__(self, module: Any = None) -> None:
        self.status = "not opened"
        self.nvml: Any = None
        self.handles: List[Any] = []
        self.reasons: Dict[int, str] = {}
        self._module = module
        self._calls: Optional[List[Tuple[str, Callable[[Any], Any]]]] = None
        self._unsupported: Dict[int, Set[str]] = {}  # per GPU: fields answered Not Supported
        self._reason_getter: Optional[Callable[[Any], Any]] = None

    def open(self) -> None:
        nvml, handles, self.status = open_nvml(self._module)
        if nvml is None:
            return
        from envsnap.capture.collectors.nvml_read import (
            reason_names,  # the one decoder of NVML's reason bits
        )

        self.nvml, self.handles = nvml, handles
        self.reasons = reason_names(nvml)

    def close(self) -> None:
        if self.nvml is not None:
            close_nvml(self.nvml)
            self.nvml = None
            self.handles = []

    def sample(self, into: Dict[int, List[Dict[str, Any]]], at: Optional[float] = None) -> None:
        """One reading per GPU, appended to into[index]; a field NVML does not answer is None, and
        one that answered Not Supported is not asked again this session. `at`: seconds since the
        run started (summarize_gpu weighs each reading by the time since the previous one)."""
        nvml = self.nvml
        if nvml is None:
            return
        calls = self._calls
        if calls is None:
            sm = getattr(nvml, "NVML_CLOCK_SM", 1)
            calls = self._calls = [("util", lambda h: float(nvml.nvmlDeviceGetUtilizationRates(h).gpu)),
                                   ("sm_mhz", lambda h: float(nvml.nvmlDeviceGetClockInfo(h, sm))),
                                   ("power_w", lambda h: nvml.nvmlDeviceGetPowerUsage(h) / 1000.0),
                                   ("reasons", self._reason_mask)]
        for index, handle in enumerate(self.handles):
            reading: Dict[str, Any] = {"t": at}
            unsupported = self._unsupported.setdefault(index, set())
            for name, call in calls:
                if name in unsupported:
                    reading[name] = None
                    continue
                try:
                    reading[name] = call(handle)
                except Exception as exc:
                    reading[name] = None  # Not Supported on this GPU, or a transient error
                    if getattr(exc, "value", None) == getattr(nvml, "NVML_ERROR_NOT_SUPPORTED", object()):
                        unsupported.add(name)
            into.setdefault(index, []).append(reading)

    def _reason_mask(self, handle: Any) -> int:
        if self._reason_getter is None:
            nvml = self.nvml
            self._reason_getter = (getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
                                   or nvml.nvmlDeviceGetCurrentClocksThrottleReasons)
        return int(self._reason_getter(handle))


# NVML's utilisation covers its sample period, up to 1 s on some products
# (nvmlDeviceGetUtilizationRates): a reading taken that soon after the run began can report work
# done before it (the previous run's tail, back to back). On the H200 the runs of tests/gpu began
# with busy readings at 0.05-0.3 s, then ~2 s of idle readings while torch imported.
NVML_PERIOD_MAX_S = 1.0
# The main phase of a run's GPU work: readings at least this share of its busiest reading.
MAIN_PHASE_SHARE = 0.5


def _leftover(readings: List[Dict[str, Any]], busy: List[int]) -> Set[int]:
    """Leading busy readings, all within NVML_PERIOD_MAX_S of the run's start and followed by an
    idle reading before the run's own GPU work: they measured work done before the run."""
    if not busy or not all(isinstance(r.get("t"), (int, float)) for r in readings):
        return set()
    group = []
    for i in range(busy[0], len(readings)):
        if (readings[i].get("util") or 0) <= 0:
            break
        group.append(i)
    else:
        return set()  # busy to the end: the run's own work
    if readings[group[-1]]["t"] > NVML_PERIOD_MAX_S or busy[-1] == group[-1]:
        return set()  # beyond the period, or no later work of the run's own to tell them apart from
    return set(group)


def summarize_gpu(readings: List[Dict[str, Any]], reasons: Dict[int, str]) -> Dict[str, Any]:
    """Per GPU: utilisation, SM clock and power over the run, and the share of readings each
    clock-event reason was on.

    "active" figures cover the span from the first to the last reading with any utilisation: a
    benchmark process spends its first seconds importing and initialising with the GPU idle (and
    clocked down), which would otherwise read as idle time of the work itself. Busy readings in the
    first NVML sample period that an idle one follows are work from before the run (_leftover):
    left out of the span and of the busy seconds.
    """
    out: Dict[str, Any] = {}

    def values(name: str, span: Sequence[Dict[str, Any]]) -> List[float]:
        return [r[name] for r in span if r.get(name) is not None]

    util = values("util", readings)
    if util:
        out["samples"] = len(util)
        out["util_pct_mean"] = round(statistics.fmean(util), 2)
        out["util_pct_median"] = round(statistics.median(util), 2)
        out["util_pct_min"] = min(util)
        busy = [i for i, r in enumerate(readings) if (r.get("util") or 0) > 0]
        leftover = _leftover(readings, busy)
        busy = [i for i in busy if i not in leftover]
        if busy:
            active = readings[busy[0]:busy[-1] + 1]
            out["active_samples"] = len(active)
            out["util_pct_active_mean"] = round(statistics.fmean(values("util", active)), 2)
            # The steady figure is the work's own: its main phase, from the first to the last reading
            # at least MAIN_PHASE_SHARE of the busiest, leaves out a start-up that keeps the GPU
            # a little busy (loading every CUDA module with CUDA_MODULE_LOADING=EAGER, allocator
            # warm-up read a few percent for seconds before the H200's GEMM loop read 100%). Then its
            # first and last readings are those in whose NVML sample period the work began and ended:
            # they say where in the period that fell, not how busy the work kept the GPU (on the H200
            # a saturating GEMM loop read 100% inside, 62-81% with its edges). With 3 or more
            # readings the steady figure leaves them out too.
            peak = max(values("util", active))
            main = [i for i, r in enumerate(active) if (r.get("util") or 0) >= MAIN_PHASE_SHARE * peak]
            phase = active[main[0]:main[-1] + 1]
            steady = values("util", phase[1:-1] if len(phase) >= 3 else phase)
            out["util_pct_steady_mean"] = round(statistics.fmean(steady), 2) if steady else out["util_pct_active_mean"]
            clocks = values("sm_mhz", active)
            if clocks:
                out["sm_clock_mhz_active_median"] = round(statistics.median(clocks), 1)
        times: List[Any] = [r.get("t") for r in readings]
        if all(isinstance(t, (int, float)) for t in times):
            # Seconds the GPU was busy: each reading's utilisation over the time since the previous
            # reading (NVML's own period is 1/6 s to 1 s: an unbiased sample of that interval).
            previous, busy_s = 0.0, 0.0
            for i, (reading, t) in enumerate(zip(readings, times)):
                if reading.get("util") is not None and i not in leftover:
                    busy_s += reading["util"] / 100.0 * max(0.0, t - previous)
                previous = t
            out["busy_s"] = round(busy_s, 4)
    clocks = values("sm_mhz", readings)
    if clocks:
        out["sm_clock_mhz_median"] = round(statistics.median(clocks), 1)
        out["sm_clock_mhz_min"] = min(clocks)
        out["sm_clock_mhz_max"] = max(clocks)
    power = values("power_w", readings)
    if power:
        out["power_w_median"] = round(statistics.median(power), 2)
        out["power_w_max"] = round(max(power), 2)
    masks = values("reasons", readings)
    if masks:
        from envsnap.capture.collectors.nvml_read import decode_reasons

        share: Dict[str, int] = {}
        for mask in masks:
            for name in decode_reasons(mask, reasons):
                share[name] = share.get(name, 0) + 1
        out["clock_event_reasons"] = {name: round(n / len(masks), 3) for name, n in sorted(share.items())}
    return out
