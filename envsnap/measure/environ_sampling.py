"""The environment of the run command's own processes, read from their memory while each run goes on.

A benchmark's processes are gone when the runs end, so their environment is read while they live:
telemetry's sampler hands each sample's members of the run's process tree to `EnvironSampler.sample`.
Each process is read when first seen (/proc/PID/environ, as at exec, and its C `environ` from memory:
capture/collectors/live_environ.py), then again from memory as it ages (when the time since its first
read has doubled, at least MIN_REREAD_S apart): a client sets its variables in its first seconds, and
the latest read is kept, so what it ran with most of the run is what is recorded. The /proc block is
classified once the run is over, outside its time; a forked child whose environment sits where its parent's
last read found it keeps that read's strings. A child seen between
its fork and its exec still runs envsnap's own image: it is read once it has exec'd. A process is known
by (pid, start time in clock ticks), so a reused pid is another process.

At the end of each run its processes get keys as the processes section gives them (roles.py: an SGLang
title, a torchrun RANK, else the program's name numbered in start order): telemetry's "environs"
{key: {"pid", "environ_status", "environ", "live_environ_status", "live_environ", notes}}, redacted.
Cost: one memory read is ~0.4 ms of CPU (benchmarks/live_environ_cost.py); a process is read O(log of
its age) times. Bounded: MAX_PROCESSES per run, the reads' own bounds and a per-read deadline.
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple

from envsnap.measure.sample_reads import SampleReads, read_cmdline_bytes

MIN_REREAD_S = 0.1
MAX_PROCESSES = 256
READ_DEADLINE_S = 1.0
MAX_REDACTED = 1 << 16


class _Tracked:
    __slots__ = ("pid", "ticks", "cmdline", "exec_status", "exec_env", "exec_note", "exec_bytes", "live", "first",
                 "last", "located", "inherited")

    def __init__(self, pid: int, ticks: int, cmdline: List[str]) -> None:
        self.pid, self.ticks, self.cmdline = pid, ticks, cmdline
        self.exec_status = "unreadable"
        self.exec_env: Optional[Dict[str, str]] = None
        self.exec_note = ""
        self.exec_bytes: Optional[bytes] = None  # /proc/PID/environ as read, until the run is over
        self.live: Any = None  # the latest live_environ.LiveEnviron
        self.first = self.last = -1.0
        self.located: Any = None  # where its `environ` is (live_environ.Located), once found
        self.inherited = False  # `live` is its parent's read, lent for the first read of a forked child


def _start_and_parent(pid: int, reads: SampleReads) -> Optional[Tuple[int, int]]:
    """(start time in clock ticks, parent pid) from /proc/PID/stat (proc(5) fields 22 and 4)."""
    fields = reads.stat_fields(pid)
    try:
        return (int(fields[19]), int(fields[1])) if fields is not None else None
    except (ValueError, IndexError):
        return None


def _cmdline(raw: Optional[bytes]) -> Optional[List[str]]:
    """A /proc/PID/cmdline's arguments (None: it could not be read)."""
    if raw is None:
        return None
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]


class EnvironSampler:
    """The environments of a session's runs, process by process; `sample` runs in telemetry's thread."""

    def __init__(self, redact: bool = True, min_reread_s: float = MIN_REREAD_S) -> None:
        self.redact = redact
        self.min_reread_s = min_reread_s
        self._current: Optional[Dict[Tuple[int, int], _Tracked]] = None
        self._own = _cmdline(read_cmdline_bytes("self"))
        self.reads = 0
        # (name, value) -> its redacted value: a run's processes, and every run of a session, share most of one
        # environment, so each variable is redacted once (redact_value is a function of the two).
        self._redacted: Dict[Tuple[str, str], str] = {}

    def warm(self) -> None:
        """Pay, before any run, what the first sample would: the modules a read uses, and the C library's
        `environ` symbol, read once from envsnap's own libc (the same file as its children's, mostly: cached by
        identity in live_environ)."""
        from envsnap.capture.collectors import live_environ, proctree, roles  # noqa: F401
        from envsnap.redact import redact_value  # noqa: F401

        live_environ.read_live_environ(os.getpid(), time.monotonic() + READ_DEADLINE_S)

    def begin_run(self) -> None:
        self._current = {}

    def sample(self, members: Iterable[int], now: float, reads: Optional[SampleReads] = None) -> None:
        """Read new members, and known ones whose time has come (never raises); `reads`: what this sample has
        already read of them (the maps sampler's maps text spares a new process's second maps read)."""
        from envsnap.capture.collectors import live_environ, proctree

        current = self._current
        if current is None:
            return
        reads = SampleReads() if reads is None else reads
        by_pid = {t.pid: t for t in current.values()}
        for pid in sorted(members):
            found_stat = _start_and_parent(pid, reads)
            if found_stat is None:
                continue  # ended since the listing
            ticks, ppid = found_stat
            tracked = current.get((pid, ticks))
            if tracked is not None and now - tracked.last < max(self.min_reread_s, tracked.last - tracked.first):
                continue
            cmdline = _cmdline(reads.cmdline_bytes(pid))
            if not cmdline or cmdline == self._own:
                continue  # gone or a zombie (no command line), or forked and not yet exec'd: envsnap's own image
            if tracked is None or cmdline != tracked.cmdline:  # new, or it exec'd another program since
                if tracked is None and len(current) >= MAX_PROCESSES:
                    continue
                tracked = current[(pid, ticks)] = _Tracked(pid, ticks, cmdline)
                exec_bytes, status, note = reads.environ_bytes(pid)
                if exec_bytes is not None:  # classified once the run is over (end_run)
                    tracked.exec_bytes = exec_bytes
                elif status == proctree.NO_PROCFS:
                    tracked.exec_status, tracked.exec_env, tracked.exec_note = proctree.read_environ(pid)
                else:
                    tracked.exec_status, tracked.exec_note = status, note
                parent = by_pid.get(ppid)
                if parent is not None and parent.cmdline == cmdline:
                    # Most likely forked and not exec'd (a pool's worker): the same address space layout, so the
                    # parent's `environ` is tried first; a wrong guess fails the read's checks and is located anew.
                    tracked.located = parent.located
                    # Its strings too: where every entry sits where the parent's last read found it, they are the
                    # fork's copies of what that read decoded, and are not read again (read_live_environ_at).
                    tracked.live = parent.live
                    tracked.inherited = True
                by_pid[pid] = tracked
            found, tracked.located = live_environ.read_live_environ_at(
                pid, time.monotonic() + READ_DEADLINE_S, tracked.located, reads.maps_raw.get(pid), tracked.live)
            if tracked.inherited:  # the parent's read stands for none of the child's own
                tracked.inherited, tracked.live = False, None
            self.reads += 1
            if found.status == "ok" or tracked.live is None or tracked.live.status != "ok":
                tracked.live = found  # the latest good read stands over a later failure (an exit mid-read)
            if tracked.first < 0:
                tracked.first = now
            tracked.last = now

    def end_run(self) -> Dict[str, Dict[str, Any]]:
        """The run's processes, keyed (see the module doc)."""
        from envsnap.capture.collectors import roles

        current, self._current = self._current, None
        out: Dict[str, Dict[str, Any]] = {}
        if not current:
            return out
        from envsnap.capture.collectors import proctree

        alloc = roles.KeyAllocator()
        for tracked in sorted(current.values(), key=lambda t: (t.ticks, t.pid)):
            if tracked.exec_bytes is not None:  # read while it lived, classified now
                tracked.exec_status, tracked.exec_env, tracked.exec_note = proctree.classify_environ(tracked.exec_bytes)
                tracked.exec_bytes = None
            env = tracked.live.env if tracked.live is not None and tracked.live.env is not None else tracked.exec_env
            role = roles.parse_role(tracked.cmdline) if tracked.cmdline else None
            if role is None:
                role = roles.rank_role(env)
            if role is None:
                base = roles.safe_name(os.path.basename(tracked.cmdline[0]) if tracked.cmdline else "process")
                key = alloc.numbered(base, sep="-")
            elif role.pop("numbered", False):
                key = alloc.numbered(role["key"], sep="_")
            else:
                key = alloc.take(role["key"])
            entry: Dict[str, Any] = {"pid": tracked.pid, "environ_status": tracked.exec_status}
            if tracked.exec_env is not None:
                entry["environ"] = self._redact_env(tracked.exec_env)
            if tracked.exec_note:
                entry["environ_note"] = tracked.exec_note
            if tracked.live is not None:
                entry["live_environ_status"] = tracked.live.status
                if tracked.live.env is not None:
                    entry["live_environ"] = self._redact_env(tracked.live.env)
                if tracked.live.note:
                    entry["live_environ_note"] = tracked.live.note
            out[key] = entry
        return out

    def _redact_env(self, env: Dict[str, str]) -> Dict[str, str]:
        """redact.redact_env, each (name, value) redacted once a session (MAX_REDACTED kept)."""
        if not self.redact:
            return dict(env)
        from envsnap.redact import redact_value

        memo = self._redacted
        out: Dict[str, str] = {}
        for name, value in env.items():
            done = memo.get((name, value))
            if done is None:
                done = redact_value(name, value)
                if len(memo) < MAX_REDACTED:
                    memo[(name, value)] = done
            out[name] = done
        return out
