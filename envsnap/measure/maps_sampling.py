"""Which shared objects the run command's own processes mapped, sampled while each run goes on.

A benchmark's processes are gone when the runs end, so what they loaded is read while they live:
telemetry's sampler hands each sample's members of the run's process tree to `MapsSampler.sample`.
A process is read when first seen (its command line, the names of its environment, its maps:
capture/collectors/maps.py), then again as it ages (when the time since its first read has doubled,
at least MIN_REREAD_S apart): a Python process maps most of its libraries while it imports, in its
first seconds, so a process of a minute is read ~10 times and a server of an hour ~20, and a process
seen only once (it lived less than a sampling interval) still counts, with what it had mapped then.
A process that exits between two samples and was never seen is not known: telemetry's interval
(0.5 s after a denser start) bounds what can be missed, and so does a library loaded after a
process's last read. What a process loaded after its first read ("late") is timing: another run, or
the other side, read early, may not have seen it. A child seen between its fork and its exec still runs envsnap's own image:
it is read once it has exec'd (its executable or command line changed), and what it mapped
before is dropped.

A process whose virtual memory size (/proc/PID/stat field 23) has not moved since its last read
mapped nothing new (mapping a library grows it; so does an exec): it is not read again. A process
is known by (pid, start time in clock ticks: field 22), so a pid reused within a run is another
process. Every sample also lists the regular files each process holds open read-only (/proc/PID/fd:
native code's opens too), for the files_read section (capture/collectors/files_read.py): those of each process
whose maps it reads and of MAX_FD_LISTINGS others, listed longest ago first; of each, the descriptors it did not
hold at its last listing, at most MAX_NEW_FDS.

While the run goes on a read only takes the kernel's text; it is parsed when the run is over (end_run),
outside the time the runs measure, once per distinct text (a pool's forked workers have their parent's, byte
for byte), up to MAX_PENDING_BYTES kept unparsed. At the end
of each run its processes get keys as the
processes section would give them (roles.py: an SGLang title, a torchrun RANK, else the program's
name numbered in start order); `runs` keeps them per run, for the libraries collector to describe
after the runs (libraries.collect_after_runs). Cost is measured with telemetry's
(benchmarks/run_telemetry.py: the sampler thread's CPU time).
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Set, Tuple

from envsnap.measure.sample_reads import SampleReads, read_cmdline_bytes

MIN_REREAD_S = 0.1
MAX_PARSED = 64  # maps texts kept parsed per run, each of at most MAX_PARSED_BYTES (a CUDA worker's: ~0.5 MB)
MAX_PARSED_BYTES = 1 << 20
# The maps texts a run keeps to parse after it ends, not while its processes run (a CUDA worker's text of ~5,000
# lines takes milliseconds to parse): beyond this, a process's reads are parsed as they come.
MAX_PENDING_BYTES = 64 << 20


class SeenProcess(NamedTuple):
    pid: int
    start_ticks: int
    cmdline: List[str]
    env_names: List[str]
    rank_env: Dict[str, str]  # RANK / LOCAL_RANK and kin, for a torchrun worker's key


class _Tracked:
    __slots__ = ("seen", "environ", "image", "files", "first", "last", "vsize", "reads", "status", "note", "opened",
                 "fds", "listed_at", "at_first", "pending", "absorbed")

    def __init__(self, pid: int, ticks: int, image: Tuple[Optional[str], List[str]], environ: Optional[bytes]) -> None:
        self.seen = SeenProcess(pid, ticks, image[1], [], {})  # its variables' names once the run is over (end_run)
        self.environ = environ  # its /proc/PID/environ, read when first seen, decoded at the end of the run
        self.image = image  # (executable, command line) the files were read under
        self.files: Dict[Tuple[str, bool], Any] = {}  # (path, deleted) -> maps.Mapped
        self.first = -1.0
        self.last = -1.0
        self.vsize = -1
        self.reads = 0
        self.status = "ok"
        self.note = ""
        self.opened: Set[str] = set()  # regular files it held open read-only when sampled (files_read.py)
        self.fds: Set[str] = set()  # its descriptors already looked at, held since (/proc/PID/fd's names)
        self.listed_at = -1  # the run's sample that last listed its descriptors
        self.at_first: Set[str] = set()  # the paths its first read found mapped (the rest it loaded later)
        self.pending: List[Any] = []  # its maps texts read (maps.RawMaps) and not parsed yet, in read order
        self.absorbed = 0  # its reads parsed into `files`


def _stat(pid: int, reads: SampleReads) -> Optional[Tuple[int, int]]:
    """(start time in clock ticks, virtual memory size) from /proc/PID/stat (proc(5) fields 22, 23)."""
    fields = reads.stat_fields(pid)
    try:
        return (int(fields[19]), int(fields[20])) if fields is not None else None
    except (ValueError, IndexError):
        return None


_RANK_NAMES = ("RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID")


def _image(pid: object, raw_cmdline: Optional[bytes]) -> Tuple[Optional[str], List[str]]:
    """(executable, command line) of a process ("self" or a pid; `raw_cmdline` its /proc/PID/cmdline): what an
    exec changes."""
    try:
        exe: Optional[str] = os.readlink(f"/proc/{pid}/exe")
    except OSError:
        exe = None
    cmdline = [a.decode("utf-8", "surrogateescape") for a in (raw_cmdline or b"").split(b"\0")]
    while cmdline and cmdline[-1] == "":
        cmdline.pop()
    return exe, cmdline


def _identify(pid: int, ticks: int, cmdline: List[str], environ: Optional[bytes]) -> SeenProcess:
    """The process as its key and the libraries' mentions need it: `environ`, its /proc/PID/environ as read while it
    lived (None: unreadable), gives the names of its variables and its rank's."""
    names: List[str] = []
    ranks: Dict[str, str] = {}
    for entry in (environ or b"").split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep and name:
            text = name.decode("utf-8", "surrogateescape")
            names.append(text)
            if text in _RANK_NAMES:
                ranks[text] = value.decode("utf-8", "surrogateescape")[:32]
    return SeenProcess(pid, ticks, cmdline, names, ranks)


MAX_OPENED = 1024  # paths kept per process: files_read.py caps what it hashes anyway
# Descriptors looked at per process and sample: each costs a readlink and, for a regular file, its fdinfo (~20 us
# with the caches cold), so a process holding thousands of files is taken in over several samples, not at once.
MAX_NEW_FDS = 128
# Processes whose descriptors a sample lists besides those whose maps it reads: the ones listed longest ago first.
# A tree of a few processes has each listed every sample; one of sixteen pool workers each every few samples, so a
# sample's cost stays bounded (a listing is ~50 us with cold caches, most of a known process's cost a sample).
MAX_FD_LISTINGS = 4


def _note_opened(tracked: _Tracked, pid: int) -> None:
    """The regular files the process holds open read-only now (/proc/PID/fd), added to what it was seen with.
    Only descriptors it did not hold at its last listing are looked at (a server's hundreds of long-held
    descriptors would otherwise cost milliseconds every sample): a file closed and another opened at the same
    number between two listings is not seen, as a file opened and closed between them is not."""
    from envsnap.capture.collectors.files_read import read_only_file

    if len(tracked.opened) >= MAX_OPENED:
        return
    try:
        listed = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return
    tracked.fds.intersection_update(listed)  # those closed since: a later open at that number is looked at anew
    budget = MAX_NEW_FDS
    for fd in listed:
        if fd in tracked.fds:
            continue
        if budget == 0:
            break  # the rest at the next sample, if still held
        budget -= 1
        tracked.fds.add(fd)
        path = read_only_file(pid, fd)
        if path is not None and len(tracked.opened) < MAX_OPENED:
            tracked.opened.add(path)


class MapsSampler:
    """The maps of a session's runs, process by process; `sample` runs in telemetry's thread."""

    def __init__(self, min_reread_s: float = MIN_REREAD_S) -> None:
        self.min_reread_s = min_reread_s
        self.runs: List[Dict[str, Dict[str, Any]]] = []  # one per run, in the order they ran
        self._current: Optional[Dict[Tuple[int, int], _Tracked]] = None
        self._own = _image("self", read_cmdline_bytes("self"))  # a child not yet exec'd still shows this
        self.reads = 0
        # This run's maps texts, parsed: a forked child that mapped nothing since the fork has its parent's text
        # byte for byte (a pool's workers), and parsing is most of a read's cost after the kernel's own.
        self._parsed: Dict[bytes, Any] = {}
        self._pending_bytes = 0  # maps texts read in this run and not parsed yet
        self._samples = 0  # this run's samples so far

    def warm(self) -> None:
        """Pay, before any run, what the first sample would: the modules a read uses, and one read and parse of
        envsnap's own maps (what a run's sampling costs is then what its processes cost)."""
        from envsnap.capture.collectors import files_read, maps, roles  # noqa: F401

        maps.from_raw(maps.read_raw(os.getpid()))
        files_read.open_for_reading(os.getpid())

    def begin_run(self) -> None:
        self._current = {}
        self._parsed, self._pending_bytes = {}, 0
        self._samples = 0

    def sample(self, members: Iterable[int], now: float, reads: Optional[SampleReads] = None) -> None:
        """Read the maps of new members, and of known ones whose time has come (never raises); the maps text read
        is left in `reads` for the environment's sampler."""
        from envsnap.capture.collectors import maps

        current = self._current
        if current is None:
            return
        reads = SampleReads() if reads is None else reads
        self._samples += 1
        unread: List[Tuple[int, int, _Tracked]] = []  # (last listed, pid, process): known ones not read this time
        for pid in members:
            found_stat = _stat(pid, reads)
            if found_stat is None:
                continue  # ended since the listing
            ticks, vsize = found_stat
            tracked = current.get((pid, ticks))
            if tracked is not None and tracked.reads and (
                    vsize == tracked.vsize  # nothing mapped or unmapped since the last read (nor an exec)
                    or now - tracked.last < max(self.min_reread_s, tracked.last - tracked.first)):
                unread.append((tracked.listed_at, pid, tracked))  # files come and go without the maps moving
                continue
            image = _image(pid, reads.cmdline_bytes(pid))
            if image == self._own:
                continue  # forked, not yet exec'd: envsnap's own image
            if tracked is None or image != tracked.image:  # new, or it exec'd another program since
                tracked = current[(pid, ticks)] = _Tracked(pid, ticks, image, reads.environ_bytes(pid)[0])
            raw = maps.read_raw(pid)
            if raw.raw and not raw.truncated:
                reads.maps_raw[pid] = raw.raw
            if self._pending_bytes + len(raw.raw) <= MAX_PENDING_BYTES:
                tracked.pending.append(raw)  # parsed once the run is over (end_run)
                self._pending_bytes += len(raw.raw)
            else:  # too much kept unparsed: this process's reads are parsed now, in order
                self._absorb_pending(tracked)
                self._absorb(tracked, raw)
            if tracked.first < 0:
                tracked.first = now
            tracked.last = now
            tracked.vsize = vsize
            tracked.reads += 1
            self.reads += 1
            _note_opened(tracked, pid)
            tracked.listed_at = self._samples
        for _, pid, tracked in sorted(unread, key=lambda item: item[:2])[:MAX_FD_LISTINGS]:
            _note_opened(tracked, pid)
            tracked.listed_at = self._samples

    def _parse(self, raw: Any) -> Any:
        """maps.from_raw, once per distinct text of the run."""
        from envsnap.capture.collectors import maps

        memo = raw.status == "ok" and not raw.truncated and 0 < len(raw.raw) <= MAX_PARSED_BYTES
        found = self._parsed.get(raw.raw) if memo else None
        if found is None:
            found = maps.from_raw(raw)
            if memo and len(self._parsed) < MAX_PARSED:
                self._parsed[raw.raw] = found
        return found

    def _absorb(self, tracked: _Tracked, raw: Any) -> None:
        """One read of the process's maps, parsed, into what it is known to have mapped."""
        found = self._parse(raw)
        if found.files:
            for mapped in found.files:
                tracked.files.setdefault((mapped.path, mapped.deleted), mapped)
            if not tracked.absorbed:
                tracked.at_first = {mapped.path for mapped in found.files}
        if found.status != "ok" and not tracked.files:
            tracked.status, tracked.note = found.status, found.note
        tracked.absorbed += 1

    def _absorb_pending(self, tracked: _Tracked) -> None:
        for raw in tracked.pending:
            self._pending_bytes -= len(raw.raw)
            self._absorb(tracked, raw)
        tracked.pending = []

    def end_run(self) -> None:
        """Key the run's processes and keep them (`runs[-1]`: {key: {pid, cmdline, env_names, files...}})."""
        from envsnap.capture.collectors import roles

        current, self._current = self._current, None
        if current is None:
            return
        for tracked in current.values():  # the run is over: what was read while it went on is parsed now
            self._absorb_pending(tracked)
            tracked.seen = _identify(tracked.seen.pid, tracked.seen.start_ticks, tracked.seen.cmdline, tracked.environ)
            tracked.environ = None
        self._parsed, self._pending_bytes = {}, 0
        alloc = roles.KeyAllocator()
        out: Dict[str, Dict[str, Any]] = {}
        for tracked in sorted(current.values(), key=lambda t: (t.seen.start_ticks, t.seen.pid)):
            seen = tracked.seen
            role = roles.parse_role(seen.cmdline) if seen.cmdline else None
            if role is None:
                role = roles.rank_role(seen.rank_env)
            if role is None:
                base = roles.safe_name(os.path.basename(seen.cmdline[0]) if seen.cmdline else "process")
                key = alloc.numbered(base, sep="-")
            elif role.pop("numbered", False):
                key = alloc.numbered(role["key"], sep="_")
            else:
                key = alloc.take(role["key"])
            out[key] = {"pid": seen.pid, "cmdline": seen.cmdline, "env_names": seen.env_names,
                        "files": list(tracked.files.values()), "reads": tracked.reads,
                        # Loaded after its first read: whether a read sees them followed when it came.
                        "late": sorted({path for path, _ in tracked.files} - tracked.at_first),
                        "opened": sorted(tracked.opened),
                        "status": tracked.status, "note": tracked.note}
        self.runs.append(out)

    def env_names(self) -> Set[str]:
        """Every variable name the sampled processes started with."""
        return {name for run in self.runs for entry in run.values() for name in entry["env_names"]}
