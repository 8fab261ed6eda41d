"""What one telemetry sample read of each process, shared by the samplers that need the same /proc file.

Run telemetry's samplers (maps_sampling.py, environ_sampling.py) each read a new process's
/proc/PID/stat and /proc/PID/environ, and both need its maps: the maps sampler for what it mapped, the
live environment for where libc's `environ` is. The kernel writes /proc/PID/maps out afresh at every read (~0.1 ms for
a Python process), the largest single part of a new process's cost, so one read serves both within
a sample (benchmarks/run_telemetry.py). A SampleReads lives for one sample only: nothing it holds is
older than that sample.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

MAX_CMDLINE_BYTES = 1 << 20


def read_cmdline_bytes(pid: object) -> Optional[bytes]:
    """/proc/PID/cmdline ("self" or a pid), at most MAX_CMDLINE_BYTES; None when it cannot be read."""
    from envsnap.capture import procfs

    try:
        return procfs.read_file(f"/proc/{pid}/cmdline", MAX_CMDLINE_BYTES)
    except OSError:
        return None


class SampleReads:
    """One sample's reads, by pid: /proc/PID/stat's fields after the command name, /proc/PID/cmdline's and
    /proc/PID/environ's bytes, and the raw maps text."""

    __slots__ = ("_stat", "maps_raw", "_environ", "_cmdline")

    def __init__(self) -> None:
        self._stat: Dict[int, Optional[List[bytes]]] = {}
        self.maps_raw: Dict[int, bytes] = {}  # put by the maps sampler, taken by the environment's
        self._environ: Dict[int, Tuple[Optional[bytes], str, str]] = {}
        self._cmdline: Dict[int, Optional[bytes]] = {}

    def cmdline_bytes(self, pid: int) -> Optional[bytes]:
        """/proc/PID/cmdline's bytes (at most MAX_CMDLINE_BYTES; None: gone or unreadable): both samplers tell a
        process that exec'd from its command line."""
        if pid not in self._cmdline:
            self._cmdline[pid] = read_cmdline_bytes(pid)
        return self._cmdline[pid]

    def environ_bytes(self, pid: int) -> Tuple[Optional[bytes], str, str]:
        """/proc/PID/environ's bytes (proctree.read_environ_bytes): the maps sampler wants its names, the
        environment's sampler the whole block as at exec."""
        if pid not in self._environ:
            from envsnap.capture.collectors import proctree

            self._environ[pid] = proctree.read_environ_bytes(pid)
        return self._environ[pid]

    def stat_fields(self, pid: int) -> Optional[List[bytes]]:
        """proc(5)'s fields from the state on (fields[0] is field 3); None when the process is gone."""
        if pid not in self._stat:
            from envsnap.capture import procfs

            try:
                self._stat[pid] = procfs.stat_fields(procfs.read_stat(pid))[1]
            except (OSError, ValueError):
                self._stat[pid] = None
        return self._stat[pid]
