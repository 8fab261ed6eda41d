"""One read of /proc/PID/stat (and of /proc's other small files), shared by the process walk's samplers and
the neighbours' scans.

proc(5): the fields after the command name, which sits in parentheses and may itself hold spaces and
parentheses, so the split starts after the last ')'. Field N of proc(5) (1-based, pid = 1) is index N - 3 of
`fields`: state is fields[0], ppid fields[1], session fields[3], utime fields[11], num_threads fields[17],
starttime fields[19], vsize fields[20], rss (pages) fields[21], processor fields[36].
"""
from __future__ import annotations

import os
from typing import List, Optional, Tuple


def read_stat(pid: int) -> bytes:
    """The raw text of /proc/PID/stat in one read (raises OSError: gone, hidden, unreadable)."""
    fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    try:
        return os.read(fd, 4096)
    finally:
        os.close(fd)


def stat_fields(text: bytes) -> Tuple[bytes, List[bytes]]:
    """(command name, the fields after it) of a stat text (raises ValueError when it has no ')')."""
    close = text.rindex(b")")
    return text[text.index(b"(") + 1:close], text[close + 2:].split()


def read_file(path: str, limit: int = 1 << 20) -> bytes:
    """The bytes of a /proc file, at most `limit` (raises OSError: gone, hidden, unreadable). Plain os.open and
    os.read until the end: Python's open() adds a buffered reader and two fstat calls, which on /proc are a third
    of a small file's cost when the sampler wakes with cold caches (benchmarks/run_telemetry.py)."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        chunks: List[bytes] = []
        size = 0
        while size < limit:
            chunk = os.read(fd, min(limit - size, 1 << 16))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)
    finally:
        os.close(fd)


def read_bytes(path: str) -> Optional[bytes]:
    """The whole of a small /proc file (/proc/stat, /proc/loadavg, /proc/uptime), or None when it cannot be read."""
    try:
        return read_file(path)
    except OSError:
        return None
