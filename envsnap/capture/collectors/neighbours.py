"""Neighbours: who else used the machine while envsnap looked -- the load, the runnable threads, the CPU time
a hypervisor gave to other guests (steal), the other processes using the most CPU, and with NVML the other
processes on the GPUs.

The same readings serve a capture (this collector: one window, while the other collectors run) and every run of
`envsnap run` (measure/neighbours.py: the run is the window, scanned a few times while it runs):

- /proc/stat's first line (proc(5)): CPU time of every CPU by kind since boot, in USER_HZ ticks; over a
  window, busy = everything but idle, iowait and steal, and steal is the time a hypervisor ran something
  else while this guest had work ("steal_pct": its share of all CPU time). When envsnap may use fewer CPUs
  than the machine has (sched_getaffinity: taskset, a container's cpuset), the same sum over those CPUs'
  own lines says how busy everyone kept them ("cpu_set_size", "cpu_set_busy_cpus"), and each listed
  process whether it last ran on one of them ("on_cpu_set", proc(5) stat field 39, "processor");
- runnable threads: the 4th field of /proc/loadavg ("2/98": runnable / total), read at each sample. It is
  the kernel's nr_running(), the same count as /proc/stat's procs_running (fs/proc/loadavg.c and
  fs/proc/stat.c both print nr_running()), from a 40-byte file instead of one that grows with the CPUs.
  It counts the reader itself (running as it reads): one is taken off. The load averages lag a run of
  seconds (exponential averages over minutes), so they are context only ("load_1m" at both ends);
- every process's CPU time: one read of /proc/PID/stat each (utime + stime, and cutime + cstime, the
  time of children it reaped, fields 14-17; ppid and session for telling the run's own processes apart;
  starttime, field 22, so a reused pid is a new process). Over the window a process used its own ticks'
  difference plus what its reaped children added -- less what those children had already been counted
  for when seen alive. A process that ended during the window counts up to its last reading. Kernel
  threads are not read (KTHREADD): their time is the machine's, in /proc/stat's columns;
- with NVML (nvidia-ml-py 13.615, pynvml.py): nvmlDeviceGetComputeRunningProcesses (a list of
  c_nvmlProcessInfo_v3_t: pid, usedGpuMemory in bytes or None where the driver does not say,
  gpuInstanceId, computeInstanceId) and nvmlDeviceGetProcessUtilization(handle, lastSeenTimeStamp)
  (c_nvmlProcessUtilizationSample_t: pid, timeStamp in microseconds, smUtil, memUtil, encUtil, decUtil,
  the samples newer than the timestamp; NVML_ERROR_NOT_FOUND when there are none). The driver reports
  pids of the host's pid namespace: in a container they may not exist here, and such a process is
  recorded as not visible, never guessed.

Not neighbours: envsnap itself, the processes it started (its descendants, and every process in the
session of one of its children: run_command starts each command in a session of its own, so a process the
command left behind is still found) and the processes given with --pid/--sglang and their descendants.
Command lines go through redaction (envsnap/redact.py). A process that exits mid-read, or that another
user owns and /proc hides (hidepid), is counted under "unreadable" with the reason, never an error.

Everything here moves from moment to moment: the whole section is volatile for diff, and
analysis compares the neighbours of the two sides itself (a neighbour on one side only, or using much
more on one side, is a cause of its own).
"""
from __future__ import annotations

import os
import re
import threading
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from envsnap.capture import procfs
from envsnap.capture.base import CaptureContext, ok
from envsnap.model.rules import CPU_HOST, SectionRules, volatile
from envsnap.model.schema import NEIGHBOURS_SHAPE

# The section's shape is run telemetry's "neighbours" too: one definition, in the model.
SHAPE = NEIGHBOURS_SHAPE
RULES = SectionRules(category="host", component=CPU_HOST, compares="the other processes on the machine", rules=(
    # Who else runs, and how busy it keeps the CPUs and GPUs, moves from moment to moment: analysis compares
    # the two sides' neighbours itself (by command, with thresholds), never leaf by leaf.
    volatile("neighbours*", "who else is running moves from moment to moment: compared as neighbours, not leaves"),
))

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A capture's window: as long as the other collectors run beside it, so that it costs the capture nothing
# (a warm capture takes ~0.3 s), but at least CAPTURE_MIN_WINDOW_S -- long enough for a busy process to show
# (USER_HZ is 100: 0.15 s resolves 0.07 CPUs, a quarter of a CPU is 4 ticks) -- and at most CAPTURE_WINDOW_S.
CAPTURE_MIN_WINDOW_S = 0.15
CAPTURE_WINDOW_S = 0.5
# The runnable count is read this often during the window.
CAPTURE_RUNNABLE_EVERY_S = 0.03
# A run's end scan starts the next run's window when that one begins within this time (back-to-back runs).
REUSE_MAX_S = 2.0
# The most processes a record lists (the busiest; "others_cpus" counts all of them): a few beyond the handful
# a person reads, so that a neighbour is still listed on a machine other jobs also keep busy.
TOP_N = 8
# A command line is cut here in the record: enough to tell `python serve.py --model X` from another.
COMMAND_CHARS = 200
_UNSET = object()


# ---------------------------------------------------------------- host counters

class CpuTimes(NamedTuple):
    fields: List[int]  # the first line's ticks: user nice system idle iowait irq softirq steal
    cpus: int  # the number of cpuN lines (CPUs online)
    on_set: Optional[List[int]] = None  # the same ticks summed over the lines of the CPU set asked for


def read_cpu_times(cpu_set: Optional[Set[int]] = None) -> Optional[CpuTimes]:
    """/proc/stat's ticks for the whole machine, and with `cpu_set` for those CPUs (None when one of them has
    no line: a /proc/stat that numbers the CPUs otherwise, as lxcfs's does)."""
    try:
        with open("/proc/stat", "rb") as handle:
            text = handle.read()
    except OSError:
        return None
    lines = text.split(b"\n")
    try:
        fields = [int(x) for x in lines[0].split()[1:9]]
    except (ValueError, IndexError):
        return None
    fields += [0] * (8 - len(fields))  # kernels before 2.6.11 had no steal column
    cpu_lines = [line for line in lines[1:] if line.startswith(b"cpu")]
    on_set = None
    if cpu_set and len(cpu_set) < len(cpu_lines):  # the work may use only some of the CPUs
        summed, found = [0] * 8, 0
        for line in cpu_lines:
            parts = line.split()
            try:
                if int(parts[0][3:]) in cpu_set:
                    found += 1
                    for i, value in enumerate(parts[1:9]):
                        summed[i] += int(value)
            except (ValueError, IndexError):
                return CpuTimes(fields, len(cpu_lines))
        on_set = summed if found == len(cpu_set) else None
    return CpuTimes(fields, len(cpu_lines), on_set)


def read_loadavg() -> Optional[Tuple[float, int]]:
    """(1-minute load, runnable threads besides the reader) from /proc/loadavg."""
    try:
        with open("/proc/loadavg", "rb") as handle:
            parts = handle.read().split()
        running = int(parts[3].split(b"/")[0])
        return float(parts[0]), max(0, running - 1)
    except (OSError, ValueError, IndexError):
        return None


def _busy_ticks(start: List[int], end: List[int]) -> Optional[Tuple[int, int, int]]:
    """(busy, steal, all) ticks between two readings of the same /proc/stat columns (None: no time passed)."""
    delta = [b - a for a, b in zip(start, end)]
    total = sum(delta)
    if total <= 0:
        return None
    return total - delta[3] - delta[4] - delta[7], delta[7], total  # idle, iowait and steal are not busy


def cpu_share(start: Optional[CpuTimes], end: Optional[CpuTimes], wall_s: float,
              cpu_set: Optional[Set[int]] = None) -> Dict[str, Any]:
    """CPUs kept busy by the whole machine and the steal share between two /proc/stat readings; with the CPU
    set the work may use, when it is smaller than the machine: its size and how busy everyone kept it."""
    if start is None or end is None or wall_s <= 0:
        return {}
    found = _busy_ticks(start.fields, end.fields)
    if found is None:
        return {}
    busy, steal, total = found
    out = {"host_busy_cpus": round(busy / CLK_TCK / wall_s, 3), "steal_pct": round(steal / total * 100.0, 2)}
    if cpu_set and len(cpu_set) < end.cpus and start.on_set is not None and end.on_set is not None:
        on_set = _busy_ticks(start.on_set, end.on_set)
        if on_set is not None:
            out["cpu_set_size"] = len(cpu_set)
            out["cpu_set_busy_cpus"] = round(on_set[0] / CLK_TCK / wall_s, 3)
    return out


# ---------------------------------------------------------------- the process table

class ProcStat(NamedTuple):
    ppid: int
    session: int
    comm: str
    own_ticks: int  # utime + stime
    child_ticks: int  # cutime + cstime: children it reaped
    start: int  # starttime, ticks after boot
    state: str = "R"  # "Z": it has ended and its parent has not reaped it yet
    processor: int = -1  # the CPU it last ran on (field 39; -1: not given)


def read_proc_stat(pid: int) -> Any:
    """A ProcStat from one read of /proc/PID/stat, or the reason it could not be read (a str)."""
    try:
        text = procfs.read_stat(pid)
    except (FileNotFoundError, ProcessLookupError):
        return "exited while read"
    except PermissionError:
        return "permission denied (hidepid)"
    except OSError as exc:
        return f"unreadable: {exc.strerror or type(exc).__name__}"
    try:
        name, fields = procfs.stat_fields(text)
        return ProcStat(int(fields[1]), int(fields[3]), name.decode("utf-8", "replace"),
                        int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14]), int(fields[19]),
                        fields[0].decode("ascii", "replace"), int(fields[36]) if len(fields) > 36 else -1)
    except (ValueError, IndexError):
        return "unparsable stat"


# Kernel threads (kthreadd, pid 2, and its children) are no one's job: their time shows in /proc/stat's
# system, irq and softirq columns (host_busy_cpus), and there are hundreds of them on a machine with many
# CPUs (per-CPU workers), most of every scan. A pid once seen to be one is not read again while it exists
# (pids are not reused before pid_max wraps, unless the thread ends and a scan misses the gap).
KTHREADD = 2
_KERNEL_THREADS: Set[int] = set()


def scan_processes() -> Tuple[Dict[int, ProcStat], Dict[str, int]]:
    """Every process's ProcStat (kernel threads left out), and how many could not be read, by reason."""
    table: Dict[int, ProcStat] = {}
    errors: Dict[str, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return table, {"/proc not readable": 1}
    pids = {int(name) for name in names if name.isdigit()}
    _KERNEL_THREADS.intersection_update(pids)
    for pid in pids - _KERNEL_THREADS:
        found = read_proc_stat(pid)
        if isinstance(found, ProcStat):
            if found.ppid == KTHREADD or pid == KTHREADD:
                _KERNEL_THREADS.add(pid)
            else:
                table[pid] = found
        else:
            errors[found] = errors.get(found, 0) + 1
    return table, errors


def own_pids(table: Dict[int, ProcStat], root: int, excluded: Iterable[int] = ()) -> Set[int]:
    """envsnap (root), its descendants, the sessions of its children (what a command left behind), and the
    `excluded` processes (the measured server) with their descendants."""
    children: Dict[int, List[int]] = {}
    for pid, stat in table.items():
        children.setdefault(stat.ppid, []).append(pid)
    own = {root} | set(excluded)
    root_stat = table.get(root)
    sessions = {table[c].session for c in children.get(root, ()) if root_stat is None
                or table[c].session != root_stat.session}
    if sessions:
        own.update(pid for pid, stat in table.items() if stat.session in sessions)
    stack = list(own)
    while stack:
        for child in children.get(stack.pop(), ()):
            if child not in own:
                own.add(child)
                stack.append(child)
    return own


# Control characters (a newline, an escape sequence) in a process's name or command line: anyone can set
# them, and printed as they are they would forge lines of a terminal's output.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """TEXT on one line, its control characters escaped ("\\n", "\\x1b")."""
    return _CONTROL.sub(lambda m: repr(m.group(0))[1:-1], text)


def read_command(pid: int, comm: str) -> Tuple[str, Optional[str]]:
    """(the redacted command line, cut to COMMAND_CHARS; or "[comm]" with the reason there is none), printable."""
    from envsnap.redact import redact_argv

    comm = printable(comm)
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(16384)
    except (FileNotFoundError, ProcessLookupError):
        return f"[{comm}]", "ended before its command line was read"
    except OSError as exc:
        return f"[{comm}]", f"command line not readable: {exc.strerror or type(exc).__name__}"
    argv = [a.decode("utf-8", "replace") for a in raw.rstrip(b"\0").split(b"\0")] if raw else []
    if not argv:
        return f"[{comm}]", None  # a kernel thread (or a zombie): its name is all there is
    text = printable(" ".join(redact_argv(argv)))
    return (text if len(text) <= COMMAND_CHARS else text[:COMMAND_CHARS - 3] + "..."), None


_USERS: Dict[int, str] = {}


def process_user(pid: int) -> Optional[str]:
    """The name of the user owning /proc/PID (its uid when the name is unknown), None when gone."""
    try:
        uid = os.stat(f"/proc/{pid}").st_uid
    except OSError:
        return None
    if uid not in _USERS:
        try:
            import pwd

            _USERS[uid] = pwd.getpwuid(uid).pw_name
        except (ImportError, KeyError):
            _USERS[uid] = str(uid)
    return _USERS[uid]


def _thread_cpu_s() -> float:
    return time.thread_time() if hasattr(time, "thread_time") else time.process_time()


def _cpu_set() -> Optional[Set[int]]:
    try:
        return set(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return None


def _uptime_ticks() -> Optional[int]:
    try:
        with open("/proc/uptime", "rb") as handle:
            return int(float(handle.read().split()[0]) * CLK_TCK)
    except (OSError, ValueError, IndexError):
        return None


class CpuWindow:
    """The other processes' CPU time over a window: a scan at the start, any number during, one at the end.

    Processes are keyed by (pid, starttime). A process first seen after the start scan that started
    after the window began used all its ticks inside it; one the start scan could not read counts from
    its first reading. `previous`: a window whose last scan (taken at most REUSE_MAX_S ago) is this
    one's start, so that back-to-back runs read every process once between them, not twice."""

    def __init__(self, root: int, excluded: Iterable[int] = (), previous: Optional["CpuWindow"] = None) -> None:
        self.root = root
        self.excluded = set(excluded)
        self.first: Dict[Tuple[int, int], Tuple[int, int]] = {}
        self.last: Dict[Tuple[int, int], ProcStat] = {}
        self.seen_in: Dict[Tuple[int, int], int] = {}  # the scan (its number) a process was last read in
        self.own: Set[Tuple[int, int]] = set()
        self.own_pids: Set[int] = {root} | self.excluded
        self.live: Set[Tuple[int, int]] = set()
        self.commands: Dict[Tuple[int, int], Tuple[str, Optional[str], Optional[str]]] = {}
        self.unreadable: Dict[str, int] = {}
        self.scans = 0
        self.scan_cpu_s = 0.0
        # What the last scan read besides the processes: its time, the boot clock, /proc/stat, the load.
        self.scanned_at = 0.0
        self.scanned_ticks: Optional[int] = None
        self.cpu_times: Optional[CpuTimes] = None
        # The CPUs envsnap may run on, which the command inherits: on a machine (or container) that gives the
        # work a few of its CPUs, those are the ones a neighbour must share to slow it down.
        self.cpu_set = _cpu_set()
        self.load: Optional[float] = None
        if previous is not None and previous.scans and time.monotonic() - previous.scanned_at <= REUSE_MAX_S:
            self.live = set(previous.live)
            self.last = {key: previous.last[key] for key in self.live}
            self.seen_in = {key: 0 for key in self.live}
            self.first = {key: (stat.own_ticks, stat.child_ticks) for key, stat in self.last.items()}
            self.commands = {key: found for key, found in previous.commands.items() if key in self.live}
            self.scanned_at, self.scanned_ticks = previous.scanned_at, previous.scanned_ticks
            self.cpu_times, self.load = previous.cpu_times, previous.load
        else:
            self.scan(first=True)
        self.started, self.start_ticks = self.scanned_at, self.scanned_ticks
        self.cpu_start, self.load_start = self.cpu_times, self.load

    def scan(self, first: bool = False) -> Dict[int, ProcStat]:
        """Read every process once (and /proc/stat, the load and the clock with it); returns the table."""
        began = _thread_cpu_s()
        self.scanned_at = time.monotonic()
        self.scanned_ticks = _uptime_ticks()
        self.cpu_times = read_cpu_times(self.cpu_set)
        load = read_loadavg()
        self.load = load[0] if load else None
        table, errors = scan_processes()
        own = own_pids(table, self.root, self.excluded)
        self.own_pids |= own
        live = set()
        for pid, stat in table.items():
            key = (pid, stat.start)
            live.add(key)
            if key not in self.first:
                started_inside = (not first and self.start_ticks is not None and stat.start > self.start_ticks)
                self.first[key] = (0, 0) if started_inside else (stat.own_ticks, stat.child_ticks)
            self.last[key] = stat
            self.seen_in[key] = self.scans
            if pid in own:
                self.own.add(key)
        self.live = live
        for reason, count in errors.items():  # the most any one scan met: a count of processes, not of reads
            self.unreadable[reason] = max(self.unreadable.get(reason, 0), count)
        if not first:
            self._name_busiest()
        self.scans += 1
        self.scan_cpu_s += _thread_cpu_s() - began
        return table

    def is_own(self, pid: int) -> Optional[bool]:
        """Whether a live process is envsnap's or one it started (by its ancestors and session, read now);
        None when this pid namespace has no such process."""
        if pid in self.own_pids:
            return True
        stat = read_proc_stat(pid)
        if not isinstance(stat, ProcStat):
            return None
        ancestor = stat.ppid
        for _ in range(64):
            if ancestor in self.own_pids:
                return True
            parent = read_proc_stat(ancestor) if ancestor > 1 else None
            if not isinstance(parent, ProcStat):
                break
            ancestor = parent.ppid
        leader = read_proc_stat(stat.session) if stat.session > 1 else None
        return isinstance(leader, ProcStat) and leader.ppid == self.root  # a session a command of ours began

    def _ticks(self) -> Dict[Tuple[int, int], int]:
        """Ticks each process used inside the window: its own, plus its reaped children's beyond those
        already counted for them. A child gone by the last scan was reaped by its parent, whose cutime then
        holds the child's whole lifetime -- and, when the child outlived its own last reading, that of every
        child of its own it reaped afterwards (the same rule, one level down: a `timeout` that ran a test
        suite hands the suite's whole lifetime to its shell). What a child seen alive used is folded into
        its parent once the child is gone: `make` stands for the compilers it ran."""
        gone = self.last.keys() - self.live
        children_of: Dict[int, List[Tuple[int, int]]] = {}
        for key in gone:
            children_of.setdefault(self.last[key].ppid, []).append(key)
        lifetime: Dict[Tuple[int, int], int] = {}

        def handed_up(key: Tuple[int, int], depth: int = 0) -> int:
            """What a gone process handed its parent that was already counted (or was before the window)."""
            if key not in lifetime:
                stat = self.last[key]
                lifetime[key] = stat.own_ticks + stat.child_ticks + (sum(
                    handed_up(child, depth + 1) for child in children_of.get(key[0], ())
                    if child[1] >= key[1] and self.seen_in[child] >= self.seen_in[key]) if depth < 64 else 0)
            return lifetime[key]

        out = {}
        for key, stat in self.last.items():
            own0, child0 = self.first[key]
            # The children it had reaped by its own last reading, each of which was counted when seen.
            reaped = sum(handed_up(child) for child in children_of.get(key[0], ())
                         if child[1] >= key[1] and self.seen_in[child] < self.seen_in[key])
            out[key] = max(0, stat.own_ticks - own0) + max(0, stat.child_ticks - child0 - reaped)
        by_pid: Dict[int, List[Tuple[int, int]]] = {}
        for key in self.last:
            by_pid.setdefault(key[0], []).append(key)
        for key in sorted(gone, key=lambda k: -k[1]):  # the youngest first: a grandchild reaches its grandparent
            parents = [k for k in by_pid.get(self.last[key].ppid, ()) if k[1] <= key[1]]
            if parents:
                parent = max(parents, key=lambda k: k[1])
                if parent not in self.own and key not in self.own:
                    out[parent] += out[key]
                    out[key] = 0
        return out

    def _others(self) -> List[Tuple[int, Tuple[int, int]]]:
        ticks = self._ticks()
        return sorted(((t, key) for key, t in ticks.items() if key not in self.own and t > 0),
                      key=lambda item: (-item[0], item[1]))

    def _ended(self, key: Tuple[int, int]) -> bool:
        """Gone by the last scan, or a zombie there (ended, not reaped yet)."""
        return key not in self.live or self.last[key].state == "Z"

    def _name_busiest(self) -> None:
        """Read the command lines of the busiest processes so far while they are alive (few reads: each once)."""
        for _ticks, key in self._others()[:TOP_N]:
            if key not in self.commands and not self._ended(key):
                command, note = read_command(key[0], self.last[key].comm)
                self.commands[key] = (command, note, process_user(key[0]))

    def result(self, listed: int = TOP_N) -> Dict[str, Any]:
        """The record of the window, from its first scan to its last (call after the last scan), listing the
        `listed` busiest other processes."""
        wall = max(self.scanned_at - self.started, 1e-6)
        out: Dict[str, Any] = {"window_s": round(wall, 3)}
        if self.cpu_times is not None:
            out["cpus_online"] = self.cpu_times.cpus
        out.update(cpu_share(self.cpu_start, self.cpu_times, wall, self.cpu_set))
        loads = [x for x in (self.load_start, self.load) if x is not None]
        if loads:
            out["load_1m"] = loads
        others = self._others()
        if self.cpu_times is not None:
            # No process can have used more than every CPU for the whole window: a parent that reaped a child
            # none of the scans saw, which had run since before the window, would otherwise say so.
            most = int(wall * CLK_TCK * self.cpu_times.cpus) + 1
            others = [(min(t, most), key) for t, key in others]
        total = sum(t for t, _ in others)
        out["others_cpus"] = round(total / CLK_TCK / wall, 3)
        out["others_busy"] = len(others)
        top = []
        for ticks, key in others[:listed]:
            if key not in self.commands:
                self.commands[key] = (*read_command(key[0], self.last[key].comm), process_user(key[0])) \
                    if not self._ended(key) else (f"[{self.last[key].comm}]", "ended before its command line was read",
                                                  None)
            command, note, user = self.commands[key]
            entry: Dict[str, Any] = {"pid": key[0], "command": command, "cpu_s": round(ticks / CLK_TCK, 3),
                                     "cpus": round(ticks / CLK_TCK / wall, 3), "ended": self._ended(key)}
            if user is not None:
                entry["user"] = user
            if note:
                entry["note"] = note
            if "cpu_set_size" in out and self.cpu_set and self.last[key].processor >= 0:
                entry["on_cpu_set"] = self.last[key].processor in self.cpu_set  # where it ran last
            top.append(entry)
        out["top"] = top
        out["processes"] = len(self.last)
        out["ended"] = sum(1 for key in self.last if key not in self.own and self._ended(key))
        out["unreadable"] = dict(sorted(self.unreadable.items()))
        out["scans"] = self.scans
        out["scan_cpu_s"] = round(self.scan_cpu_s, 5)
        return out


# ---------------------------------------------------------------- NVML: other processes on the GPUs

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
                self.errors[index] = _error_text(exc)
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
            if index not in self.no_util:
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


def _error_text(exc: BaseException) -> str:
    text = str(exc) or type(exc).__name__
    return text.splitlines()[0][:200]


def open_nvml() -> Tuple[Any, List[Any], str]:
    """(pynvml, handles, status) for a capture; (None, [], "unavailable: why") without a GPU."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception as exc:  # no library, no driver, no GPU: a fact, not an error
        return None, [], f"unavailable: {_error_text(exc)}"
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(min(int(pynvml.nvmlDeviceGetCount()), 64))]
    except Exception as exc:
        close_nvml(pynvml)
        return None, [], f"unavailable: {_error_text(exc)}"
    return pynvml, handles, "nvml" if handles else "unavailable: NVML reports no GPU"


def close_nvml(nvml: Any) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:
        pass  # nothing to do about a failed shutdown


# ---------------------------------------------------------------- the collector

def runnable_summary(counts: List[int]) -> Dict[str, Any]:
    import statistics

    return {"median": statistics.median(counts), "max": max(counts), "samples": len(counts),
            "source": "/proc/loadavg runnable count (nr_running) less the reader"}


def _other_collectors_running() -> bool:
    """Whether another collector of a capture is still at work (capture/runner.py names the thread that runs
    each one envsnap-run-<section>)."""
    return any(t.name.startswith("envsnap-run-") and t.name != "envsnap-run-neighbours" for t in threading.enumerate())


def collect(ctx: CaptureContext, nvml: Any = None) -> Dict[str, Any]:
    """One window, while the other collectors run (CAPTURE_MIN_WINDOW_S to CAPTURE_WINDOW_S; shorter when the
    capture's deadline is nearer). `nvml`: a pynvml module to use (tests pass a stand-in); else pynvml itself
    when it loads."""
    window = CpuWindow(os.getpid(), ctx.pids)
    handles: List[Any] = []
    own_nvml = False
    if nvml is None:
        nvml, handles, status = open_nvml()
        own_nvml = nvml is not None
    else:
        try:
            nvml.nvmlInit()
            handles = [nvml.nvmlDeviceGetHandleByIndex(i) for i in range(int(nvml.nvmlDeviceGetCount()))]
            status = "nvml"
        except Exception as exc:
            nvml, status = None, f"unavailable: {_error_text(exc)}"
    gpus = GpuProcesses(nvml, handles) if nvml is not None and handles else None
    runnable = []
    try:
        most = min(CAPTURE_WINDOW_S, max(0.05, ctx.remaining() / 4)) if ctx.deadline else CAPTURE_WINDOW_S
        while True:
            time.sleep(CAPTURE_RUNNABLE_EVERY_S)
            load = read_loadavg()
            if load is not None:
                runnable.append(load[1])
            spent = time.monotonic() - window.started
            if spent >= most or spent >= CAPTURE_MIN_WINDOW_S and not _other_collectors_running():
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
        if own_nvml:
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
