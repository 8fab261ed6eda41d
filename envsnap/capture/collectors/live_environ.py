"""A process's environment as it is now: the C `environ` array read from its memory, without stopping it.

/proc/PID/environ is the block the kernel laid out at exec; whatever the process did since is not there:
CPython's `os.environ[k] = v` calls putenv and `del` unsetenv (Lib/os.py, class _Environ), setenv(3) in
C, and setproctitle (SGLang's schedulers) overwrites or moves that block. The live environment is the
NULL-terminated `char **environ` the C library keeps, found without debug symbols:

1. /proc/PID/maps gives each mapped file and where it is mapped;
2. the ELF dynamic symbol table (.dynsym, elf.dynamic_symbols) of the object that defines `environ`
   (glibc: `environ`/`__environ` in libc.so.6; musl: the same names in its ld-musl object) gives its
   offset; load address = the start of the mapping of the object's first PT_LOAD - that segment's
   p_vaddr. The executable is searched first: one that uses `environ` itself (a C program, Debian's
   /usr/bin/python3.11) gets a copy relocation, and then the executable's copy is the one everyone,
   libc included, uses (the dynamic linker's lookup order puts the executable first);
3. process_vm_readv(2) (or /proc/PID/mem where that call is missing) reads the pointer, the array and
   the strings, a few pages per call. Nothing is stopped or injected: the kernel checks ptrace access
   mode PTRACE_MODE_ATTACH_REALCREDS (same user and Yama kernel.yama.ptrace_scope 0, descendants only
   at 1, or CAP_SYS_PTRACE), and a refusal is recorded as "denied" with the reason.

A process may change its environment while we read it (setenv reallocates the array): the pointer is
read again at the end and the read retried when it moved. A string freed mid-read can still tear;
entries that are not NAME=value are counted in the note, never shown as variables.

What it cannot see: a statically linked program (no dynamic symbol; "unlocated", the probe or
/proc remain), a program that keeps its own environment copy (bash's exported variables live in
bash's tables until it runs a command), and which variables a library actually read (the probe and
NCCL's log say that). Reads are bounded in entries, bytes and time; nothing here raises.
"""
from __future__ import annotations

import ctypes
import errno
import os
import re
import sys
import time
from typing import Dict, List, NamedTuple, Optional, Set, Tuple

from envsnap.capture.collectors import elf

MAX_ENTRIES = 100_000  # a 1 MB environment of short variables is ~30,000 entries
MAX_BYTES = 16 << 20  # memory read per process (pages of the array and the strings)
MAX_STRING = 1 << 20  # one NAME=value (the kernel caps one exec string at 128 KiB; in-process has no cap)
MAX_MAPS_BYTES = 16 << 20
PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
READ_AHEAD_PAGES = 2  # pages per on-demand read (the strings' pages are read ahead in one call: prefetch)
_IOV_MAX = 1024  # remote elements per process_vm_readv call (IOV_MAX, <limits.h>)
SYMBOLS = ("environ", "__environ")
# The C libraries that define `environ`: glibc's libc.so.6 (libc-2.x.so before 2.34), musl's ld-musl/libc.musl.
_LIBC_NAME = re.compile(r"^(libc\.so(\.\d+)*|libc-[\d.]+\.so|ld-musl-[^/]*\.so(\.\d+)*|libc\.musl-[^/]*\.so(\.\d+)*)$")
_MAPS_LINE = re.compile(rb"^([0-9a-f]+)-[0-9a-f]+ \S+ ([0-9a-f]+) [0-9a-f]+:[0-9a-f]+ ([0-9]+) +(/[^\n]*)$", re.M)

DENIED_NOTE = ("not permitted to read this process's memory (ptrace access mode PTRACE_MODE_ATTACH_REALCREDS: "
               "another user's process, Yama kernel.yama.ptrace_scope {scope}, or no CAP_SYS_PTRACE): run envsnap as "
               "that user or as root, or use the probe")
UNLOCATED_NOTE = ("no mapped object defines `environ` in its dynamic symbol table (a statically linked program, or a "
                  "C library without that symbol): the live environment cannot be located; /proc/PID/environ (as at "
                  "exec) and the probe remain")


class LiveEnviron(NamedTuple):
    status: str  # ok | denied | gone | unlocated | unreadable | truncated | timeout
    env: Optional[Dict[str, str]]  # only when ok
    note: str  # why not, or what was left out (malformed entries)
    source: str  # the object whose `environ` was read ("" when none)
    # Where `environ` and its entries were when read (the array's address, then each entry's): a read again of the
    # same process that finds the same addresses has the same environment (read_live_environ_at's `previous`).
    entries: Tuple[int, ...] = ()


class _Stop(Exception):
    """A read cannot go on: the LiveEnviron to return instead."""

    def __init__(self, result: LiveEnviron) -> None:
        super().__init__(result.note)
        self.result = result


def _failure(status: str, note: str, source: str = "") -> _Stop:
    return _Stop(LiveEnviron(status, None, note, source))


def _ptrace_scope() -> str:
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope", "rb") as handle:
            return handle.read().strip().decode() or "?"
    except OSError:
        return "(no Yama)"


class _IoVec(ctypes.Structure):
    _fields_ = [("iov_base", ctypes.c_void_p), ("iov_len", ctypes.c_size_t)]


def _process_vm_readv() -> Optional["ctypes._NamedFuncPointer"]:
    try:
        func = ctypes.CDLL(None, use_errno=True).process_vm_readv
    except (OSError, AttributeError):
        return None
    func.restype = ctypes.c_ssize_t
    func.argtypes = [ctypes.c_int, ctypes.POINTER(_IoVec), ctypes.c_ulong, ctypes.POINTER(_IoVec), ctypes.c_ulong,
                     ctypes.c_ulong]
    return func


_READV = _process_vm_readv()


class _Memory:
    """Another process's memory, read a page run at a time and kept per page (bounded in bytes and time)."""

    def __init__(self, pid: int, deadline: float) -> None:
        self.pid, self.deadline = pid, deadline
        self.pages: Dict[int, Optional[bytes]] = {}  # page address -> bytes, None = not mapped
        self.read_bytes = 0
        self._mem_fd: Optional[int] = None
        self._use_mem = _READV is None

    def close(self) -> None:
        if self._mem_fd is not None:
            os.close(self._mem_fd)
            self._mem_fd = None

    def _fetch(self, page: int) -> None:
        if time.monotonic() > self.deadline:
            raise _failure("timeout", "stopped at the capture deadline while reading the process's memory")
        count = READ_AHEAD_PAGES
        if self.read_bytes + count * PAGE > MAX_BYTES:
            raise _failure("truncated", f"more than {MAX_BYTES >> 20} MiB of memory to read for the environment: "
                                        "not read")
        data = self._read_mem(page, count) if self._use_mem else self._readv(page, count)
        self.read_bytes += count * PAGE
        whole = len(data) // PAGE
        for index in range(whole):
            self.pages.setdefault(page + index * PAGE, data[index * PAGE:(index + 1) * PAGE])
        if whole == 0:
            self.pages[page] = None  # the first page itself is not mapped: pages after it are unknown

    def _readv(self, page: int, count: int) -> bytes:
        assert _READV is not None
        buffer = ctypes.create_string_buffer(count * PAGE)
        local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), count * PAGE)
        # One remote element per page: the call stops at the first page that is not mapped, never inside one.
        remote = (_IoVec * count)(*[_IoVec(page + i * PAGE, PAGE) for i in range(count)])
        done = _READV(self.pid, ctypes.byref(local), 1, remote, count, 0)
        if done >= 0:
            return bytes(memoryview(buffer)[:done])
        code = ctypes.get_errno()
        if code == errno.ENOSYS:
            self._use_mem = True
            return self._read_mem(page, count)
        if code == errno.EFAULT:
            return b""
        if code == errno.ESRCH:
            raise _failure("gone", "the process exited while its memory was read")
        if code == errno.EPERM:
            raise _failure("denied", DENIED_NOTE.format(scope=_ptrace_scope()))
        raise _failure("unreadable", f"process_vm_readv failed: {os.strerror(code)}")

    def _read_mem(self, page: int, count: int) -> bytes:
        out = b""
        try:
            if self._mem_fd is None:
                self._mem_fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
            for index in range(count):
                chunk = os.pread(self._mem_fd, PAGE, page + index * PAGE)
                if len(chunk) < PAGE:
                    break
                out += chunk
            return out
        except (FileNotFoundError, ProcessLookupError):
            raise _failure("gone", "the process exited while its memory was read") from None
        except PermissionError:
            raise _failure("denied", DENIED_NOTE.format(scope=_ptrace_scope())) from None
        except OSError as exc:  # EIO: an address that is not mapped
            if exc.errno == errno.EIO:
                return out
            raise _failure("unreadable", f"/proc/PID/mem: {exc.strerror or exc}") from None

    def prefetch(self, addresses: List[int]) -> None:
        """Read the pages these addresses start in, not yet read, in as few calls as the kernel allows
        (IOV_MAX remote elements a call, one page each): the strings of an environment that setproctitle or
        setenv moved to the heap lie scattered, one page apart or more."""
        wanted = sorted({a - a % PAGE for a in addresses} - set(self.pages))
        if _READV is None or self._use_mem:
            return  # read page by page on demand
        for start in range(0, len(wanted), _IOV_MAX):
            if time.monotonic() > self.deadline:
                raise _failure("timeout", "stopped at the capture deadline while reading the process's memory")
            pages = wanted[start:start + _IOV_MAX]
            if self.read_bytes + len(pages) * PAGE > MAX_BYTES:
                return  # the on-demand reads say "truncated" when they need more
            buffer = ctypes.create_string_buffer(len(pages) * PAGE)
            local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), len(pages) * PAGE)
            remote = (_IoVec * len(pages))(*[_IoVec(page, PAGE) for page in pages])
            done = _READV(self.pid, ctypes.byref(local), 1, remote, len(pages), 0)
            self.read_bytes += len(pages) * PAGE
            if done < 0:
                return  # the on-demand reads say why (gone, denied, unmapped)
            raw = memoryview(buffer)
            for index in range(done // PAGE):  # the call stops at the first page that is not mapped
                self.pages[pages[index]] = bytes(raw[index * PAGE:(index + 1) * PAGE])

    def fresh_pointer(self, address: int, size: int) -> Optional[int]:
        """A pointer read again from the memory as it is now (not the pages read before)."""
        if _READV is None or self._use_mem:
            self.pages.clear()
            return _pointer(self, address, size)
        buffer = ctypes.create_string_buffer(size)
        local = _IoVec(ctypes.cast(buffer, ctypes.c_void_p), size)
        remote = _IoVec(address, size)
        if _READV(self.pid, ctypes.byref(local), 1, ctypes.byref(remote), 1, 0) != size:
            return None
        return int.from_bytes(buffer.raw, sys.byteorder)

    def page(self, address: int) -> Optional[bytes]:
        start = address - address % PAGE
        if start not in self.pages:
            self._fetch(start)
        return self.pages.get(start)

    def read(self, address: int, size: int) -> bytes:
        """Exactly `size` bytes, or fewer where the memory ends."""
        out = b""
        while len(out) < size:
            data = self.page(address + len(out))
            if data is None:
                break
            offset = (address + len(out)) % PAGE
            out += data[offset:offset + size - len(out)]
        return out

    def string(self, address: int) -> Optional[bytes]:
        """The NUL-terminated bytes at `address` (None: unmapped, or longer than MAX_STRING)."""
        out = b""
        while len(out) <= MAX_STRING:
            data = self.page(address + len(out))
            if data is None:
                return None
            offset = (address + len(out)) % PAGE
            end = data.find(b"\0", offset)
            if end >= 0:
                return out + data[offset:end]
            out += data[offset:]
        return None


class _Mapping(NamedTuple):
    start: int
    offset: int
    inode: int
    path: str


# Only the executable's and the C library's mappings can hold `environ` (_candidates): lines naming neither are
# skipped before the regular expression, which would otherwise cost most of a read (~0.4 ms for a Python process
# with torch-sized maps).
_LIBC_NEEDLES = (b"libc", b"musl")


def _exe(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return ""


def _maps(pid: int, raw: Optional[bytes] = None, exe_path: str = "") -> Optional[List[_Mapping]]:
    """The mappings of the executable (`exe_path`) and of C libraries (None: the process maps no file at all);
    `raw`: the process's maps text when the caller has just read it (run telemetry: one read of the file serves
    both)."""
    exe = exe_path.encode("utf-8", "surrogateescape")
    try:
        if raw is None:
            with open(f"/proc/{pid}/maps", "rb") as handle:
                raw = handle.read(MAX_MAPS_BYTES)
    except (FileNotFoundError, ProcessLookupError):
        raise _failure("gone", "the process exited before its memory map was read") from None
    except PermissionError:
        raise _failure("denied", DENIED_NOTE.format(scope=_ptrace_scope())) from None
    except OSError as exc:
        raise _failure("unreadable", f"/proc/{pid}/maps: {exc.strerror or exc}") from None
    if b"/" not in raw:
        return None
    starts: Set[int] = set()  # where each line that names a needle starts (bytes.find: C speed, no per-line loop)
    for needle in _LIBC_NEEDLES + ((exe,) if exe else ()):
        at = raw.find(needle)
        while at >= 0:
            starts.add(raw.rfind(b"\n", 0, at) + 1)
            end = raw.find(b"\n", at)
            at = raw.find(needle, end) if end >= 0 else -1
    out: List[_Mapping] = []
    for start in sorted(starts):
        end = raw.find(b"\n", start)
        m = _MAPS_LINE.match(raw[start:end if end >= 0 else len(raw)])
        if m is not None:
            out.append(_Mapping(int(m.group(1), 16), int(m.group(2), 16), int(m.group(3)),
                                m.group(4).decode("utf-8", "surrogateescape")))
    return out


# (st_dev, st_ino, st_size, st_mtime_ns) -> its symbols: libc is the same file in every process.
_SYMBOL_CACHE: Dict[Tuple[int, int, int, int], Optional[elf.DynamicSymbols]] = {}


def _symbols(pid: int, mapping: _Mapping) -> Optional[elf.DynamicSymbols]:
    """The object's `environ` symbols (None: not readable or not ELF), opened through the process's own view
    of its files (/proc/PID/map_files, else its root) so that a container's or a deleted file is the one mapped."""
    path = mapping.path[:-len(" (deleted)")] if mapping.path.endswith(" (deleted)") else mapping.path
    for candidate in (f"/proc/{pid}/root{path}", path):
        try:
            fd = os.open(candidate, os.O_RDONLY)
        except OSError:
            continue
        try:
            info = os.fstat(fd)
            if info.st_ino != mapping.inode:
                continue  # replaced on disk since it was mapped
            identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
            if identity not in _SYMBOL_CACHE:
                try:
                    _SYMBOL_CACHE[identity] = elf.dynamic_symbols(fd, info.st_size, SYMBOLS, PAGE)
                except (elf.NotElf, OSError, ValueError):
                    _SYMBOL_CACHE[identity] = None
            return _SYMBOL_CACHE[identity]
        finally:
            os.close(fd)
    return None


def _candidates(exe: str, maps: List[_Mapping]) -> List[_Mapping]:
    """The executable (its path `exe`) first (a copy relocation puts `environ` there), then the C libraries, each
    once."""
    first: Dict[str, _Mapping] = {}
    for mapping in sorted(maps, key=lambda m: (m.path, m.offset, m.start)):
        first.setdefault(mapping.path, mapping)
    exe_maps = [m for p, m in first.items() if p == exe or p == exe + " (deleted)"]
    libcs = sorted((m for p, m in first.items() if _LIBC_NAME.match(os.path.basename(p.replace(" (deleted)", "")))),
                   key=lambda m: m.start)
    return exe_maps + [m for m in libcs if m not in exe_maps]


def _locate(pid: int, maps: List[_Mapping], exe: str) -> Tuple[int, int, str]:
    """(address of the `environ` variable, pointer size, object path)."""
    for mapping in _candidates(exe, maps):
        symbols = _symbols(pid, mapping)
        if symbols is None or not symbols.values:
            continue
        value = symbols.values.get("environ", symbols.values.get("__environ"))
        assert value is not None
        # The mapping of the object's first PT_LOAD segment (its file offset) tells where it was loaded.
        loaded = [m.start for m in maps if m.path == mapping.path and m.inode == mapping.inode
                  and m.offset == symbols.load_offset]
        if not loaded:
            continue
        return min(loaded) - symbols.load_vaddr + value, symbols.pointer_size, mapping.path
    raise _failure("unlocated", UNLOCATED_NOTE)


def _pointer(memory: _Memory, address: int, size: int) -> Optional[int]:
    raw = memory.read(address, size)
    return int.from_bytes(raw, sys.byteorder) if len(raw) == size else None




def _entries(memory: _Memory, address: int, size: int, source: str) -> List[int]:
    """The entry addresses of the NULL-terminated pointer array at `address`."""
    pointers: List[int] = []
    code = "Q" if size == 8 else "I"
    while True:  # the array a page at a time, up to its NULL
        at = address + len(pointers) * size
        raw = memory.read(at, PAGE - at % PAGE if (PAGE - at % PAGE) % size == 0 else size)
        if len(raw) < size:
            raise _failure("unreadable", "the environment array runs into unmapped memory (changed while read?)",
                           source)
        chunk = list(memoryview(raw[:len(raw) - len(raw) % size]).cast(code))  # type: ignore[call-overload]
        end = chunk.index(0) if 0 in chunk else len(chunk)
        pointers += chunk[:end]
        if len(pointers) >= MAX_ENTRIES:
            raise _failure("truncated", f"more than {MAX_ENTRIES} entries in the environment array: not read", source)
        if end < len(chunk):
            break
    return pointers


def _read_strings(memory: _Memory, pointers: List[int]) -> Tuple[Dict[str, str], int]:
    """{NAME: value} of the entries at `pointers`, and how many were not NAME=value."""
    memory.prefetch(pointers)
    env: Dict[str, str] = {}
    malformed = 0
    for pointer in pointers:
        text = memory.string(pointer)
        if text is None:
            malformed += 1
            continue
        name, sep, value = text.partition(b"=")
        if not sep or not name:
            malformed += 1
            continue
        key = name.decode("utf-8", "surrogateescape")
        env.setdefault(key, value.decode("utf-8", "surrogateescape"))  # getenv(3) returns the first match
    return env, malformed


# Where a process's `environ` variable is: (its address, the pointer size, the object that defines it). It does not
# move while the process lives (until it execs), so a reader that reads one process again keeps it.
Located = Tuple[int, int, str]


def read_live_environ(pid: int, deadline: Optional[float] = None) -> LiveEnviron:
    """The process's `environ` as it is now (see the module doc); never raises."""
    return read_live_environ_at(pid, deadline)[0]


def read_live_environ_at(pid: int, deadline: Optional[float] = None, located: Optional[Located] = None,
                         maps_raw: Optional[bytes] = None,
                         previous: Optional[LiveEnviron] = None) -> Tuple[LiveEnviron, Optional[Located]]:
    """read_live_environ, and where `environ` was found, for the next read of the same process (run telemetry reads
    each process again as it ages): with `located` given, its maps and symbols are not read again (~2 ms of a
    ~2.5 ms read) unless reading there fails or finds an entry that is not NAME=value (it exec'd since).
    `maps_raw`: the process's maps text, when the caller has just read it. `previous`: this process's last good
    read at `located`; when `environ` and every entry are where that read found them, its strings are kept, not
    read again. setenv(3), putenv(3) and os.environ put a new string in a new place, and setproctitle moves the
    strings it overwrites, so a change moves an address; only a program that rewrites, in place, a buffer it
    gave putenv is seen at its next move."""
    if located is not None:
        found = _read_located(pid, deadline, located, None, None, previous)
        if found.status == "ok" and not found.note:
            return found, located
    where: List[Located] = []
    return _read_located(pid, deadline, None, where, maps_raw), (where[0] if where else None)


def _read_located(pid: int, deadline: Optional[float], located: Optional[Located],
                  where: Optional[List[Located]], maps_raw: Optional[bytes] = None,
                  previous: Optional[LiveEnviron] = None) -> LiveEnviron:
    deadline = time.monotonic() + 5.0 if deadline is None else deadline
    memory = _Memory(pid, deadline)
    source = ""
    try:
        if located is None:
            exe = _exe(pid)
            maps = _maps(pid, maps_raw or None, exe)
            if maps is None:
                # A kernel thread, or a zombie: no user memory at all.
                return LiveEnviron("unreadable", None, "no mapped files (a kernel thread, or a process that exited)",
                                   "")
            located = _locate(pid, maps, exe)
            if where is not None:
                where.append(located)
        variable, size, source = located
        for _attempt in range(3):
            before = _pointer(memory, variable, size)
            if before is None:
                return LiveEnviron("unreadable", None, "the `environ` variable is not in readable memory", source)
            if before == 0:
                return LiveEnviron("ok", {}, "environ is NULL (clearenv)", source)
            entries = _entries(memory, before, size, source)
            kept = (previous.env if previous is not None and previous.status == "ok" and not previous.note
                    and previous.entries == (before, *entries) else None)
            env, malformed = (kept, 0) if kept is not None else _read_strings(memory, entries)
            if memory.fresh_pointer(variable, size) == before:  # the pointer again, as it is now
                note = (f"{malformed} entr{'y' if malformed == 1 else 'ies'} not NAME=value left out"
                        if malformed else "")
                return LiveEnviron("ok", env, note, source, (before, *entries))
        return LiveEnviron("unreadable", None, "the environment kept changing while it was read", source)
    except _Stop as stop:
        result = stop.result
        return result if result.source or not source else result._replace(source=source)
    except Exception as exc:  # a bug must not cost the capture: said as data
        return LiveEnviron("unreadable", None, f"internal error: {type(exc).__name__}: {exc}", source)
    finally:
        memory.close()
