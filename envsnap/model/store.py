"""The snapshot file on disk: the only module that reads or writes snapshot files.

Writes are atomic and never overwrite without force; reads are bounded, strict and validated (schema.py)
before anyone sees the data, so a damaged or hostile file is one clear error. Same input, byte-identical
output: keys are sorted, collectors sort their lists. `-` is stdout.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import stat
import sys
import time
import zlib
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple, Union

from envsnap.errors import EnvsnapError
from envsnap.model.schema import (
    FAST_PARSER_FLOAT_LIMIT,
    _join_path,
    _short_path,
    validate,
)

try:  # a dependency, but envsnap reads the same without it: see _fast_parse
    import orjson as _orjson
except ImportError:  # pragma: no cover - depends on the environment
    _orjson = None  # type: ignore[assignment]

# A snapshot over this size is not something envsnap wrote: refuse instead of exhausting memory.
MAX_SNAPSHOT_BYTES = 512 * 1024 * 1024


def dumps(snapshot: Dict[str, Any]) -> str:
    """Canonical JSON text: sorted keys, 1-space indent, trailing newline."""
    return json.dumps(snapshot, sort_keys=True, indent=1, ensure_ascii=False, allow_nan=False, default=_json_default) + "\n"


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset, tuple)):
        return sorted(obj, key=repr)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    return repr(obj)


def atomic_write_text(path: str, text: str, force: bool = False) -> None:
    """Write text to path atomically: a temp file in the same dir, fsync, then rename.

    `-` writes stdout. An existing file is kept unless force is set; on any failure the
    old file (if any) is intact and no temp file is left behind. The temp file is an
    anonymous O_TMPFILE where the filesystem has them: it gets a name only for the
    instant between link and rename, so even a kill -9 mid-write leaves nothing.
    """
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    atomic_write_bytes(path, text.encode("utf-8", "surrogateescape"), force=force)


def atomic_write_bytes(path: str, data: bytes, force: bool = False, durable: bool = True,
                       mode: Optional[int] = None) -> None:
    """atomic_write_text's writer, for bytes. `durable=False` skips the fsyncs: for a file
    that checks itself when read (the hash cache's checksum), where a crash may lose the
    new version but readers still see either the old file or the new one, never a mix.
    `mode` gives the file that mode instead of the replaced file's (or the umask's)."""
    path = os.path.abspath(path)
    directory = _check_target(path, path, force)
    fd, tmp = _write_temp(directory, data, durable)
    try:
        if mode is None:
            _give_final_mode(fd, path)
        else:
            os.fchmod(fd, mode)
        if not force and os.path.lexists(path):
            raise EnvsnapError(f"{path} exists; use --force to overwrite it")
        if tmp is None:
            tmp = _link_anonymous(fd, directory)
        os.replace(tmp, path)
        tmp = None
    except BaseException as exc:
        if isinstance(exc, OSError):
            raise EnvsnapError(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    finally:
        os.close(fd)
        if tmp is not None:
            _unlink_quietly(tmp)
    if not durable:
        return
    try:  # make the rename itself durable
        dir_fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
    except OSError:
        pass


def _unlink_quietly(path: str) -> None:
    """Remove a temp file on the way out of a failed write; its absence is fine."""
    try:
        os.unlink(path)
    except OSError:
        pass


def process_umask() -> int:
    """The umask, read without changing it (os.umask sets it, racing with other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return 0o022


def _give_final_mode(fd: int, path: str) -> None:
    """Temp files are created 0600; the result gets what a plain open() would have given it:
    the replaced file's mode, or 0666 minus the umask (a report is meant to be shared)."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        mode = 0o666 & ~process_umask()
    try:
        os.fchmod(fd, mode)
    except OSError:
        pass  # a filesystem without modes: keep what it gave


def _write_temp(directory: str, data: bytes, durable: bool = True) -> Tuple[int, Optional[str]]:
    """(open fd, temp name or None for an anonymous file) holding `data`, fsynced when durable."""
    fd, tmp = -1, None
    anonymous = getattr(os, "O_TMPFILE", 0)
    if anonymous:
        try:
            fd = os.open(directory, anonymous | os.O_WRONLY | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc:
            # Not supported by this kernel or filesystem: a named temp file instead.
            if exc.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL, errno.ENOTSUP):
                raise EnvsnapError(f"cannot write in {directory}: {exc.strerror or exc}") from None
            fd = -1
    if fd < 0:
        import tempfile

        try:
            fd, tmp = tempfile.mkstemp(prefix=".envsnap-", suffix=".tmp", dir=directory)
        except OSError as exc:
            raise EnvsnapError(f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        if durable:
            os.fsync(fd)
    except BaseException as exc:
        os.close(fd)
        if tmp is not None:
            _unlink_quietly(tmp)
        if isinstance(exc, OSError):
            where = "disk full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else (exc.strerror or str(exc))
            raise EnvsnapError(f"cannot write in {directory}: {where}") from None
        raise
    return fd, tmp


def _link_anonymous(fd: int, directory: str) -> str:
    """Give an O_TMPFILE file a (hidden, temporary) name next to its destination."""
    # linkat(AT_SYMLINK_FOLLOW) on /proc/self/fd/N, the way open(2) documents; passing a
    # src_dir_fd makes Python call linkat (plain link() would link the /proc symlink itself).
    proc_fd = os.open("/proc/self/fd", os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        for _ in range(100):
            name = os.path.join(directory, f".envsnap-{os.getpid()}-{os.urandom(4).hex()}.tmp")
            try:
                os.link(str(fd), name, src_dir_fd=proc_fd, follow_symlinks=True)
                return name
            except FileExistsError:
                continue
    finally:
        os.close(proc_fd)
    raise OSError(errno.EEXIST, "no free temporary name")


def save(snapshot: Dict[str, Any], path: str, force: bool = False) -> None:
    """Write a snapshot atomically. Unless it says redaction is off, every part outside the
    sections (runs, labels, notes: added after the capture's scrub) is scrubbed once more,
    so a secret cannot reach the file by a path that forgot to redact."""
    from envsnap.redact import scrub

    # Without redaction the scrub still turns undecodable bytes (an `attach --note` or a
    # `--label` given in a non-UTF-8 locale) into \xNN text: the file must stay UTF-8.
    redact = snapshot.get("redaction") != "off"
    snapshot = {key: (value if key in ("sections", "nodes") else scrub(value, redact=redact))
                for key, value in snapshot.items()}
    atomic_write_text(path, dumps(snapshot), force=force)


# How long an update waits for another process's update of the same file (each holds it for one read and
# one atomic write: well under a second for a snapshot of megabytes).
UPDATE_LOCK_WAIT_S = 120.0


@contextlib.contextmanager
def updating(path: str, wait_s: float = UPDATE_LOCK_WAIT_S) -> Iterator[None]:
    """Hold `path` for a read-modify-write (`attach`): concurrent updaters of one file take turns, so none
    writes over what another added. The lock is flock(2) on the file itself; a writer replaces the file
    (atomic rename), so a waiter that gets the lock checks that `path` is still the file it locked and
    otherwise locks the new one. Nothing is created beside the file."""
    import fcntl

    deadline = time.monotonic() + wait_s
    delay = 0.005
    while True:
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            raise EnvsnapError(f"{path}: no such file") from None
        except OSError as exc:
            raise EnvsnapError(f"{path}: cannot read: {exc.strerror or exc}") from None
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise EnvsnapError(f"{path}: not a regular file, cannot be rewritten")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise EnvsnapError(f"{path}: another process has been changing it for {wait_s:.0f} s; "
                                       "try again when it is done") from None
                time.sleep(delay)
                delay = min(delay * 2, 0.2)
                continue
            except OSError:
                pass  # a filesystem without flock: updates are atomic, only not serialised
            try:
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except OSError:
                same = False
            if same:
                yield
                return
        finally:
            os.close(fd)  # closing releases the lock


def _reject_duplicates(pairs: List[Tuple[str, Any]]) -> Dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):  # rare: find which key, for the message
        seen = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"duplicate key {key!r}")
            seen.add(key)
    return out


def _reject_constant(name: str) -> None:
    raise ValueError(f"invalid number {name}")


def parse(text: str, source: str = "<input>", shapes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Parse and validate snapshot text (sections typed by `shapes`, see schema.validate); raise
    EnvsnapError naming what is wrong."""
    fast = _fast_parse(text, source, shapes)
    if fast is not None:
        return fast
    return _parse_exact(text, source, shapes)


_COLON: Dict[type, Any] = {str: ":", bytes: b":"}
_UNICODE_ESCAPE: Dict[type, Any] = {str: "\\u003", bytes: b"\\u003"}


# Writing: anonymous temp file, fsync, link, rename; the replaced file's mode kept. Reading: size cap,
# devices and FIFOs refused; duplicate keys, NaN, lone surrogates and non-UTF-8 refused.
# Parsing: the standard library's json with hooks is the reference. orjson parses first (2x faster on big
# snapshots) and its answer is kept only when it provably equals the reference's: orjson refuses what
# json's hooks refuse (NaN, Infinity, lone surrogates, invalid UTF-8, nesting deeper than 1024), and what it
# would accept differently is detected: duplicate keys (it keeps the last: the text then has more `:`
# outside strings than the parsed data, counted by re-serialising) and integers beyond 64 bits (it makes
# floats of them: validation with FAST_PARSER_FLOAT_LIMIT refuses such floats). Anything else, an error or
# a validation failure, is read again by the reference, so every message and accepted value is its own.
def _fast_parse(doc: Union[str, bytes], source: str, shapes: Optional[Mapping[str, Any]] = None
                ) -> Optional[Dict[str, Any]]:
    """orjson's reading of a snapshot when it is provably the reference's; None otherwise."""
    if _orjson is None or not _room_to_parse(len(doc)):
        return None
    kind = type(doc)
    # A colon written as \u003a inside a string would spoil the count below.
    if _UNICODE_ESCAPE[kind] in doc:
        return None
    try:
        data = _orjson.loads(doc)
        # Pairs in the text (each has one colon outside strings) vs pairs kept: equal unless a
        # key was repeated. Colons inside strings are the same on both sides.
        if _colons(doc, _COLON[kind]) != _colons(_orjson.dumps(data), b":"):
            return None
        return validate(data, source, float_limit=FAST_PARSER_FLOAT_LIMIT, shapes=shapes)
    except Exception:  # noqa: BLE001 - refused, too deep to re-serialise, or odd: the reference decides
        return None


# orjson does not survive a failed allocation (under `ulimit -v` it crashes the process: SIGSEGV, no
# MemoryError), where the standard library's parser raises MemoryError, which the CLI says in one line. So
# orjson parses only where the address space left holds this many times the text (measured: a 16 MB file
# crashed it with 212 MB left and parsed with 252 MB; its buffers and objects together); without a limit, always.
_PARSE_ROOM_FACTOR = 24


def _room_to_parse(nbytes: int) -> bool:
    """Whether the process's address-space limit leaves room for orjson to parse `nbytes` of text."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
        if soft == resource.RLIM_INFINITY:
            return True
        with open("/proc/self/status", encoding="ascii", errors="replace") as handle:
            used = next((int(line.split()[1]) * 1024 for line in handle if line.startswith("VmSize:")), None)
    except (ImportError, OSError, ValueError):
        return True
    return used is None or soft - used > nbytes * _PARSE_ROOM_FACTOR


def has_fast_parser() -> bool:
    """Whether orjson is installed (see _fast_parse)."""
    return _orjson is not None


def parse_unchecked(raw: bytes) -> Optional[Any]:
    """orjson's parse of the bytes, neither proven equal to the reference's nor validated (None when
    orjson is missing or refuses them): only for a caller that has `fast_parse_accepts` prove it
    before using what it computed (model/pair.py)."""
    if _orjson is None or not _room_to_parse(len(raw)):
        return None
    try:
        return _orjson.loads(raw)
    except Exception:  # noqa: BLE001 - the reference parser decides
        return None


def fast_parse_accepts(raw: bytes, source: str, shapes: Optional[Mapping[str, Any]] = None) -> bool:
    """Whether `load_bytes` returns orjson's parse of these bytes, unchanged (else it raises, or reads
    them with the reference parser)."""
    return _fast_parse(raw, source, shapes) is not None


def _colons(text: Any, colon: Any) -> int:
    """How many colons the text holds (count(): no copy of a text of megabytes, whose fresh pages cost more than the scan)."""
    return int(text.count(colon))


def _parse_exact(text: str, source: str, shapes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """The reference reading: the standard library's json, strict by hooks."""
    if not text.strip():
        raise EnvsnapError(f"{source}: empty file, not a snapshot")
    try:
        data = json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant)
    except RecursionError:
        raise EnvsnapError(f"{source}: not a snapshot (JSON nested too deeply)") from None
    except ValueError as exc:
        msg = str(exc).splitlines()[0][:200]
        hint = " (truncated?)" if "Expecting" in msg or "Unterminated" in msg else ""
        raise EnvsnapError(f"{source}: not valid JSON{hint}: {msg}") from None
    if _SURROGATE_ESCAPE.search(text):
        _reject_lone_surrogates(data, source)
    return validate(data, source, shapes=shapes)


# JSON may spell a lone UTF-16 surrogate (\udcff): valid JSON, but not text: no UTF-8 output
# (a report, a terminal) can hold it. envsnap never writes one (undecodable bytes become
# \xNN text), so where the text has a surrogate escape, every string is checked.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89abcdefABCDEF][0-9a-fA-F]{2}")


def _reject_lone_surrogates(data: Any, source: str) -> None:
    stack = [("", data)]
    while stack:
        path, node = stack.pop()
        if isinstance(node, dict):
            for key, value in node.items():
                _check_text(key, _join_path(path, key), source)
                stack.append((_join_path(path, key), value))
        elif isinstance(node, list):
            stack.extend((f"{path}[{i}]", value) for i, value in enumerate(node))
        elif isinstance(node, str):
            _check_text(node, path, source)


def _check_text(text: str, path: str, source: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        bad = text[exc.start]
        raise EnvsnapError(f"{source}: {_short_path(path or '(top level)')} holds a lone surrogate "
                           f"(\\u{ord(bad):04x}), not text; not a snapshot envsnap wrote") from None


def load(path: str, shapes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Read and validate a snapshot file (`-` reads stdin). `shapes` ({section: shape}: the collectors'
    SECTION_SHAPES, which every envsnap command passes) types each section's data; without it a
    section's data is checked as any JSON object (depth and numbers only)."""
    return load_bytes(read_bytes(path), source_name(path), shapes)


def source_name(path: str) -> str:
    """How messages name the file at `path`."""
    return "<stdin>" if path == "-" else path


def read_bytes(path: str) -> bytes:
    """The bytes of a snapshot file (`-`: stdin), bounded; EnvsnapError for what cannot be one."""
    source = source_name(path)
    try:
        if path == "-":
            raw = _read_capped(sys.stdin.buffer, source)
        else:
            if os.path.isdir(path):
                raise EnvsnapError(f"{path}: is a directory, not a snapshot file")
            # O_NONBLOCK: opening a FIFO nobody writes to must not hang (a pipe from
            # process substitution, `<(cat s.json)`, already has its writer and reads fine).
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
            info = os.fstat(fd)
            mode = info.st_mode
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) or stat.S_ISSOCK(mode):
                os.close(fd)  # /dev/zero, /dev/tty, a disk: never a snapshot, and reading could not end
                raise EnvsnapError(f"{path}: a device, not a snapshot file")
            if stat.S_ISFIFO(mode):
                os.set_blocking(fd, True)
            with os.fdopen(fd, "rb") as handle:
                raw = _read_capped(handle, source, info.st_size if stat.S_ISREG(mode) else 0)
    except FileNotFoundError:
        raise EnvsnapError(f"{source}: no such file") from None
    except OSError as exc:
        raise EnvsnapError(f"{source}: cannot read: {exc.strerror or exc}") from None
    return raw


def load_bytes(raw: bytes, source: str, shapes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """A snapshot file's bytes parsed and validated (as `load`); `source` names the file in messages."""
    fast = _fast_parse(raw, source, shapes)
    if fast is not None:
        return fast
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvsnapError(f"{source}: not UTF-8 text (byte {exc.start}), not a snapshot") from None
    return _parse_exact(text, source, shapes)


def _read_capped(handle: Any, source: str, size: int = 0) -> bytes:
    """The whole stream, in chunks: binary data is refused at its first NUL and an oversized
    input at the cap, before either costs memory. A regular file's `size` (within the cap) is
    read in one piece first: one buffer instead of a fresh one per MiB (page faults cost more
    than the copy)."""
    chunks: List[bytes] = []
    total = 0
    first = size + 1 if 0 < size < MAX_SNAPSHOT_BYTES else 1 << 20
    at_start = True
    while True:
        chunk = handle.read(first)
        if at_start and chunk.startswith(_GZIP_MAGIC):
            return _gunzip_capped(chunk + _rest_capped(handle, source, len(chunk)), source)
        at_start = False
        first = 1 << 20
        if not chunk:
            return b"".join(chunks)
        if b"\x00" in chunk:
            raise EnvsnapError(f"{source}: binary data (NUL bytes), not a snapshot")
        total += len(chunk)
        if total > MAX_SNAPSHOT_BYTES:
            raise EnvsnapError(f"{source}: larger than {MAX_SNAPSHOT_BYTES >> 20} MiB, not a snapshot")
        chunks.append(chunk)


# A gzip-compressed snapshot (`gzip s.json`; the planted-regression corpus stores them so) is read as its content.
_GZIP_MAGIC = b"\x1f\x8b"


def _rest_capped(handle: Any, source: str, already: int) -> bytes:
    """The rest of a compressed stream, refused past the cap like any input."""
    chunks: List[bytes] = []
    total = already
    while True:
        chunk = handle.read(1 << 20)
        if not chunk:
            return b"".join(chunks)
        total += len(chunk)
        if total > MAX_SNAPSHOT_BYTES:
            raise EnvsnapError(f"{source}: larger than {MAX_SNAPSHOT_BYTES >> 20} MiB, not a snapshot")
        chunks.append(chunk)


def _gunzip_capped(compressed: bytes, source: str) -> bytes:
    """A gzip file's content (every member), a megabyte at a time: refused at the cap as it grows (a small file
    can expand to any size) and at the first NUL, as an uncompressed snapshot is."""
    chunks: List[bytes] = []
    total = 0
    data = compressed
    try:
        while data:
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
            pending = data
            while pending:
                chunk = inflater.decompress(pending, 1 << 20)
                pending = inflater.unconsumed_tail
                if b"\x00" in chunk:
                    raise EnvsnapError(f"{source}: binary data (NUL bytes) inside the gzip file, not a snapshot")
                total += len(chunk)
                if total > MAX_SNAPSHOT_BYTES:
                    raise EnvsnapError(f"{source}: larger than {MAX_SNAPSHOT_BYTES >> 20} MiB uncompressed, "
                                       "not a snapshot")
                chunks.append(chunk)
                if inflater.eof:
                    break
            if not inflater.eof:
                raise EnvsnapError(f"{source}: a gzip file cut short (truncated?), not a whole snapshot")
            data = inflater.unused_data  # a second gzip member follows (cat a.gz b.gz)
    except zlib.error as exc:
        raise EnvsnapError(f"{source}: not a valid gzip file ({exc})") from None
    return b"".join(chunks)


def check_writable(path: str, force: bool) -> None:
    """Fail early (before a long capture) when `path` could not be written."""
    if path == "-":
        return
    directory = _check_target(os.path.abspath(path), path, force)
    if not os.access(directory, os.W_OK):
        raise EnvsnapError(f"cannot write in {directory}: permission denied")


def _check_target(full: str, shown: str, force: bool) -> str:
    """The directory `full` would be written in, once it is known that `full` is no directory, is not
    overwritten without force, and has a directory to go in (messages name the path as `shown`)."""
    if os.path.isdir(full):
        raise EnvsnapError(f"{shown} is a directory")
    if os.path.lexists(full) and not force:
        raise EnvsnapError(f"{shown} exists; use --force to overwrite it")
    directory = os.path.dirname(full)
    if not os.path.isdir(directory):
        raise EnvsnapError(f"directory {directory} does not exist")
    return directory
