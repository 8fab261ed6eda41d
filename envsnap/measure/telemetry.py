"""What a run did: the resource use of the benchmark's process tree, of watched server processes, of the GPUs.

Each `envsnap run` run gets a "telemetry" record:

- the command's process tree, exactly where the kernel keeps exact counts: user and system CPU
  time and voluntary/involuntary context switches are the difference of
  getrusage(RUSAGE_CHILDREN) across the run -- the kernel adds a child's totals (all its
  threads, and its own reaped children) to ours when it is reaped, which Popen does. Exact as
  long as envsnap starts nothing else meanwhile (it does not) and the tree's processes are
  reaped by their parents (an orphan left running is not, and a note says when one was seen);
- sampled from /proc while it runs (a thread, every SAMPLE_INTERVAL_S after a denser start;
  process_tree.py): peak resident memory of the tree (sum over its processes), peak threads and
  processes, and the CPU set its processes were allowed to run on (the union; sched_getaffinity).
  A run shorter than the first sample has no sampled figures; its CPU set is then envsnap's own,
  which the command inherited ("cpu_set_source": "inherited"). "max_rss_bytes" is the kernel's own
  peak of the largest reaped process (ru_maxrss), given when this run raised it;
- processes given with --pid/--sglang (the server, keyed as the processes section keys them):
  the same counters as deltas over the run, context switches summed over their threads (Linux
  counts /proc/PID/status switches for the main thread only), peaks sampled;
- for the tree and each watched process, what the scheduler did (sched_sampling.py): run-queue wait
  and time on CPU summed over threads (/proc/PID/task/TID/schedstat; "run_delay_s", "on_cpu_s",
  "timeslices"), the peak count of threads by name ("thread_names"), major page faults
  ("major_faults": the tree's from getrusage, exact; a watched process's from /proc/PID/stat);
- the neighbours (measure/neighbours.py, its record under "neighbours");
- the command's processes' environments, at exec and from memory as they run ("environs",
  measure/environ_sampling.py), keyed as the processes section keys processes;
- with NVML, per GPU: utilisation, SM clock, power and clock-event reasons, sampled and summarised
  (gpu_sampling.py). Without NVML the record says why in "gpu" and has no "gpus".

Cost: target <= 1% of one CPU (benchmarks/run_telemetry.py measures it on a run, each part of a sample apart): met
from runs of about half a second with three new processes, and of about a second with sixteen on an H100 VM (0.79%
for 1.3-s runs, 2026-12-07). Each new process costs a fixed first read (~0.56 ms of CPU there: its maps, descriptors,
environment from memory, stat), and each process a few reads a sample, so shorter runs and larger trees pay more
(2.4% for 0.27-s runs of sixteen); the samplers parse what they read once the run is over, and pay their one-time
costs before the first run.
"""
from __future__ import annotations

import os
import resource
import threading
import time
from typing import Any, Callable, Dict, List, Mapping, Optional, Set

from envsnap.measure.gpu_sampling import Gpus, summarize_gpu
from envsnap.measure.process_tree import ProcessTree, process_stat_of, thread_ctx_switches
from envsnap.measure.sample_reads import SampleReads
from envsnap.measure.sched_sampling import ThreadSampler, major_faults

SAMPLE_INTERVAL_S = 0.5
# Denser at first, so a run of a second still gets a few samples of its tree. The same times in every run of
# every session: what two sessions saw of their processes was seen at the same times into their runs (a sampler
# paced by its own cost read GOOD and BAD at different moments of their processes' start-up, and a library one
# side had loaded by then read as a difference nobody made).
FIRST_SAMPLES_S = (0.05, 0.15, 0.3)


def _thread_cpu_s() -> Optional[float]:
    """CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID: the scheduler's own nanoseconds, where
    getrusage(RUSAGE_THREAD) may be tick-sampled and read 0 for a sample of a millisecond), or None where
    there is none."""
    try:
        return time.thread_time()
    except (AttributeError, OSError):
        return None


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
        self.threads = ThreadSampler()
        self.threads.baseline([pid])
        self.start_faults = major_faults(pid)

    def sample(self) -> None:
        if self.proc is None:
            return
        self.threads.sample([self.pid])
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
        out.update(self.threads.summary())  # run-queue wait, time on CPU, threads by name
        end_faults = major_faults(self.pid)
        if end_faults is not None and self.start_faults is not None:
            out["major_faults"] = max(0, end_faults - self.start_faults)
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
        self.threads = ThreadSampler()  # the command's threads: run-queue wait, time on CPU, names
        self.sampler_cpu_s: Optional[float] = None
        self.maps: Any = None  # a maps_sampling.MapsSampler: what the tree's processes mapped
        self.environs: Any = None  # an environ_sampling.EnvironSampler: their environments, from memory
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
        reads = SampleReads()  # one read of a process's stat (and maps) serves every part of this sample
        members = self.tree.refresh(reads)
        rss = threads = 0
        counted = 0
        thread_counts: Dict[int, int] = {}
        for pid in members:
            found = process_stat_of(reads.stat_fields(pid))
            if found is None:
                continue  # ended between the listing and the read
            self.tree.update(pid, (found[0], found[1]))
            threads += found[2]
            thread_counts[pid] = found[2]
            rss += found[3]
            counted += 1
            if not self.tree.reaches_root(pid):
                self.orphans.add(pid)
            try:
                self.cpus.update(os.sched_getaffinity(pid))
            except OSError:
                pass
        self.threads.sample(members, thread_counts)
        if counted:
            self.samples += 1
            self.peak_rss = max(self.peak_rss, rss)
            self.peak_threads = max(self.peak_threads, threads)
            self.peak_processes = max(self.peak_processes, counted)
        for watched in self.watched:
            watched.sample()
        self.gpus.sample(self.gpu_series, self.clock() - self.started)
        if self.maps is not None:
            self.maps.sample(members, self.clock() - self.started, reads)
        if self.environs is not None:
            self.environs.sample(members, self.clock() - self.started, reads)
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
        environs = self.environs.end_run() if self.environs is not None else {}
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
        record["major_faults"] = int(after.ru_majflt - before.ru_majflt)
        sched = self.threads.summary()
        if sched:  # sampled: threads that lived between two samples are missed (sched_sampling.py)
            record.update(sched)
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
        if environs:  # the command's processes' environments, from memory (environ_sampling.py)
            record["environs"] = environs
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
        from envsnap.measure.environ_sampling import EnvironSampler

        self.environs = EnvironSampler()

    def begin(self) -> RunSampler:
        if not self._opened:
            self._opened = True
            self.gpus.open()
            self.tree.refresh()  # fill the pid cache before the run, not during it
            self.maps.warm()  # and the samplers' one-time costs (imports, libc's symbols): before, not during
            self.environs.warm()
        self.maps.begin_run()
        sampler = RunSampler(self.tree, self.gpus, self.watch, self.interval, neighbours=self.neighbours)
        sampler.maps = self.maps
        self.environs.begin_run()
        sampler.environs = self.environs
        return sampler

    def close(self) -> None:
        self.gpus.close()
