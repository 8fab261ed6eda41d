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
- a name the compiler stored as instruction immediates (a short std::string built in place), or one
  a vendor stored encoded (a closed-source library may keep its strings scrambled);
- a linker that merged a literal into the tail of a longer one ("PATH" stored inside
  "PYTHONPATH\\0"): the token is the longer name; lib_objects.mentions reports a checked name that
  only ends a token as "contains", so this case is over-counted, never missed.

The scan reads the sections with os.pread in CHUNK-byte pieces (never mmap: a file truncated while
mapped raises SIGBUS in the reader), translates every other byte to a space and splits: memory
stays bounded by the chunk, and a 17 MB .rodata (libtorch_cpu.so 2.13) takes ~0.1 s.
"""
from __future__ import annotations

import os
import re
from typing import Callable, List, Optional, Sequence, Set, Tuple

MIN_NAME = 3
MAX_NAME = 128
CHUNK = 8 << 20
_KEEP = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_TABLE = bytes(c if c in _KEEP else 0x20 for c in range(256))
_NOT_NAME = re.compile(rb"[^A-Z0-9_]")
_NAME = re.compile(rb"^(?=[0-9_]*[A-Z])[A-Z_][A-Z0-9_]{%d,%d}$" % (MIN_NAME - 1, MAX_NAME - 1), re.M)
# Imported symbols (in the dynamic string table) by which C code reads the environment: glibc's
# getenv(3) and secure_getenv(3), and glibc's internal __libc_secure_getenv / __secure_getenv.
GETENV_SYMBOLS = (b"getenv", b"secure_getenv", b"__secure_getenv", b"__libc_secure_getenv")


def scan(fd: int, ranges: Sequence[Tuple[int, int]], chunk: int = CHUNK,
         on_chunk: Optional[Callable[[int], None]] = None) -> Tuple[List[str], int]:
    """(sorted names, bytes read) over the (offset, size) ranges of the open file `fd`.

    A token cut by a chunk boundary is carried into the next chunk (at most MAX_NAME bytes: a
    longer run is no variable name). `on_chunk(bytes_read)` is called after each chunk (tests
    replace the file there)."""
    found: Set[bytes] = set()
    total = 0
    for offset, size in ranges:
        carry = b""  # the start of a run of name bytes that may go on in the next chunk
        skipping = False  # inside a run already longer than MAX_NAME: no name, up to its end
        end = offset + size
        at = offset
        while at < end:
            piece = os.pread(fd, min(chunk, end - at), at)
            if not piece:
                break  # the file is shorter than its headers said: it changed; the caller checks
            at += len(piece)
            total += len(piece)
            if skipping:
                match = _NOT_NAME.search(piece)
                if match is None:
                    continue
                data, skipping = piece[match.start():], False
            else:
                data = carry + piece
            translated = data.translate(_TABLE)
            last = len(data) if at >= end else translated.rfind(b" ") + 1
            found.update(translated[:last].split())
            tail = data[last:]
            carry, skipping = (b"", True) if len(tail) > MAX_NAME else (tail, False)
            if on_chunk is not None:
                on_chunk(total)
        if carry:
            found.add(carry)
    # One pass in C over all tokens: MIN_NAME..MAX_NAME long, not starting with a digit, a letter in it.
    kept = _NAME.findall(b"\n".join(found))
    return sorted(b"\n".join(kept).decode("ascii").split("\n")) if kept else [], total


def is_name(text: str) -> bool:
    """Whether `scan` can report this name (the token rule above)."""
    return _NAME.fullmatch(text.encode("ascii", "replace")) is not None


def imports_getenv(fd: int, dynstr: Optional[Tuple[int, int]], limit: int = 64 << 20) -> Optional[bool]:
    """Whether the dynamic string table names a getenv function (None when there is no table)."""
    if dynstr is None or dynstr[1] <= 0 or dynstr[1] > limit:
        return None
    raw = b"\0" + os.pread(fd, dynstr[1], dynstr[0]) + b"\0"
    return any(b"\0" + symbol + b"\0" in raw or b"\0" + symbol + b"@" in raw for symbol in GETENV_SYMBOLS)
