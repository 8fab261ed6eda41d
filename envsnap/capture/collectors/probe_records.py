"""Reading the probe's files: each process's JSON record and the journal beside it.

A record (<host>-<pid>.json) is a picture taken at start, at init_process_group and at exit. Its
journal (<host>-<pid>.journal, envsnap/probe/runtime.py) holds, one JSON line each, every variable the
process read for the first time after its first record, appended before the read returned, and the
top-level modules it imported since, listed at most once a second. So the reads a record shows are
known up to:

  - the process's exit, when it wrote its exit record;
  - the moment the journal was read, when the record keeps one (the journal holds every later read,
    whether the process still runs or died without an exit record);
  - otherwise the record's last write (an older probe, or a journal that could not be written):
    later reads are not known, and "not read" may not be claimed past that moment.

`reads_until` (epoch seconds) and `reads_to_exit` say which, for the analysis.
"""
from __future__ import annotations

import json
import os
import stat
import time
from typing import Any, Dict, List, Optional, Tuple

MAX_RECORD_BYTES = 16 * 1024 * 1024
MAX_JOURNAL_BYTES = 16 * 1024 * 1024


def _read_regular(path: str, limit: int) -> Tuple[Optional[bytes], str]:
    """(bytes, "") of a regular file of at most `limit` bytes, else (None, why). O_NONBLOCK: a FIFO named
    like a record would block the collector; a link to /dev/zero would be read without end."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        return None, "absent"
    except PermissionError:
        return None, f"unreadable: permission denied ({_whose(path)})"
    except OSError as exc:
        return None, f"unreadable: {exc.strerror or exc}"
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None, "not a regular file"
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        return None, f"larger than {limit >> 20} MiB"
    return raw, ""


def _whose(path: str) -> str:
    """'owner root, mode 0600; envsnap runs as nobody': what the user needs to know to read it."""
    me = _user_name(os.geteuid())
    try:
        info = os.stat(path)
    except OSError:
        return f"envsnap runs as {me}"
    return f"owner {_user_name(info.st_uid)}, mode {stat.S_IMODE(info.st_mode):04o}; envsnap runs as {me}"


def _user_name(uid: int) -> str:
    import pwd

    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return f"uid {uid}"


def _journal_lines(raw: bytes) -> List[Dict[str, Any]]:
    """The journal's complete lines (a last line cut short by a write in progress is left out)."""
    out: List[Dict[str, Any]] = []
    for line in raw.split(b"\n")[:-1]:
        try:
            entry = json.loads(line.decode("utf-8", "surrogateescape"))
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def merge_journal(record: Dict[str, Any], directory: str, now: float) -> Optional[str]:
    """Fold the record's journal into it (reads, modules) and say how far its reads are known.
    Returns a problem with the journal, or None."""
    problem = None
    if "exit" in (record.get("stages") or []):
        record["reads_to_exit"] = True
    written = record.get("written_at")
    until = written if isinstance(written, (int, float)) and not isinstance(written, bool) else None
    name = record.get("journal")
    if isinstance(name, str) and name and os.sep not in name and not name.startswith("."):
        raw, why = _read_regular(os.path.join(directory, name), MAX_JOURNAL_BYTES)
        if raw is None and why != "absent":
            problem = f"journal {name}: {why}"
        else:
            until = now  # the journal holds every read up to this moment (see the module doc)
            reads: Dict[str, Any] = record["env_reads"] if isinstance(record.get("env_reads"), dict) else {}
            modules: Dict[str, Any] = record["modules"] if isinstance(record.get("modules"), dict) else {}
            listed = None
            for entry in _journal_lines(raw or b""):
                read = entry.get("read")
                if isinstance(read, str) and read not in reads:
                    reads[read] = 1
                opened = entry.get("opened")
                if isinstance(opened, str) and isinstance(entry.get("t"), (int, float)):
                    files = record.setdefault("files_opened", {})
                    if isinstance(files, dict):
                        files.setdefault(opened, entry["t"])
                found = entry.get("modules")
                if isinstance(found, dict):
                    for module, path in found.items():
                        if isinstance(module, str) and isinstance(path, str):
                            modules.setdefault(module, path)
                    listed = entry.get("t")
            record["env_reads"] = reads
            record["modules"] = modules
            if isinstance(listed, (int, float)) and not isinstance(listed, bool):
                record["modules_listed_at"] = listed
    elif record.get("journal_broken_at") is not None:
        problem = "the probe could not write its journal: reads after its last record are not known"
    if until is not None:
        record["reads_until"] = until
    return problem


def read_records(directory: str, me: Tuple[str, int]) -> Tuple[List[Dict[str, Any]], Dict[str, str]]:
    """Every probe record in `directory` with its journal folded in (the process `me` excluded), and
    per-file errors."""
    records: List[Dict[str, Any]] = []
    errors: Dict[str, str] = {}
    now = time.time()
    try:
        names = sorted(os.listdir(directory))
    except PermissionError:
        return [], {".": f"unreadable: cannot list the directory: permission denied ({_whose(directory)})"}
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        raw, why = _read_regular(os.path.join(directory, name), MAX_RECORD_BYTES)
        if raw is None:
            errors[name] = why if why.startswith("unreadable") else f"{why}: not a probe record"
            continue
        try:
            record = json.loads(raw.decode("utf-8", "surrogateescape"))
        except ValueError as exc:
            errors[name] = f"unreadable: {exc}"
            continue
        if not isinstance(record, dict) or not isinstance(record.get("pid"), int) or "probe_version" not in record:
            errors[name] = "not a probe record"
            continue
        if (record.get("host"), record.get("pid")) == me:
            continue
        record["file"] = name
        problem = merge_journal(record, directory, now)
        if problem:
            errors[name] = problem
        records.append(record)
    return records, errors
