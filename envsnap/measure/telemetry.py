"""What a run did: the resource use of the benchmark's process tree, of watched server processes, of the GPUs.

Each `envsnap run` run gets a "telemetry" record:

- the command's process tree, exactly where the kernel keeps exact counts: user and system CPU
  time and voluntary/involuntary context switches are the difference of
  getrusage(RUSAGE_CHILDREN) across the run -- the kernel adds a child's totals (all its
  threads, and its own reaped children) to ours when it is reaped, which Popen does. Exact as
  long as envsnap starts nothing else meanwhile (it does not) and the tree's processes are
  reaped by their parents (an orphan left running is not, and a note says when one was seen);
- sampled from /proc while it runs (a thread, every SAMPLE_INTERVAL_S after a denser start):
  peak resident memory of the tree (sum over its processes), peak threads and processes, and the
  CPU set its processes were allowed to run on (the union; sched_getaffinity). A run shorter than
  the first sample has no sampled figures; its CPU set is then envsnap's own, which the command
  inherited ("cpu_set_source": "inherited"). "max_rss_bytes" is the kernel's own peak of the
  largest reaped process (ru_maxrss), given when this run raised it;
- processes given with --pid/--sglang (the server, keyed as the processes section keys them):
  the same counters as deltas over the run, context switches summed over their threads (Linux
  counts /proc/PID/status switches for the main thread only), peaks sampled;
- the neighbours: load, runnable threads, steal time, the other processes using the most CPU and the
  other processes on the GPUs (measure/neighbours.py, its record under "neighbours");
- with NVML (nvidia-ml-py), per GPU: utilisation, SM clock, power and clock-event reasons,
  sampled. NVML's utilisation is the share of its own sample period (1/6 s to 1 s, by product)
  in which a kernel ran, so one reading per interval covers the run. Summaries: the mean over
  the run, over its active span (first to last busy reading) and the span's steady part (its
  edge readings left out), and the seconds the GPU was busy (each reading over the interval
  since the previous one). Without NVML the record says why in "gpu" and has no "gpus".

Cost (benchmarks/run_telemetry.py measures it on a run; target <= 1% of one CPU): the tree is
found from a cache of pid -> (ppid, session) with parent and session indexes kept up to date as
pids come and go (one listdir of /proc per sample, one stat read per new process), and each member
costs one read of /proc/PID/stat (ppid, session, threads and resident size together: psutil would
read stat, status and statm) and one sched_getaffinity. Measured on 2 loaded cores with 16
processes: 0.35-0.48 ms of CPU per sample, down from 2.0-2.4 ms with psutil handles. NVML is asked
4 things per GPU per sample, and a field a GPU answers Not Supported is not asked again.

Over 400 lines on purpose: the sampler thread, the process-tree index it keeps up incrementally and NVML's
readings share timing state, and their cost is measured as one (benchmarks/run_telemetry.py).
"""
from __future__ import annotations

import os
import resource
import statistics
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

from envsnap.capture import procfs

SAMPLE_INTERVAL_S = 0.5
# Denser at first, so a run of a second still gets a few samples of its tree.
FIRST_SAMPLES_S = (0.05, 0.15, 0.3)
MAX_GPUS = 64


# ---------------------------------------------------------------- /proc helpers

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _read_stat(pid: int) -> Optional[Tuple[int, int, int, int]]:
    """(ppid, session id, threads, resident bytes) from one read of /proc/PID/stat (proc(5):
    fields 4, 6, 20 and 24; the command name before them may hold spaces and parentheses).
    psutil reads the same numbers from stat, status and statm: three files per process."""
    try:
        _, fields = procfs.stat_fields(procfs.read_stat(pid))
        return int(fields[1]), int(fields[3]), int(fields[17]), int(fields[21]) * _PAGE_SIZE
    except (OSError, ValueError, IndexError):
        return None


def _stat_ids(pid: int) -> Optional[Tuple[int, int]]:
    """(ppid, session id) from /proc/PID/stat."""
    found = _read_stat(pid)
    return (found[0], found[1]) if found is not None else None


def _pids() -> Set[int]:
    try:
        return {int(name) for name in os.listdir("/proc") if name.isdigit()}
    except OSError:
        return set()


def thread_ctx_switches(pid: int) -> Optional[Dict[str, int]]:
    """Voluntary/involuntary context switches summed over a live process's threads."""
    total = {"voluntary": 0, "involuntary": 0}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/status", "rb") as handle:
                for line in handle:
                    if line.startswith(b"voluntary_ctxt_switches:"):
                        total["voluntary"] += int(line.split()[1])
                    elif line.startswith(b"nonvoluntary_ctxt_switches:"):
                        total["involuntary"] += int(line.split()[1])
        except (OSError, ValueError, IndexError):
            continue  # a thread that ended between listdir and open
    return total


class ProcessTree:
    """The processes a command started, kept up to date cheaply from a pid -> (ppid, session) cache.

    Members are the descendants of `root` (envsnap itself), and every process in the session of
    one of root's children: run_command starts the command in a session of its own, so a process
    the command left behind -- reparented when its parent exited -- is still found there. A
    member leaves when its pid does. The parent and session indexes are kept up to date as pids
    come and go (a sample does work for the new and the gone pids and the members, not for every
    process on the machine).
    """

    def __init__(self, root: int) -> None:
        self.root = root
        self.ids: Dict[int, Optional[Tuple[int, int]]] = {}
        self.members: Set[int] = set()
        self._children: Dict[int, Set[int]] = {}
        self._sessions: Dict[int, Set[int]] = {}

    def _index(self, pid: int, ids: Optional[Tuple[int, int]]) -> None:
        old = self.ids.get(pid)
        if old is not None:
            self._children.get(old[0], set()).discard(pid)
            self._sessions.get(old[1], set()).discard(pid)
        self.ids[pid] = ids
        if ids is not None:
            self._children.setdefault(ids[0], set()).add(pid)
            self._sessions.setdefault(ids[1], set()).add(pid)

    def update(self, pid: int, ids: Tuple[int, int]) -> None:
        """A member's (ppid, session) as just read (a reparented process moves in the index)."""
        if self.ids.get(pid) != ids:
            self._index(pid, ids)

    def refresh(self) -> Set[int]:
        live = _pids()
        for gone in [p for p in self.ids if p not in live]:
            self._index(gone, None)
            del self.ids[gone]
        self.members &= live
        for pid in live:
            if pid not in self.ids:
                self._index(pid, _stat_ids(pid))
        own = self.ids.get(self.root)
        stack = [self.root] + list(self.members)
        while stack:
            pid = stack.pop()
            found = list(self._children.get(pid, ()))
            ids = self.ids.get(pid)
            if pid != self.root and ids is not None and (own is None or ids[1] != own[1]):
                found += self._sessions.get(ids[1], ())
            for child in found:
                if child not in self.members and child != self.root:
                    self.members.add(child)
                    stack.append(child)
        return set(self.members)

    def reaches_root(self, pid: int) -> bool:
        ids = self.ids.get(pid)
        for _ in range(64):
            if ids is None:
                return False
            if ids[0] == self.root:
                return True
            ids = self.ids.get(ids[0])
        return False


# ---------------------------------------------------------------- NVML

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
        try:
            nvml: Any = self._module
            if nvml is None:
                import pynvml  # nvidia-ml-py: pure Python over ctypes
                nvml = pynvml
            nvml.nvmlInit()
        except Exception as exc:  # no library, no driver, no GPU: a fact, not an error
            self.status = f"unavailable: {_nvml_error(exc)}"
            return
        try:
            count = min(int(nvml.nvmlDeviceGetCount()), MAX_GPUS)
            self.handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except Exception as exc:
            self.status = f"unavailable: {_nvml_error(exc)}"
            _shutdown(nvml)
            return
        from envsnap.capture.collectors.nvidia import (
            reason_names,  # the one decoder of NVML's reason bits
        )

        self.nvml = nvml
        self.reasons = reason_names(nvml)
        self.status = "nvml" if self.handles else "unavailable: NVML reports no GPU"

    def close(self) -> None:
        if self.nvml is not None:
            _shutdown(self.nvml)
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


def _thread_cpu_s() -> Optional[float]:
    """CPU time of the calling thread (Linux RUSAGE_THREAD), or None where there is none."""
    who = getattr(resource, "RUSAGE_THREAD", None)
    if who is None:
        return None
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _nvml_error(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def _shutdown(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass  # nothing to do about a failed shutdown at the end of a session


# ---------------------------------------------------------------- one run

class _Watched:
    """A process given with --pid/--sglang: counters at the start of the run, peaks while it runs."""

    def __init__(self, key: str, pid: int) -> None:
        import psutil

        self.key, self.pid = key, pid
        self.error: Optional[str] = None
        self.peak_rss = 0
        self.peak_threads = 0
        self.cpus: Set[int] = set()
        try:
            self.proc = psutil.Process(pid)
            self.start_times = self.proc.cpu_times()
        except Exception as exc:
            self.proc, self.start_times = None, None
            self.error = f"not readable at the start of the run: {type(exc).__name__}"
        self.start_ctx = thread_ctx_switches(pid)

    def sample(self) -> None:
        if self.proc is None:
            return
        try:
            with self.proc.oneshot():
                self.peak_rss = max(self.peak_rss, self.proc.memory_info().rss)
                self.peak_threads = max(self.peak_threads, self.proc.num_threads())
            self.cpus.update(os.sched_getaffinity(self.pid))
        except Exception:
            pass  # it may be ending; the end of the run says so

    def finish(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"pid": self.pid}
        if self.proc is None:
            out["error"] = self.error
            return out
        self.sample()
        try:
            end = self.proc.cpu_times()
        except Exception as exc:
            out["error"] = f"gone by the end of the run: {type(exc).__name__}"
            return out
        out["cpu_user_s"] = round(end.user - self.start_times.user, 4)
        out["cpu_system_s"] = round(end.system - self.start_times.system, 4)
        end_ctx = thread_ctx_switches(self.pid)
        if end_ctx is not None and self.start_ctx is not None:
            # Threads that ended during the run took their counts with them: a lower bound then.
            out["ctx_voluntary"] = max(0, end_ctx["voluntary"] - self.start_ctx["voluntary"])
            out["ctx_involuntary"] = max(0, end_ctx["involuntary"] - self.start_ctx["involuntary"])
        if self.peak_rss:
            out["peak_rss_bytes"] = self.peak_rss
            out["peak_threads"] = self.peak_threads
        if self.cpus:
            out["cpu_set"] = sorted(self.cpus)
        return out


class RunSampler:
    """One run: counters at the start, a sampling thread while the command runs, the record at the end."""

    def __init__(self, tree: ProcessTree, gpus: Gpus, watch: Mapping[str, int], interval: float,
                 clock: Callable[[], float] = time.monotonic, neighbours: Any = None) -> None:
        self.tree = tree
        self.gpus = gpus
        self.interval = interval
        self.clock = clock
        self.watched = [_Watched(key, pid) for key, pid in sorted(watch.items())]
        self.samples = 0
        self.peak_rss = 0
        self.peak_threads = 0
        self.peak_processes = 0
        self.cpus: Set[int] = set()
        self.gpu_series: Dict[int, List[Dict[str, Any]]] = {}
        self.orphans: Set[int] = set()
        self.sampler_cpu_s: Optional[float] = None
        self.maps: Any = None  # a maps_sampling.MapsSampler: what the tree's processes mapped
        # The neighbours' start scan, before the command starts (measure/neighbours.py).
        self.neighbours: Any = None
        self.neighbours_error: Optional[str] = None
        if neighbours is not None:
            self.neighbours, self.neighbours_error = neighbours.begin()
        self._stop = threading.Event()
        self.rusage = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.started = clock()
        self._thread = threading.Thread(target=self._loop, name="envsnap-telemetry", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        try:
            self._sample_until_stopped()
        finally:
            self.sampler_cpu_s = _thread_cpu_s()

    def _sample_until_stopped(self) -> None:
        waits = list(FIRST_SAMPLES_S)
        elapsed = 0.0
        while True:
            target = waits.pop(0) if waits else elapsed + self.interval
            if self._stop.wait(max(0.0, target - (self.clock() - self.started))):
                return
            elapsed = self.clock() - self.started
            try:
                self._sample()
            except Exception:
                pass  # a sample lost is a shorter series, never a failed run

    def _sample(self) -> None:
        members = self.tree.refresh()
        rss = threads = 0
        counted = 0
        for pid in members:
            found = _read_stat(pid)
            if found is None:
                continue  # ended between the listing and the read
            self.tree.update(pid, (found[0], found[1]))
            threads += found[2]
            rss += found[3]
            counted += 1
            if not self.tree.reaches_root(pid):
                self.orphans.add(pid)
            try:
                self.cpus.update(os.sched_getaffinity(pid))
            except OSError:
                pass
        if counted:
            self.samples += 1
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_threads = max(self.peak_threads, threads)
            self.peak_processes = max(self.peak_processes, counted)
        for watched in self.watched:
            watched.sample()
        self.gpus.sample(self.gpu_series, self.clock() - self.started)
        if self.maps is not None:
            self.maps.sample(members, self.clock() - self.started)
        if self.neighbours is not None:
            self.neighbours.sample()

    def stop(self) -> None:
        """End the sampling thread (idempotent; also on Ctrl-C, so no thread outlives its run)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def finish(self, wall_s: float) -> Dict[str, Any]:
        """Stop sampling; the run's record (call after the command has been reaped)."""
        self.stop()
        if self.maps is not None:
            self.maps.end_run()
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        before = self.rusage
        record: Dict[str, Any] = {
            "wall_s": round(wall_s, 4),
            "cpu_user_s": round(after.ru_utime - before.ru_utime, 4),
            "cpu_system_s": round(after.ru_stime - before.ru_stime, 4),
            "ctx_voluntary": int(after.ru_nvcsw - before.ru_nvcsw),
            "ctx_involuntary": int(after.ru_nivcsw - before.ru_nivcsw),
            "samples": self.samples,
            "interval_s": self.interval,
        }
        if self.sampler_cpu_s is not None:
            record["sampler_cpu_s"] = round(self.sampler_cpu_s, 5)  # what sampling this run cost
        if after.ru_maxrss > before.ru_maxrss:
            record["max_rss_bytes"] = int(after.ru_maxrss) * 1024  # Linux reports KiB
        if self.samples:
            record.update(peak_rss_bytes=self.peak_rss, peak_threads=self.peak_threads,
                          peak_processes=self.peak_processes)
        if self.cpus:
            record["cpu_set"], record["cpu_set_source"] = sorted(self.cpus), "sampled"
        else:
            record["cpu_set"], record["cpu_set_source"] = sorted(os.sched_getaffinity(0)), "inherited"
        notes = []
        if self.orphans:
            notes.append(f"{len(self.orphans)} process(es) of the command outlived their parent: their CPU "
                         "time is in the totals only if something reaped them")
        if self.watched:
            record["watched"] = {w.key: w.finish() for w in self.watched}
        record["gpu"] = self.gpus.status
        gpus = {str(i): summarize_gpu(series, self.gpus.reasons) for i, series in sorted(self.gpu_series.items())}
        gpus = {i: g for i, g in gpus.items() if g}
        if gpus:
            record["gpus"] = gpus
        if self.neighbours_error:
            notes.append(f"neighbours not recorded: {self.neighbours_error}")
        if self.neighbours is not None:
            try:
                record["neighbours"] = self.neighbours.finish(self.gpus.status)
            except Exception as exc:  # the neighbours are context: a failure is said, never a failed run
                notes.append(f"neighbours not recorded: {type(exc).__name__}: {exc}")
        if notes:
            record["notes"] = notes
        return record


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
        from envsnap.capture.collectors.nvidia import decode_reasons

        share: Dict[str, int] = {}
        for mask in masks:
            for name in decode_reasons(mask, reasons):
                share[name] = share.get(name, 0) + 1
        out["clock_event_reasons"] = {name: round(n / len(masks), 3) for name, n in sorted(share.items())}
    return out


class Telemetry:
    """The sampler of one `envsnap run` session: NVML opened once, the process cache kept between runs.

    watch: {process key: pid} of processes given with --pid/--sglang (the server).
    """

    def __init__(self, watch: Optional[Mapping[str, int]] = None, interval: float = SAMPLE_INTERVAL_S,
                 nvml: Any = None) -> None:
        self.watch = dict(watch or {})
        self.interval = interval
        self.tree = ProcessTree(os.getpid())
        self.gpus = Gpus(nvml)
        from envsnap.measure.neighbours import Neighbours

        self.neighbours = Neighbours(self.watch.values(), self.gpus)
        self._opened = False
        from envsnap.measure.maps_sampling import MapsSampler

        self.maps = MapsSampler()

    def begin(self) -> RunSampler:
        if not self._opened:
            self._opened = True
            self.gpus.open()
            self.tree.refresh()  # fill the pid cache before the run, not during it
        self.maps.begin_run()
        sampler = RunSampler(self.tree, self.gpus, self.watch, self.interval, neighbours=self.neighbours)
        sampler.maps = self.maps
        return sampler

    def close(self) -> None:
        self.gpus.close()
