"""The environment-variable-like names a shared object's strings contain: who *can* read a variable.

A C or C++ library reads a variable with getenv("NAME"): the name is a string literal, stored
whole in the object's read-only data (NCCL's NCCL_PARAM builds each name as the one literal
"NCCL_" #name, NCCL src/include/param.h). So the names an object can read are among the tokens of
its string sections (elf.py says where they lie): maximal runs of the bytes [A-Z0-9_] that start
with a letter or '_', hold a letter and are MIN_NAME..MAX_NAME long. Every all-caps token is kept,
with or without an underscore (HOME and TMPDIR are variables too); lower-case names (http_proxy)
are not.

What this cannot see, and so where "no loaded code mentions it" does not hold:
- a name built at run time (snprintf("%s_%s", prefix, name), a Python f-string);
- a name the compiler stored as instruction immediates (a short std::string built in place) or
  obfuscated on purpose (the CUDA driver library is known to hide its strings);
- a linker that merged a literal into the tail of a longer one ("NUM_THREADS" stored inside
  "OMP_NUM_THREADS\\0"): `mentions` treats a name that ends a token as mentioned, so this case
  is over-counted, never missed.

The scan reads the sections with os.pread in CHUNK-byte pieces (never mmap: a file truncated while
mapped raises SIGBUS in the reader), translates every other byte to a space and splits: memory
stays bounded by the chunk, and a 17 MB .rodata (libtorch_cpu.so 2.13) takes ~0.1 s.
"""
from __future__ import annotations

import bisect
import os
import re
from typing import Callable, Iterable, List, Optional, Sequence, Set, Tuple

MIN_NAME = 3
MAX_NAME = 128
CHUNK = 8 << 20
_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_TABLE = bytes(c if c in _KEEP else 0x20 for c in range(256))
_NOT_NAME = re.compile(rb"[^A-Z0-9_]")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZ")
# Imported symbols (in the dynamic string table) by which C code reads the environment: glibc's
# getenv(3) and secure_getenv(3), and glibc's internal __libc_secure_getenv / __secure_getenv.
GETENV_SYMBOLS = (b"getenv", b"secure_getenv", b"__secure_getenv", b"__libc_secure_getenv")


def _tokens(buffer: bytes) -> Set[bytes]:
    return set(buffer.translate(_TABLE).split())


def _keep(token: bytes) -> bool:
    return MIN_NAME <= len(token) <= MAX_NAME and not token[:1].isdigit()


def scan(fd: int, ranges: Sequence[Tuple[int, int]], chunk: int = CHUNK,
         on_chunk: Optional[Callable[[int], None]] = None) -> Tuple[List[str], int]:
    """(sorted names, bytes read) over the (offset, size) ranges of the open file `fd`.

    A token cut by a chunk boundary is carried into the next chunk (at most MAX_NAME bytes: a
    longer run is no variable name). `on_chunk(bytes_read)` is called after each chunk (tests
    replace the file there)."""
    found: Set[bytes] = set()
    total = 0
    for offset, size in ranges:
        carry = b""
        skip_run = False  # the chunk starts inside a run longer than MAX_NAME: no name
        end = offset + size
        at = offset
        while at < end:
            piece = os.pread(fd, min(chunk, end - at), at)
            if not piece:
                break  # the file is shorter than its headers said: it changed; the caller checks
            at += len(piece)
            total += len(piece)
            data = carry + piece
            if skip_run:
                match = _NOT_NAME.search(data)
                data = data[match.start():] if match else b""
            # The last run of name bytes may continue in the next chunk (a longer run is no name).
            cut = len(data)
            if at < end:
                floor = max(0, cut - MAX_NAME - 1)
                while cut > floor and data[cut - 1] in _KEEP:
                    cut -= 1
            skip_run = at < end and cut == max(0, len(data) - MAX_NAME - 1) and cut > 0 and data[cut - 1] in _KEEP
            carry = b"" if skip_run else data[cut:]
            found |= _tokens(data if skip_run else data[:cut])
            if on_chunk is not None:
                on_chunk(total)
        if carry:
            found |= _tokens(carry)
    names = sorted({t.decode("ascii") for t in found if _keep(t)})
    return [n for n in names if not _LETTERS.isdisjoint(n)], total


def imports_getenv(fd: int, dynstr: Optional[Tuple[int, int]], limit: int = 64 << 20) -> Optional[bool]:
    """Whether the dynamic string table names a getenv function (None when there is no table)."""
    if dynstr is None or dynstr[1] <= 0 or dynstr[1] > limit:
        return None
    raw = b"\0" + os.pread(fd, dynstr[1], dynstr[0]) + b"\0"
    return any(b"\0" + symbol + b"\0" in raw or b"\0" + symbol + b"@" in raw for symbol in GETENV_SYMBOLS)


class NameIndex:
    """A library's names, asked whether it mentions a name: the name itself, or a token it ends
    (a literal merged into the tail of a longer one). Built once per library, O(log n) a question."""

    __slots__ = ("_exact", "_reversed")

    def __init__(self, names: Iterable[str]) -> None:
        self._exact = frozenset(names)
        self._reversed = sorted(name[::-1] for name in self._exact)

    def mentions(self, name: str) -> bool:
        if name in self._exact:
            return True
        key = name[::-1]
        i = bisect.bisect_left(self._reversed, key)
        return i < len(self._reversed) and self._reversed[i].startswith(key)
