"""Compare installed files with the hashes their installer wrote into RECORD.

pip writes one line per installed file into `<dist>.dist-info/RECORD`:
`path,sha256=<urlsafe base64 digest without padding>,size` (the wheel spec,
"The .dist-info directory"). Paths are relative to the distribution's location (the
site-packages directory); scripts land outside it (`../../../bin/x`). Re-hashing the
files on disk and comparing finds an edited `sglang/srt/layers/moe/topk.py` without any
pristine copy.

Hashing is file_hashing.py's (fast, against the deadline: whatever was not checked is counted,
never dropped silently). Every file is hashed once even when several RECORDs list it (the nvidia-*
wheels all ship `nvidia/__init__.py`). With the hash cache (envsnap/capture/hashcache.py) a file
whose stat is unchanged since an earlier capture is not read again, and a distribution whose RECORD
and files are all unchanged since a capture found them intact is not even parsed again: a second
capture of an unchanged torch venv does one stat per file.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import os
import posixpath
import re
import stat
import time
from typing import Any, Dict, Iterable, List, NamedTuple, Optional, Tuple, Union

from envsnap.capture import filestat, hashcache
from envsnap.capture.collectors import builds, file_hashing
from envsnap.model.keys import integrity_entry
from envsnap.model.names import COMPILED_SUFFIXES, is_compiled_file

# RECORD lists these without a hash on purpose (wheel spec: RECORD cannot hash itself;
# installers add compiled bytecode after the fact).
_UNHASHED_BY_DESIGN = ("RECORD", "RECORD.jws", "RECORD.p7s")
_SCRIPT_DIRS = ("bin", "Scripts")
# pip#10744: pip rewrote a wheel script's `#!python` placeholder to the real interpreter
# but kept the wheel's hash and size in RECORD. Putting a placeholder back and
# re-hashing proves that only the first line differs.
_PLACEHOLDERS = (b"#!python\n", b"#!python\r\n", b"#!pythonw\n", b"#!pythonw\r\n")
_MAX_SCRIPT_BYTES = 4 << 20  # a bigger "script" is not read whole for that proof

_B64_VALUE = re.compile(r"[A-Za-z0-9_-]*")  # RECORD's urlsafe base64 alphabet, padding stripped
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_known_algorithms: Dict[str, int] = {}  # name -> digest size, for RECORD's hash names


class Entry:
    """One hashed RECORD line, resolved to a file on disk."""

    __slots__ = ("dist", "rel", "path", "algorithm", "digest", "size", "script")

    def __init__(self, dist: str, rel: str, path: str, algorithm: str, digest: str,
                 size: Optional[int], script: bool) -> None:
        self.dist = dist
        self.rel = rel  # the path exactly as RECORD writes it
        self.path = path  # absolute, normalised
        self.algorithm = algorithm
        self.digest = digest  # urlsafe base64 without padding, as in RECORD
        self.size = size
        self.script = script  # installed into the scripts directory (bin/, Scripts/)


def _digest_size(algorithm: str) -> int:
    if algorithm not in _known_algorithms:
        try:
            _known_algorithms[algorithm] = hashlib.new(algorithm).digest_size
        except (ValueError, TypeError):
            _known_algorithms[algorithm] = 0
    return _known_algorithms[algorithm]


def parse_record(dist: str, location: str, text: str, mode: str) -> Dict[str, Any]:
    """Split one RECORD into entries to hash, entries to check by size, unhashable files,
    malformed lines, and the facts of the build (its compiled files, its own files).

    mode "py" hashes `.py` and `.pth` files and scripts (what Python executes) and checks every
    other hashed file by a stat: it exists, with the recorded size (a deleted extension module
    is found without reading it); "all" hashes every hashed file (shared libraries included:
    `--deep`). This loop runs for every line of every RECORD (24,000 in a torch venv), so it
    avoids per-line os.path work for the common plain relative path.
    """
    import csv

    entries: List[Entry] = []
    sized: List[Sized] = []
    unhashable: List[str] = []
    errors: Dict[str, str] = {}
    compiled: List[Tuple[str, str]] = []
    content: List[Tuple[str, str]] = []
    prefix = location.rstrip(os.sep) + os.sep
    everything = mode == "all"
    executed = (".py", ".pth")
    compiled_suffixes = COMPILED_SUFFIXES
    digest_sizes = _known_algorithms
    valid_b64 = _B64_VALUE.fullmatch
    for row in csv.reader(text.splitlines()):
        if not row or not row[0]:
            continue
        rel = row[0]
        recorded = row[1] if len(row) > 1 else ""
        if not recorded:
            unhashable.append(rel)
            continue
        outside = rel.startswith(("../", "..\\"))
        if rel.endswith(compiled_suffixes) or (".so." in rel and is_compiled_file(rel)):
            compiled.append((rel, recorded))
        if not outside and ".dist-info/" not in rel and not rel.endswith(".pth"):
            content.append((rel, recorded))  # what the build installed, not the installer (builds.py)
        if rel.startswith("/"):  # some old installers wrote absolute paths
            path = os.path.normpath(rel)
        elif outside or "./" in rel or "//" in rel or "\\" in rel:
            path = os.path.normpath(prefix + rel.replace("\\", "/"))
        else:
            path = prefix + rel
        script = outside and os.path.basename(os.path.dirname(path)) in _SCRIPT_DIRS
        size_text = row[2] if len(row) > 2 else ""
        size = int(size_text) if size_text.isdigit() else None
        if not (everything or script or rel.endswith(executed)):
            # Checked by a stat: its hash is read (entry_of) only if the stat calls for hashing it.
            sized.append(Sized(dist, rel, path, size, recorded))
            continue
        algorithm, _, value = recorded.partition("=")
        # Compared as text (the actual digest is encoded the same way): encoding one
        # digest is cheaper than decoding every recorded one. The length check catches
        # a truncated or foreign value; _recorded_hex decodes it when it is reported.
        value = value.rstrip("=")
        size_bytes = digest_sizes.get(algorithm)
        if size_bytes is None:
            size_bytes = _digest_size(algorithm)
        if not size_bytes or len(value) != (size_bytes * 4 + 2) // 3 or valid_b64(value) is None:
            errors[rel] = f"unreadable hash in RECORD: {recorded[:80]}"
            continue
        entries.append(Entry(dist, rel, path, algorithm, value, size, script))
    return {"entries": entries, "sized": sized, "unhashable": unhashable, "errors": errors,
            "compiled": compiled, "content": content}


class Sized(NamedTuple):
    """A RECORD line checked by a stat alone (exists, recorded size): parse_record's cheap form."""
    dist: str
    rel: str
    path: str
    size: Optional[int]
    recorded: str  # "<algorithm>=<digest>" as RECORD writes it


def entry_of(item: Sized) -> Tuple[Optional[Entry], Optional[str]]:
    """The hashed entry of a line checked by size whose file must be hashed after all (another
    size, not a regular file), or (None, why its recorded hash is unreadable)."""
    algorithm, _, value = item.recorded.partition("=")
    value = value.rstrip("=")
    size_bytes = _digest_size(algorithm)
    if not size_bytes or len(value) != (size_bytes * 4 + 2) // 3 or _B64_VALUE.fullmatch(value) is None:
        return None, f"unreadable hash in RECORD: {item.recorded[:80]}"
    return Entry(item.dist, item.rel, item.path, algorithm, value, item.size, False), None


class RecordFile:
    """A RECORD on disk, given to `verify` instead of its text: read only when the hash cache
    cannot vouch for its distribution (the cache knows it by its stat key, taken before it is
    read, under the same rule as every other file)."""

    __slots__ = ("path",)

    def __init__(self, path: str) -> None:
        self.path = path


def _record_identity(record: Any) -> Tuple[Optional[str], Optional[os.stat_result]]:
    """(identity for the hash cache's verdicts, the RECORD's stat when it is a file)."""
    if isinstance(record, RecordFile):
        try:
            st = os.stat(record.path)
        except OSError:
            return None, None
        return "stat:" + filestat.stat_key(st).strip().replace(" ", ","), st
    return "sha256:" + hashlib.sha256(record.encode("utf-8", "surrogateescape")).hexdigest(), None


def _record_text(record: Any) -> Tuple[str, Optional[str]]:
    """(RECORD text, None) or ("", why it could not be read)."""
    if not isinstance(record, RecordFile):
        return record, None
    try:
        with open(record.path, encoding="utf-8") as handle:
            return handle.read(), None
    except (OSError, UnicodeDecodeError) as exc:
        return "", f"RECORD unreadable: {getattr(exc, 'strerror', None) or exc}"


def verify(records: Iterable[Tuple[Any, ...]], mode: str = "py", stop_at: Optional[float] = None,
           workers: Optional[int] = None, use_cache: Optional[bool] = None) -> Dict[str, Any]:
    """Check every (dist, location, RECORD text or RecordFile[, WHEEL text]); return the `integrity`
    section layout, with `builds` ({dist: its build record}, builds.py) for the caller to place.

    Hashed entries are hashed (`checked_files`); the others are checked by one stat each
    (`size_checked`): a missing file is "missing", one of another size is hashed and reported
    like any modified file. A RecordFile's WHEEL is read beside it; a RECORD given as text has
    its WHEEL text as the optional fourth item.
    `stop_at` is a time.monotonic() value: files not checked by then are counted in
    `not_checked` (per distribution), so a short --timeout never hides anything.
    `use_cache`: True reuses the hashes of files unchanged since an earlier capture
    (hashcache.py) and False hashes everything (--no-cache); either way the result gets
    a `hash_cache` entry saying where the hashes came from. None: no cache, no entry.
    """
    result: Dict[str, Any] = {
        "mode": mode, "checked_files": 0, "size_checked": 0, "modified": {}, "missing": {},
        "rewritten_scripts": {}, "unhashable": {"count": 0, "by_dist": {}, "files": {}},
        "not_checked": {"count": 0, "by_dist": {}},
        "errors": {}, "builds": {},
    }
    records = list(records)
    cache = hashcache.HashCache.open({item[1] for item in records}) if use_cache else None
    by_path: Dict[str, List[Entry]] = {}
    by_size: Dict[str, List[Sized]] = {}  # files checked by a stat alone (see parse_record)
    fresh: List[_Fresh] = []  # dists checked file by file
    # The files of every remembered verdict, stat'ed before the loop reads them (by several processes where the
    # machine has the CPUs and forking is safe: hashcache.stat_verdict_files).
    verdict_stats = (cache.stat_verdict_files([_verdict_key(item[0], item[1], mode) for item in records],
                                              file_hashing.stat_processes())
                     if cache is not None and (stop_at is None or time.monotonic() < stop_at) else {})
    for item in records:
        dist, location, record = item[0], item[1], item[2]
        record_id, record_stat = _record_identity(record) if cache is not None else (None, None)
        if record_id is not None and cache is not None and (stop_at is None or time.monotonic() < stop_at):
            key = _verdict_key(dist, location, mode)
            known = cache.verdict(key, record_id, verdict_stats.get(key, hashcache.NOT_GIVEN))
            if known is not None:
                # The same RECORD and every file it lists unchanged since a capture found them
                # all as recorded: the same findings, without parsing or hashing anything.
                result["checked_files"] += known.entries
                result["size_checked"] += known.sized
                if known.build is not None:
                    result["builds"][dist] = known.build
                _add_record_findings(result, dist, known.errors, known.unhashable_count, known.unhashable_named)
                continue
        text, unreadable = _record_text(record)
        if unreadable:
            rel = os.path.relpath(record.path, location)
            result["errors"][integrity_entry(rel, dist, result["errors"])] = {"dist": dist, "error": unreadable}
            continue
        parsed = parse_record(dist, location, text, mode)
        wheel = _wheel(record, item[3] if len(item) > 3 else None)
        build = builds.build_record(wheel.fields, parsed["compiled"], parsed["content"])
        result["builds"][dist] = build
        for entry in parsed["entries"]:
            by_path.setdefault(entry.path, []).append(entry)
        for item in parsed["sized"]:
            found = by_size.get(item.path)
            if found is None:
                by_size[item.path] = [item]
            else:
                found.append(item)
        named = [rel for rel in parsed["unhashable"]
                 # Bytecode and RECORD itself carry no hash by design; anything else without
                 # one (a .py, a .so) cannot be verified and is named so it can be looked at.
                 if not (rel.endswith((".pyc", ".pyo")) or posixpath.basename(rel) in _UNHASHED_BY_DESIGN)]
        _add_record_findings(result, dist, parsed["errors"], len(parsed["unhashable"]), named)
        fresh.append(_Fresh(dist, location, record_id, record_stat,
                            {"errors": parsed["errors"], "unhashable": len(parsed["unhashable"]), "named": named,
                             "build": build},
                            parsed["entries"] + parsed["sized"], wheel))

    # Hashed anyway (for another entry), or another size or not a regular file: hashed, and
    # reported like any other hashed file.
    to_hash = [p for p in by_size if p in by_path]
    sizes = _stat_sized({p: items for p, items in by_size.items() if p not in by_path}, stop_at)
    to_hash += [p for p, (status, _) in sizes.items() if status == "hash"]
    for path in to_hash:
        for item in by_size.pop(path):
            entry, unreadable = entry_of(item)
            if entry is None:
                result["errors"][integrity_entry(item.rel, item.dist, result["errors"])] = {"dist": item.dist,
                                                                                        "error": unreadable}
            else:
                by_path.setdefault(path, []).append(entry)
    outcomes = file_hashing.hash_all(by_path, stop_at, workers or file_hashing.default_workers(), cache)
    if cache is not None:
        cache.record_many()
    as_recorded: Dict[str, bool] = {}  # path -> every RECORD entry for it matched (for the cache)
    for path in sorted(by_path):
        status, info = outcomes.get(path, ("not_checked", None))
        matched = True
        for entry in by_path[path]:
            matched = _classify(result, entry, status, info) and matched
        as_recorded[path] = matched
    intact = [path for path, (status, _) in sizes.items() if status == "ok"]
    as_recorded.update(dict.fromkeys(intact, True))
    result["size_checked"] += sum(map(len, map(by_size.__getitem__, intact)))
    for path in sorted(by_size.keys() - set(intact)):  # the findings, in path order
        status, info = sizes.get(path, ("not_checked", None))
        for item in by_size[path]:
            _classify(result, item, status, info)
        as_recorded[path] = False
    if cache is not None:
        for dist, location, record_id, record_stat, findings, entries, wheel in fresh:
            # (A RECORD with nothing to check in this mode still has its own findings to remember.)
            if record_id and all(as_recorded.get(entry.path) for entry in entries):
                hashed = sum(1 for entry in entries if entry.path in by_path)
                paths = [entry.path for entry in entries]
                stats = {path: filestat.packed_stat(sizes[path][1]) for path in paths if path in by_size}
                if wheel.path is not None and wheel.stat is not None:
                    paths.append(wheel.path)  # listed by RECORD too, normally: then its stat is there already
                    stats.setdefault(wheel.path, filestat.packed_stat(wheel.stat))
                cache.record_verdict(_verdict_key(dist, location, mode), record_id,
                                     dict(findings, entries=hashed, sized=len(entries) - hashed), paths,
                                     record_stat, stats)
        cache.save(stop_at)
        result["hash_cache"] = cache.summary()
    elif use_cache is not None:
        result["hash_cache"] = hashcache.disabled_summary(
            sum(1 for status, _ in outcomes.values() if status != "not_checked"))
    if result["not_checked"]["count"]:
        result["not_checked"]["reason"] = "capture deadline reached before these files were checked"
    return result


class _Wheel(NamedTuple):
    fields: Optional[Dict[str, Any]]  # builds.parse_wheel's, None without a WHEEL file
    path: Optional[str]
    stat: Optional[os.stat_result]  # taken before it was read (the verdict keeps it)


class _Fresh(NamedTuple):
    """A distribution checked file by file: what its verdict needs once the files are checked."""
    dist: str
    location: str
    record_id: Optional[str]
    record_stat: Optional[os.stat_result]
    findings: Dict[str, Any]
    entries: List[Entry]
    wheel: _Wheel


_MAX_WHEEL_BYTES = 64 << 10  # a WHEEL file is a few lines; anything bigger is not one


def _wheel(record: Any, text: Optional[str]) -> _Wheel:
    """The WHEEL file beside a RECORD on disk (or the text given with a RECORD given as text)."""
    if not isinstance(record, RecordFile):
        return _Wheel(builds.parse_wheel(text) if text is not None else None, None, None)
    path = os.path.join(os.path.dirname(record.path), "WHEEL")
    try:
        fd = os.open(path, file_hashing.OPEN_FLAGS)
    except OSError:
        return _Wheel(None, None, None)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return _Wheel(None, None, None)
        data = os.read(fd, _MAX_WHEEL_BYTES)
    except OSError:
        return _Wheel(None, None, None)
    finally:
        os.close(fd)
    return _Wheel(builds.parse_wheel(data.decode("utf-8", "replace")), path, info)


# Files between two looks at the deadline (time.monotonic costs as much as a stat).
_STAT_BATCH = 256


def _stat_sized(by_size: Dict[str, List[Sized]], stop_at: Optional[float]) -> Dict[str, Tuple[str, Any]]:
    """One stat of each file checked by size: ("ok", stat) when it is a regular file of every
    recorded size, ("missing", None), ("error", text), ("not_checked", None) after the deadline,
    or ("hash", None): another size or not a regular file, to be hashed and reported. The stats
    of a batch are taken by one C-level map; a batch where one fails is taken file by file."""
    out: Dict[str, Tuple[str, Any]] = {}
    regular = stat.S_ISREG
    paths = list(by_size)
    for start in range(0, len(paths), _STAT_BATCH):
        batch = paths[start:start + _STAT_BATCH]
        if stop_at is not None and time.monotonic() >= stop_at:
            out.update((p, ("not_checked", None)) for p in paths[start:])
            break
        try:
            stats: List[Any] = list(map(os.stat, batch))
        except (OSError, ValueError):
            stats = list(map(_stat_or_error, batch))
        for path, st in zip(batch, stats):
            if type(st) is tuple:
                out[path] = st
                continue
            size = st.st_size
            items = by_size[path]
            if regular(st.st_mode) and (items[0].size in (None, size) if len(items) == 1 else
                                        all(item.size in (None, size) for item in items)):
                out[path] = ("ok", st)
            else:
                out[path] = ("hash", None)
    return out


def _stat_or_error(path: str) -> Any:
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return ("missing", None)
    except (OSError, ValueError) as exc:
        return ("error", f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}")


def _verdict_key(dist: str, location: str, mode: str) -> str:
    return f"{dist}\0{location}\0{mode}"


def _add_record_findings(result: Dict[str, Any], dist: str, errors: Dict[str, str], unhashable: int,
                         named: List[str]) -> None:
    """What a RECORD itself says, whatever the files hold: lines with unreadable hashes, and
    files listed without a hash (counted; those not without one by design, named)."""
    for rel, error in errors.items():
        result["errors"][integrity_entry(rel, dist, result["errors"])] = {"dist": dist, "error": error}
    if unhashable:
        result["unhashable"]["count"] += unhashable
        result["unhashable"]["by_dist"][dist] = unhashable
        for rel in named:
            result["unhashable"]["files"][integrity_entry(rel, dist, result["unhashable"]["files"])] = {"dist": dist}


def _classify(result: Dict[str, Any], entry: Union[Entry, "Sized"], status: str, info: Any) -> bool:
    """Record one entry's finding; True when the file is exactly as RECORD says (a Sized entry
    comes here only when it is missing, unreadable or not checked: no digests)."""
    if status == "not_checked":
        result["not_checked"]["count"] += 1
        by_dist = result["not_checked"]["by_dist"]
        by_dist[entry.dist] = by_dist.get(entry.dist, 0) + 1
        return False
    if status == "missing":
        result["missing"][integrity_entry(entry.rel, entry.dist, result["missing"])] = {"dist": entry.dist}
        return False
    if status == "error":
        result["errors"][integrity_entry(entry.rel, entry.dist, result["errors"])] = {"dist": entry.dist, "error": info}
        return False
    if not isinstance(entry, Entry):  # a Sized entry found intact: counted by the caller
        return True
    digests, size = info
    result["checked_files"] += 1
    actual = digests[entry.algorithm]
    if _urlsafe(actual) == entry.digest and (entry.size is None or entry.size == size):
        return True
    record = {
        "dist": entry.dist,
        f"recorded_{entry.algorithm}": _recorded_hex(entry.digest),
        f"actual_{entry.algorithm}": actual.hex(),
        "recorded_size": entry.size,
        "actual_size": size,
    }
    if entry.script:
        evidence = shebang_evidence(entry)
        if evidence is not None:
            record.update(evidence)
            result["rewritten_scripts"][integrity_entry(entry.rel, entry.dist, result["rewritten_scripts"])] = record
            return False
    result["modified"][integrity_entry(entry.rel, entry.dist, result["modified"])] = record
    return False


def shebang_evidence(entry: Entry) -> Optional[Dict[str, Any]]:
    """Why a script that does not match RECORD is taken for a rewritten shebang, or None.

    Evidence used, strongest first:
    1. (always required) RECORD installs it into the scripts directory (`../../../bin/x`)
       and its first line is a `#!` line. Installers rewrite exactly that line (pip's
       `#!python` placeholder, pip#10744), and so do venv relocation tools (Docker
       multi-stage copies, dh-virtualenv, conda's prefix replacement).
    2. (`verified`: true) putting pip's `#!python` placeholder back in place of the
       first line reproduces the recorded hash and size: only the shebang differs.
       When the original first line was another interpreter path (a moved venv) it
       cannot be reconstructed, so the script is classified on (1) alone; its actual
       hash is kept, so an edit between two captures still shows up in a diff.
    A script without a `#!` line (a binary launcher) that does not match is reported
    as modified.
    """
    try:
        with open(entry.path, "rb") as handle:
            data = handle.read(_MAX_SCRIPT_BYTES + 1)
    except OSError:
        return None
    if not data.startswith(b"#!"):
        return None
    first_end = data.find(b"\n") + 1 or len(data)
    shebang = data[:first_end].rstrip(b"\r\n").decode("utf-8", "replace")[:300]
    verified = False
    if len(data) <= _MAX_SCRIPT_BYTES:
        body = data[first_end:]
        for placeholder in _PLACEHOLDERS:
            if entry.size is not None and len(placeholder) + len(body) != entry.size:
                continue
            if _urlsafe(hashlib.new(entry.algorithm, placeholder + body).digest()) == entry.digest:
                verified = True
                break
    return {
        "shebang": shebang,
        "verified": verified,
        "evidence": ("scripts dir + #! line; restoring pip's #!python placeholder reproduces the RECORD hash"
                     if verified else "scripts dir + #! line (the original first line cannot be reconstructed)"),
    }


def _urlsafe(digest: bytes) -> str:
    """RECORD's encoding: urlsafe base64 without padding (wheel spec)."""
    return binascii.b2a_base64(digest, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")


def _recorded_hex(value: str) -> str:
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()
