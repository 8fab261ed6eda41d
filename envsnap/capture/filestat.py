"""A file's state as five numbers (device, inode, size, mtime_ns, ctime_ns), and when it can be trusted.

The trusted caches (hash, libraries, --deep probe) reuse what they read from a file only while
these five numbers are unchanged: git's index rule (git/Documentation/technical/racy-git.txt,
read-cache.c `ie_match_stat` and `is_racy_timestamp`). `touch -r` and `os.utime` can put an mtime
back, but nothing short of changing the system clock sets ctime back: every write, truncate,
rename-over or chmod moves it. What stat cannot show is an edit within one timestamp granule of
the state that was read: such a state is "racy" and never recorded.
"""
from __future__ import annotations

import itertools
import os
import struct
from operator import attrgetter
from typing import List, Optional

# Margin between a file's mtime/ctime and the moment its stat was taken below which a
# state is racy: covers the kernel's coarse clock (<= 10 ms), whole-second (ext3, HFS+,
# some NFS servers) and FAT's 2 s timestamps, and a clock skew of about a second to a
# network filesystem. Read at call time (tests shorten it).
RACY_WINDOW_NS = 3_000_000_000

STAT_FIELDS = attrgetter("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
# The same five numbers packed (40 bytes): no int-to-text conversion per file, and a whole
# distribution's stats compare as one bytes object.
STAT = struct.Struct("<QQQqq")


def stat_key(st: os.stat_result) -> str:
    """The identity of a file's state as text: `"<dev> <ino> <size> <mtime_ns> <ctime_ns> "`."""
    return f"{st.st_dev} {st.st_ino} {st.st_size} {st.st_mtime_ns} {st.st_ctime_ns} "


def packed_stat(st: os.stat_result) -> bytes:
    """The identity of a file's state as stored (device, inode, size, mtime_ns, ctime_ns)."""
    return STAT.pack(*STAT_FIELDS(st))


def packed_stats(paths: List[str]) -> Optional[bytes]:
    """packed_stat of every path, concatenated in order; None when one cannot be stat'ed. The
    loop is nested map()s: it runs in C, a stat and a tuple per path and no Python bytecode."""
    try:
        return b"".join(itertools.starmap(STAT.pack, map(STAT_FIELDS, map(os.stat, paths))))
    except (OSError, ValueError, struct.error):
        return None


def is_racy(st: os.stat_result, since_ns: int) -> bool:
    """Changed too recently, at `since_ns`, to be told apart from a later edit."""
    return max(st.st_mtime_ns, st.st_ctime_ns) >= since_ns - RACY_WINDOW_NS


def newest_change_ns(stats: bytes) -> int:
    """The latest mtime_ns or ctime_ns among packed stats (packed_stats), for the racy rule."""
    newest = 0
    for _, _, _, mtime, ctime in STAT.iter_unpack(stats):
        newest = max(newest, mtime, ctime)
    return newest
