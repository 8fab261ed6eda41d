"""What ran, from the libraries section: which process loaded what, who can read a variable, what changed.

Pure functions over loaded snapshots (the section's data contract is in
capture/collectors/libraries.py). The ranking calls them for its context and reads evidence:

- `loaded(section, pattern)`: which processes mapped an object whose name or path matches
  ("no measured process loaded libnccl");
- `who_can_read(snapshot, name)`: the loaded code that mentions a variable: shared objects whose
  strings name it (a whole literal, or the tail of a longer one), start-up hooks whose text names
  it, each with the processes that loaded it; and `gaps`, the reasons "nobody mentions it" would
  prove nothing here (a process whose maps were not read, an object not scanned, Python code whose
  reads the probe did not track, a name this capture did not look up). With no readers and no
  gaps, no code the measured processes loaded can read the variable -- except a name built at run
  time, which no scan of strings sees (libstrings.py says which cases those are);
- `library_changes(good, bad)`: per process key, an object added, removed, or the same name from
  another file or content ("scheduler_TP0 maps libnccl.so.2 from /usr/lib/... (2.18.3) instead of
  .../nvidia/nccl/lib/libnccl.so.2 (2.21.5)").
"""
from __future__ import annotations

import fnmatch
import os
import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from envsnap.model import keys
from envsnap.model.owners import owner_text
from envsnap.model.snapshot import as_dict, section_data

SECTION = "libraries"


class Loaded(NamedTuple):
    process: str  # a processes key, or "run/<key>" for the run command's own processes
    name: str  # soname or file name, as the process's objects map names it
    path: str
    version: str
    owner: str  # "torch 2.13.0", "dpkg libgomp1 12.2.0-14", "unknown"


class Reader(NamedTuple):
    kind: str  # "library" | "startup hook"
    path: str
    name: str  # soname / file name, or the hook's kind (pth, sitecustomize...)
    owner: str
    how: str  # "mentions" (a whole literal) | "contains" (the tail of a longer literal) | "hook mentions"
    processes: Tuple[str, ...]  # the processes that loaded it (run/<key> for the run's own); () for a hook


class ReadEvidence(NamedTuple):
    name: str
    checked: bool  # the capture looked this name up in every object's strings
    readers: Tuple[Reader, ...]
    gaps: Tuple[str, ...]  # why an empty `readers` would not prove that nothing can read it


class ObjectSide(NamedTuple):
    path: str
    version: str
    owner: str
    identity: str  # build-id, else sha256 (prefix), else ""


class LibraryChange(NamedTuple):
    process: str
    name: str
    kind: str  # "added" | "removed" | "changed"
    good: Optional[ObjectSide]
    bad: Optional[ObjectSide]
    summary: str


def _section(snap_or_section: Mapping[str, Any]) -> Dict[str, Any]:
    """The section's data, from a snapshot or from the data itself."""
    if "sections" in snap_or_section:
        return section_data(dict(snap_or_section), SECTION)
    return dict(snap_or_section)


def _info(table: Mapping[str, Any], path: str) -> Dict[str, Any]:
    return as_dict(table.get(path))


def process_entries(data: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """Every process of the section: its keys as they are, the run's own as run/<key>."""
    out: Dict[str, Dict[str, Any]] = {}
    for key, entry in (data.get("processes") or {}).items():
        if isinstance(entry, dict):
            out[str(key)] = entry
    for key, entry in (data.get("run_processes") or {}).items():
        if isinstance(entry, dict):
            out[keys.run_process(str(key))] = entry
    return out


def _objects_of(entry: Mapping[str, Any]) -> Dict[str, str]:
    objects = entry.get("objects")
    return {str(k): str(v) for k, v in objects.items()} if isinstance(objects, dict) else {}


def loaded(snap_or_section: Mapping[str, Any], pattern: str) -> List[Loaded]:
    """The objects whose name or path matches `pattern` (fnmatch, e.g. "libnccl.so*", "*/nvidia/nccl/*"),
    with the processes that mapped them, sorted by process and name."""
    return loaded_any(snap_or_section, [pattern])


def loaded_any(snap_or_section: Mapping[str, Any], patterns: Sequence[str]) -> List[Loaded]:
    """loaded() of any of `patterns`: each object once, sorted by process and name.

    Each distinct name and path is matched once (fnmatchcase's own translation, compiled once), through an
    index of who mapped what (_mapped_by): a snapshot of 1,500 processes mapping 150 objects each holds
    225,000 entries but only as many distinct files as its objects table."""
    data = _section(snap_or_section)
    table = data.get("objects") or {}
    # fnmatch.translate's expressions are whole-string matches ("(?s:...)\\Z"): one alternation of them matches
    # where any pattern does, in one call.
    if not patterns:
        return []
    matches = re.compile("|".join(fnmatch.translate(pattern) for pattern in patterns)).match
    by_name, by_path = _mapped_by(data)
    hits = {pair for name, pairs in by_name.items() if matches(name) for pair in pairs}
    hits.update(pair for path, pairs in by_path.items()
                if matches(path) or matches(path.rpartition("/")[2]) for pair in pairs)
    out = []
    for process, name, path in hits:
        info = _info(table, path)
        out.append(Loaded(process, name, path, str(info.get("version") or ""), owner_text(info)))
    out.sort(key=lambda hit: (hit.process, hit.name))
    return out


_Mapping = Tuple[str, str, str]  # (process, name, path)
# The index of the last few sections asked about, by the identity of their processes tables (each entry keeps
# its tables alive, so an identity is never reused while it is here).
_INDEXES: Dict[Tuple[int, int], Tuple[Any, Any, Tuple[Dict[str, List[_Mapping]], Dict[str, List[_Mapping]]]]] = {}


def _mapped_by(data: Mapping[str, Any]) -> Tuple[Dict[str, List[_Mapping]], Dict[str, List[_Mapping]]]:
    """({object name: its mappings}, {path: its mappings}) of every process of the section; built once per
    section (context asks about CUDA, threads and NCCL on each side)."""
    tables = (data.get("processes"), data.get("run_processes"))
    ident = (id(tables[0]), id(tables[1]))
    found = _INDEXES.get(ident)
    if found is not None and found[0] is tables[0] and found[1] is tables[1]:
        return found[2]
    by_name: Dict[str, List[_Mapping]] = {}
    by_path: Dict[str, List[_Mapping]] = {}
    for process, entry in process_entries(data).items():
        objects = entry.get("objects")
        if not isinstance(objects, dict):
            continue
        for name, path in objects.items():
            mapping = (process, str(name), str(path))
            by_name.setdefault(mapping[1], []).append(mapping)
            by_path.setdefault(mapping[2], []).append(mapping)
    if len(_INDEXES) >= 4:
        _INDEXES.pop(next(iter(_INDEXES)))
    _INDEXES[ident] = (tables[0], tables[1], (by_name, by_path))
    return by_name, by_path


def _is_python(entry: Mapping[str, Any]) -> bool:
    names = _objects_of(entry)
    exe = os.path.basename(str(entry.get("exe") or entry.get("title") or ""))
    return exe.startswith("python") or any(n.startswith("libpython") for n in names)


def probe_record_of(records: Mapping[str, Any], entry: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The probe record of a process whose maps were read: by the probe key the capture matched, else by any of
    its pids (a run command's process is seen once per run)."""
    key = entry.get("probe_key")
    record = records.get(key) if isinstance(key, str) else None
    if isinstance(record, dict):
        return record
    pids = {entry.get("pid"), *(entry.get("pids") or [])} - {None}
    return next((r for r in records.values() if isinstance(r, dict) and r.get("pid") in pids), None)


def _python_reads_tracked(snap: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    """Whether the probe tracked this process's Python reads (its record has env_reads)."""
    probe = section_data(dict(snap), "probe") if "sections" in snap else {}
    records = dict((probe or {}).get("command_records") or {})  # the run command's own processes
    records.update((probe or {}).get("records") or {})
    record = probe_record_of(records, entry)
    return isinstance(record, dict) and isinstance(record.get("env_reads"), dict)


def who_can_read(snap_or_section: Mapping[str, Any], name: str) -> ReadEvidence:
    """The loaded code that mentions `name`, and why its absence would not be proof (see the module doc).
    Given a whole snapshot, start-up hooks (python section) and the probe's tracked reads count too."""
    data = _section(snap_or_section)
    processes = process_entries(data)
    table = data.get("objects") or {}
    users: Dict[str, List[str]] = {}
    for process, entry in processes.items():
        for path in _objects_of(entry).values():
            users.setdefault(path, []).append(process)
    readers: List[Reader] = []
    for path, info in sorted(table.items()):
        if not isinstance(info, dict):
            continue
        how = ("mentions" if name in (info.get("mentions") or []) else
               "contains" if name in (info.get("contains") or []) else "")
        if how:
            readers.append(Reader("library", str(path), str(info.get("name") or os.path.basename(str(path))),
                                  owner_text(info), how, tuple(sorted(users.get(str(path), [])))))
    gaps: List[str] = []
    checked = name in set(data.get("checked_names") or [])
    if not checked:
        gaps.append(f"{name} was not looked up in the objects' strings (not in any environment this capture read)")
    for key, reason in sorted(((data.get("scan") or {}).get("unscanned") or {}).items()):
        gaps.append(f"{key}: strings not read ({reason})")
    for process, entry in sorted(processes.items()):
        status = entry.get("status")
        if status not in ("ok", None):
            gaps.append(f"{process}: maps {status}" + (f" ({entry['note']})" if entry.get("note") else ""))
        elif _is_python(entry) and not ("sections" in snap_or_section and _python_reads_tracked(snap_or_section, entry)):
            gaps.append(f"{process}: runs Python code, whose reads only the probe sees (no probe record with reads)")
    if "sections" in snap_or_section:
        python = section_data(dict(snap_or_section), "python") or {}
        for path, hook in sorted((python.get("startup_hooks") or {}).items()):
            if not isinstance(hook, dict):
                continue
            if name in (hook.get("env_mentions") or []):
                readers.append(Reader("startup hook", str(path), str(hook.get("kind") or ""), "", "hook mentions", ()))
            elif hook.get("touches_env"):
                gaps.append(f"start-up hook {path} touches the environment with names not all known")
    return ReadEvidence(name, checked, tuple(readers), tuple(gaps))


def _side(table: Mapping[str, Any], path: str) -> ObjectSide:
    info = _info(table, path)
    identity = str(info.get("build_id") or (f"sha256:{str(info.get('sha256'))[:16]}" if info.get("sha256") else ""))
    return ObjectSide(path, str(info.get("version") or ""), owner_text(info), identity)


def _where(side: ObjectSide) -> str:
    return side.path + (f" ({side.version})" if side.version else "")


def library_changes(good: Mapping[str, Any], bad: Mapping[str, Any]) -> List[LibraryChange]:
    """Per process present on both sides (by key): objects added, removed, or of the same name from
    another file or with other content (build-id / sha256), sorted by process and name."""
    good_data, bad_data = _section(good), _section(bad)
    good_procs, bad_procs = process_entries(good_data), process_entries(bad_data)
    good_table, bad_table = good_data.get("objects") or {}, bad_data.get("objects") or {}
    out: List[LibraryChange] = []
    for process in sorted(set(good_procs) & set(bad_procs)):
        before, after = _objects_of(good_procs[process]), _objects_of(bad_procs[process])
        if not before or not after:
            continue  # a side whose maps were not read says nothing about what it loaded
        for name in sorted(set(before) | set(after)):
            g = _side(good_table, before[name]) if name in before else None
            b = _side(bad_table, after[name]) if name in after else None
            if g is None and b is not None:
                out.append(LibraryChange(process, name, "added", None, b, f"{process} maps {name} from {_where(b)} "
                                                                          "(not mapped before)"))
            elif b is None and g is not None:
                out.append(LibraryChange(process, name, "removed", g, None, f"{process} no longer maps {name} "
                                                                            f"({_where(g)})"))
            elif g is not None and b is not None and (g.path != b.path or (g.identity and b.identity
                                                                            and g.identity != b.identity)):
                what = "from" if g.path != b.path else "with other content at"
                out.append(LibraryChange(process, name, "changed", g, b,
                                         f"{process} maps {name} {what} {_where(b)} instead of {_where(g)}"))
    return out
