"""The other processes' CPU time over a window, and the machine's: the neighbours' CPU readings.

One window serves a capture (collectors/neighbours.py) and each run of `envsnap run`
(measure/neighbours.py). What it reads:

- /proc/stat's first line (proc(5)): CPU time of every CPU by kind since boot, in USER_HZ ticks; over a
  window, busy = everything but idle, iowait and steal, and steal is the time a hypervisor ran something
  else while this guest had work ("steal_pct": its share of all CPU time). When envsnap may use fewer CPUs
  than the machine has (sched_getaffinity: taskset, a container's cpuset), the same sum over those CPUs'
  own lines says how busy everyone kept them ("cpu_set_size", "cpu_set_busy_cpus"), and each listed
  process whether it last ran on one of them ("on_cpu_set", proc(5) stat field 39, "processor");
- runnable threads: the 4th field of /proc/loadavg ("2/98": runnable / total). It is the kernel's
  nr_running(), the same count as /proc/stat's procs_running (fs/proc/loadavg.c and fs/proc/stat.c both
  print nr_running()), from a 40-byte file. It counts the reader itself: one is taken off. The load
  averages lag a run of seconds, so they are context only ("load_1m" at both ends);
- every process's CPU time: one read of /proc/PID/stat each (utime + stime, and cutime + cstime, the
  time of children it reaped; ppid and session for telling the run's own processes apart; starttime,
  so a reused pid is a new process). Over the window a process used its own ticks' difference plus what
  its reaped children added -- less what those children had already been counted for when seen alive.
  Kernel threads are not read (KTHREADD): their time is the machine's, in /proc/stat's columns.

A process that exits mid-read, or that /proc hides (hidepid), is counted under "unreadable" with the
reason, never an error. Command lines go through redaction (envsnap/redact.py).
"""
from __future__ import annotations

import os
import re
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from envsnap.capture import procfs

CLK_TCK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
# A run's end scan starts the next run's window when that one begins within this time (back-to-back runs).
REUSE_MAX_S = 2.0
# The most processes a record lists (the busiest; "others_cpus" counts all of them): a few beyond the handful
# a person reads, so that a neighbour is still listed on a machine other jobs also keep busy.
TOP_N = 8
# A command line is cut here in the record: enough to tell `python serve.py --model X` from another.
COMMAND_CHARS = 200


# ---------------------------------------------------------------- host counters

class CpuTimes(NamedTuple):
    fields: List[int]  # the first line's ticks: user nice system idle iowait irq softirq steal
    cpus: int  # the number of cpuN lines (CPUs online)
    on_set: Optional[List[int]] = None  # the same ticks summed over the lines of the CPU set asked for


def read_cpu_times(cpu_set: Optional[Set[int]] = None) -> Optional[CpuTimes]:
    """/proc/stat's ticks for the whole machine, and with `cpu_set` for those CPUs (None when one of them has
    no line: a /proc/stat that numbers the CPUs otherwise, as lxcfs's does)."""
    text = procfs.read_bytes("/proc/stat")
    if text is None:
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
    text = procfs.read_bytes("/proc/loadavg")
    if text is None:
        return None
    try:
        parts = text.split()
        running = int(parts[3].split(b"/")[0])
        return float(parts[0]), max(0, running - 1)
    except (ValueError, IndexError):
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
    text = procfs.read_bytes("/proc/uptime")
    if text is None:
        return None
    try:
        return int(float(text.split()[0]) * CLK_TCK)
    except (ValueError, IndexError):
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


def runnable_summary(counts: List[int]) -> Dict[str, Any]:
    import statistics

    return {"median": statistics.median(counts), "max": max(counts), "samples": len(counts),
            "source": "/proc/loadavg runnable count (nr_running) less the reader"}
