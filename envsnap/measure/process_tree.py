"""The processes a run's command started, and what /proc says of each: one stat read per process.

The tree is found from a cache of pid -> (ppid, session) with parent and session indexes kept up to
date as pids come and go (one listdir of /proc per sample, one stat read per new process), and each
member costs one read of /proc/PID/stat (ppid, session, threads and resident size together: psutil
would read stat, status and statm). Measured on 2 loaded cores with 16 processes: 0.35-0.48 ms of CPU
per telemetry sample, down from 2.0-2.4 ms with psutil handles (benchmarks/run_telemetry.py).
"""
from __future__ import annotations

import os
from typing import Dict, Optional, Sequence, Set, Tuple

from envsnap.capture import procfs
from envsnap.measure.sample_reads import SampleReads

_PAGE_SIZE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def read_process_stat(pid: int) -> Optional[Tuple[int, int, int, int]]:
    """(ppid, session id, threads, resident bytes) from one read of /proc/PID/stat (proc(5):
    fields 4, 6, 20 and 24; the command name before them may hold spaces and parentheses).
    psutil reads the same numbers from stat, status and statm: three files per process."""
    try:
        return process_stat_of(procfs.stat_fields(procfs.read_stat(pid))[1])
    except (OSError, ValueError):
        return None


def process_stat_of(fields: Optional[Sequence[bytes]]) -> Optional[Tuple[int, int, int, int]]:
    """read_process_stat's numbers from stat's fields after the command name (procfs.stat_fields)."""
    if fields is None:
        return None
    try:
        return int(fields[1]), int(fields[3]), int(fields[17]), int(fields[21]) * _PAGE_SIZE
    except (ValueError, IndexError):
        return None


def _stat_ids(pid: int, reads: Optional[SampleReads] = None) -> Optional[Tuple[int, int]]:
    """(ppid, session id) from /proc/PID/stat (`reads`: the sample's reads, which keep the fields for its other
    parts: a new member's stat is then read once a sample)."""
    found = read_process_stat(pid) if reads is None else process_stat_of(reads.stat_fields(pid))
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

    def refresh(self, reads: Optional[SampleReads] = None) -> Set[int]:
        live = _pids()
        for gone in [p for p in self.ids if p not in live]:
            self._index(gone, None)
            del self.ids[gone]
        self.members &= live
        for pid in live:
            if pid not in self.ids:
                self._index(pid, _stat_ids(pid, reads))
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
