"""The shared objects each measured process mapped, who installed them, and which variables they can read.

For every process given with --pid / --sglang (keyed as the processes section keys them: the same
walk, proctree.walk) and every live process that wrote a probe record (--probe-dir; keyed as the
probe section keys it), /proc/PID/maps says which files it mapped (maps.py). Each distinct ELF
object among them is described once (`objects`, keyed by path):

- what it is: its soname (or file name), build-id (elf.py; the sha256 of the whole file only when it
  has none), size, device and inode, a version (from the file name when it says more than the soname,
  libnccl.so.2.18.3; else its owner's);
- who installed it (owners.py): a distribution whose RECORD lists it, a dpkg package, or unknown;
- which environment variables it can read (libstrings.py): among the names this capture checked
  (`checked_names`: the names of the capturing process's environment, of the walked processes' /proc
  environments and of the probe records, read and set, that the scan can find: upper case, digits
  and '_'), those its string sections contain as a literal ("mentions") or only as the tail of a
  longer literal ("contains": a linker may store "PATH" inside "PYTHONPATH", so it may be read too).

Per process, `objects` maps each object's name (soname, else file name; "#2" for a second of the
same name) to its path: two snapshots line up by process key and name ("scheduler_TP0 maps
libnccl.so.2 from another file"). Deleted files (the process runs a library replaced on disk
since) are listed with status "deleted"; mapped files that are not ELF objects (locale archives,
memory-mapped weights) are only counted.

Everything read from a file is cached by the file's identity (libcache.py): a warm capture stats
the objects and reads none of them. The scan reports what it could not read (`scan.unscanned`,
`scan.complete`): an object not scanned leaves its variables unknown, never "not mentioned".
The run command's own process tree is sampled while it runs (measure/maps_sampling.py) and added
after the runs as `run_processes` (`collect_after_runs`).
"""
from __future__ import annotations

import os
import time
from typing import Any, Dict, Iterable, List, Optional, Set

from envsnap.capture.base import CaptureContext, ok, unavailable
from envsnap.capture.collectors.lib_objects import Describer, mentions, objects_of
from envsnap.model.owners import owner_text
from envsnap.model.rules import COMMUNICATION, CPU_HOST, GRAPHS, KERNELS, NONE, SectionRules, rule, volatile
from envsnap.model.snapshot import as_dict
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge.py matches keys against them). ---
_PROCESS_SHAPE = {"pid": "num", "source": "str", "status": "str", "note": "str", "exe": "str",
                  "objects": ("map", "str"), "other_files": "num", "probe_key": "str",
                  "runs": ("list", "scalar"), "pids": ("list", "num"), "title": "str",
                  "varies": ("map", {"added": ("list", "str"), "removed": ("list", "str")}),
                  "late": ("list", "str")}
_OBJECT_SHAPE = {"name": "str", "soname": "str", "version": "str", "version_source": "str", "build_id": "str",
                 "sha256": "str", "size": "num", "dev": "str", "inode": "num",
                 "owner": {"kind": "str", "manager": "str", "name": "str", "version": "str"},
                 "status": "str", "note": "str", "strings": "str", "getenv": "scalar",
                 "on_disk": {"size": "num", "mtime_ns": "num", "ctime_ns": "num", "error": "str"},
                 "mentions": ("list", "str"), "contains": ("list", "str")}
SHAPE = {"processes": ("map", _PROCESS_SHAPE), "objects": ("map", _OBJECT_SHAPE),
         "checked_names": ("list", "str"), "run_processes": ("map", _PROCESS_SHAPE),
         "scan": {"complete": "scalar", "objects": "num", "from_cache": "num", "read": "num", "bytes_read": "num",
                  "unscanned": ("map", "str"), "elapsed_s": "num"},
         "cache": {"used": "scalar", "hits": "num", "misses": "num", "racy": "num", "path": "str", "note": "str"},
         "errors": "dict"}
# Until analysis has a view of its own for this section, diff compares it leaf by leaf: what a process
# maps is `<processes|run_processes>.<key>.objects.<name>` (its path), and what an object holds is its
# build-id (or sha256). Everything else about an object follows from those (size, soname, owner,
# version, names) or is bookkeeping, and is volatile here, so that one library changed is one or two
# differences, not twenty (analysis/compare/libraries.py: library_changes says it in one line).
_OBJECT_DERIVED = ("name", "soname", "size", "getenv", "owner*", "version", "version_source", "status", "note",
                   "strings")
RULES = SectionRules(category="libraries", component=NONE, compares="the shared objects each process mapped", rules=(
    # Per capture: which process ids, how each was read, and the bookkeeping of the scan and its cache.
    volatile("libraries.run_processes.*.pid*", "process ids differ on every launch"),
    volatile("libraries.processes.*.probe_key", "which probe record named the process"),
    volatile("libraries.processes.*.source", "which option named the process"),
    volatile("libraries.*processes.*.status", "whether the process's maps could be read"),
    volatile("libraries.*processes.*.note", "why the process's maps could not be read"),
    volatile("libraries.*processes.*.exe", "the executable (the processes section compares it)"),
    volatile("libraries.*processes.*.other_files", "mapped files that are not code (locale archives, weights)"),
    volatile("libraries.run_processes.*.title", "the run command's arguments (the run records have them)"),
    volatile("libraries.run_processes.*.runs", "which runs a process was seen in"),
    volatile("libraries.run_processes.*.varies*", "what differed between the runs of one session"),
    volatile("libraries.run_processes.*.late*", "what a process loaded after its first read: when the reads came"),
    volatile("libraries.checked_names*", "the variables this capture looked up (its environments)"),
    volatile("libraries.scan.*", "the scan's bookkeeping"),
    volatile("libraries.cache.*", "the libraries cache's bookkeeping"),
    volatile("libraries.errors.*", "what could not be read"),
    # An object's device and inode change with every reinstall of the same file.
    volatile("libraries.objects.*.dev", "where the file lies on disk, not what it holds"),
    volatile("libraries.objects.*.inode", "where the file lies on disk, not what it holds"),
    volatile("libraries.objects.*.on_disk*", "when a file changed in place was written (its status says it changed)"),
    # Which variables an object names depends on the names checked (the environments): the ranking's
    # read evidence uses them, they are no difference of their own.
    volatile("libraries.objects.*.mentions", "the checked variables an object's strings name"),
    volatile("libraries.objects.*.contains", "the checked variables an object's strings end with"),
    *(volatile(f"libraries.objects.*.{field}", "follows from the object's build-id and path")
      for field in _OBJECT_DERIVED),
    # The view's keys, libraries.<process>.<object name>: a library a measured process mapped was added, removed,
    # or came from another file or build. What it does decides what it acts on: NCCL runs the collectives (NCCL
    # user guide); the CUDA driver (libcuda) and runtime (libcudart) take every kernel launch and graph replay
    # (CUDA driver/runtime API docs); cuBLAS, cuDNN and torch's CUDA kernels are the GPU math; OpenMP runtimes
    # and BLAS libraries run the CPU math and its threads (OpenMP spec, OpenBLAS/oneMKL docs).
    rule("libraries.*.libnccl*", "libraries", COMMUNICATION, 0.6, "the NCCL library the process ran changed"),
    rule("libraries.*.libcuda.so*", "libraries", GRAPHS, 0.5, "the CUDA driver library the process ran changed"),
    rule("libraries.*.libcudart*", "libraries", GRAPHS, 0.5, "the CUDA runtime the process ran changed"),
    rule("libraries.*.libcublas*", "libraries", KERNELS, 0.5, "the cuBLAS library the process ran changed"),
    rule("libraries.*.libcudnn*", "libraries", KERNELS, 0.5, "the cuDNN library the process ran changed"),
    rule("libraries.*.libtorch_cuda*", "libraries", KERNELS, 0.5, "torch's CUDA kernels the process ran changed"),
    rule("libraries.*.libgomp*", "libraries", CPU_HOST, 0.45, "the OpenMP runtime the process ran changed"),
    rule("libraries.*.libiomp5*", "libraries", CPU_HOST, 0.45, "the OpenMP runtime the process ran changed"),
    rule("libraries.*.libomp.so*", "libraries", CPU_HOST, 0.45, "the OpenMP runtime the process ran changed"),
    rule("libraries.*.*openblas*", "libraries", CPU_HOST, 0.45, "the BLAS library the process ran changed"),
    rule("libraries.*.libmkl*", "libraries", CPU_HOST, 0.45, "the BLAS library the process ran changed"),
    rule("libraries.*", "libraries", NONE, 0.3, "a shared object a measured process ran changed: other code ran"),
))


# ---------------------------------------------------------------- which processes

def _walked(ctx: CaptureContext, deadline: float, errors: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """{key: processes-section entry} for --pid / --sglang, keyed by the processes collector's walk."""
    if not ctx.pids and not ctx.sglang:
        return {}
    from envsnap.capture.collectors import processes, proctree

    roots, forced = processes.roots_of(ctx)
    if not roots:
        errors["sglang"] = processes.NO_SGLANG
        return {}
    data = proctree.walk(roots, deadline=deadline, redact=True, forced_main=forced)
    errors.update(data.get("errors") or {})
    return dict(data.get("processes") or {})


def _probe_processes(ctx: CaptureContext, errors: Dict[str, str]) -> Dict[str, Dict[str, Any]]:
    """{probe key: record} of live processes on this host that wrote a probe record."""
    if not ctx.probe_dir or not os.path.isdir(ctx.probe_dir):
        return {}
    import socket

    import psutil

    from envsnap.capture.collectors import probe

    try:
        records, _ = probe.read_records(os.path.abspath(ctx.probe_dir))
    except OSError as exc:
        errors["probe"] = f"probe directory unreadable: {exc.strerror or exc}"
        return {}
    host = socket.gethostname()
    out: Dict[str, Dict[str, Any]] = {}
    for key, record in probe.assign_keys(records).items():
        pid = record.get("pid")
        if record.get("host") != host or not isinstance(pid, int):
            continue
        try:  # the record's process, not a later one that got its pid
            started = psutil.Process(pid).create_time()
        except Exception:
            continue
        moment = record.get("started_at")
        if isinstance(moment, (int, float)) and started > moment + 1.0:
            continue
        out[key] = record
    return out


def candidate_names(*environments: Iterable[str]) -> Set[str]:
    """The variable names to look up: every name of the given environments that the strings scan can
    find (libstrings: upper case, digits and '_', 3 to 128 long). Any other name (http_proxy) is not
    looked up, so it is not among `checked_names`: its absence from the objects proves nothing."""
    from envsnap.capture.collectors.libstrings import is_name

    names: Set[str] = set()
    for env in environments:
        names.update(n for n in env if isinstance(n, str) and is_name(n))
    return names


def _record_names(record: Dict[str, Any]) -> Set[str]:
    names: Set[str] = set()
    for field in ("env_at_start", "env_at_init", "env_at_exit", "env_reads"):
        value = record.get(field)
        if isinstance(value, dict):
            names.update(str(k) for k in value)
    return names


def describe_processes(pids: Dict[str, int], describer: Describer, objects: Dict[str, Dict[str, Any]],
                       sources: Optional[Dict[str, str]] = None) -> Dict[str, Dict[str, Any]]:
    """{key: processes entry} for {key: pid}: read each one's maps, describe its objects."""
    from envsnap.capture.collectors import maps

    out: Dict[str, Dict[str, Any]] = {}
    for key, pid in pids.items():
        entry: Dict[str, Any] = {"pid": pid}
        if sources:
            entry["source"] = sources.get(key, "processes")
        found = maps.read(pid)
        entry["status"] = found.status
        if found.note:
            entry["note"] = found.note
        exe = maps.executable(pid)
        if exe:
            entry["exe"] = exe
        if found.files:
            entry["objects"], entry["other_files"] = objects_of(found.files, describer, objects)
        out[key] = entry
    return out


def finish(data: Dict[str, Any], describer: Describer, candidates: Set[str], started: float) -> Dict[str, Any]:
    """Add mentions, the scan's and the cache's bookkeeping to section data (objects described)."""
    objects = data["objects"]
    found = mentions({k: v for k, v in describer.names.items() if k in objects}, candidates)
    for key, (exact, tail) in found.items():
        if exact:
            objects[key]["mentions"] = exact
        if tail:
            objects[key]["contains"] = tail
    data["checked_names"] = sorted(candidates)
    unscanned = {k: v for k, v in describer.unscanned.items() if k in objects}
    data["scan"] = {"complete": not unscanned, "objects": len(objects), "from_cache": describer.from_cache,
                    "read": describer.read, "bytes_read": describer.bytes_read, "unscanned": unscanned,
                    "elapsed_s": round(time.monotonic() - started, 4)}
    if describer.owners.notes:
        data.setdefault("errors", {}).update({f"owner {k}": v for k, v in describer.owners.notes.items()})
    data["objects"] = dict(sorted(objects.items()))
    return data


# ---------------------------------------------------------------- the collector

def collect(ctx: CaptureContext) -> Section:
    if not ctx.pids and not ctx.sglang and not ctx.probe_dir:
        return unavailable("not requested: use --pid PID, --sglang or --probe-dir DIR")
    from envsnap.capture import libcache
    from envsnap.capture.collectors.roles import KeyAllocator

    started = time.monotonic()
    deadline = started + ctx.remaining()
    errors: Dict[str, str] = {}
    walked = _walked(ctx, deadline, errors)
    pids = {key: entry["pid"] for key, entry in walked.items() if isinstance(entry.get("pid"), int)}
    sources = {key: "processes" for key in pids}
    candidates = candidate_names(os.environ)
    for entry in walked.values():
        candidates |= candidate_names(entry.get("environ") or {}, (entry.get("divergence") or {}).get("added") or {})
    by_pid = {pid: key for key, pid in pids.items()}
    probe_keys: Dict[str, str] = {}
    alloc = KeyAllocator()
    for key in walked:
        alloc.take(key)
    for key, record in _probe_processes(ctx, errors).items():
        candidates |= candidate_names(_record_names(record))
        if record["pid"] in by_pid:
            probe_keys[by_pid[record["pid"]]] = key
            continue
        own = alloc.take(key)
        pids[own] = record["pid"]
        sources[own] = "probe"
    if not pids:
        return unavailable("no live process to read: " + ("; ".join(sorted(set(errors.values()))) or "none found"),
                           {"errors": errors} if errors else None)
    cache = libcache.LibCache.open(disabled=ctx.no_cache)
    describer = Describer(cache, deadline)
    objects: Dict[str, Dict[str, Any]] = {}
    processes = describe_processes(pids, describer, objects, sources)
    for key, probe_key in probe_keys.items():
        processes[key]["probe_key"] = probe_key
    data: Dict[str, Any] = {"processes": processes, "objects": objects}
    if errors:
        data["errors"] = dict(errors)
    finish(data, describer, candidates, started)
    cache.save(stop_at=deadline)
    data["cache"] = cache.summary()
    return ok(data)


def collect_after_runs(ctx: CaptureContext, at_capture: Section, runs: List[Dict[str, Dict[str, Any]]],
                       labels: List[Any], extra_names: Iterable[str] = ()) -> Section:
    """The section once `envsnap run` has run its command: the capture's processes as they were,
    plus `run_processes`, what the command's own processes mapped (measure/maps_sampling.py: `runs`,
    one {key: sampled process} per run, `labels` their run labels: 1, 2... or "warmup N").

    A key seen in several runs is one entry: its runs and pids, the union of its objects, and per
    later run the object paths it added or lacked against the first run it appeared in ("varies"), and the
    object paths it loaded after its first read in some run ("late": when the reads came decided whether they
    were seen, so their presence on one side only is no difference: views.drop_unstable).
    Mentions are computed again over every object, for the names checked at capture plus those of
    the runs' processes and `extra_names` (the probe records written during the runs)."""
    from envsnap.capture import libcache
    from envsnap.capture.collectors import maps as maps_mod
    from envsnap.redact import redact_argv

    started = time.monotonic()
    deadline = started + ctx.remaining()
    before: Dict[str, Any] = at_capture["data"] if isinstance(at_capture.get("data"), dict) else {}
    data: Dict[str, Any] = {k: v for k, v in before.items() if k not in ("scan", "cache", "checked_names")}
    data.setdefault("processes", {})
    objects: Dict[str, Dict[str, Any]] = dict(data.get("objects") or {})
    data["objects"] = objects
    cache = libcache.LibCache.open(disabled=ctx.no_cache)
    describer = Describer(cache, deadline)
    for key, entry in objects.items():  # the names of the objects described at capture
        if entry.get("status") == "ok" and entry.get("strings") == "read":
            mapped = maps_mod.Mapped(key, str(entry.get("dev", "")), int(entry.get("inode") or 0), False)
            facts, _ = describer.facts_of(mapped)
            if facts is not None and isinstance(facts.get("names"), str):
                describer.names[key] = facts["names"]
            else:
                describer.unscanned[key] = "changed on disk since the capture: its strings are not known"
    describer.unscanned.update((before.get("scan") or {}).get("unscanned") or {})
    candidates = set(before.get("checked_names") or []) | candidate_names(extra_names)
    run_processes: Dict[str, Dict[str, Any]] = {}
    first: Dict[str, Set[str]] = {}
    for label, run in zip(labels, runs):
        for key, seen in run.items():
            candidates |= candidate_names(seen.get("env_names") or [])
            named, other = objects_of(seen.get("files") or [], describer, objects)
            paths = set(named.values())
            proc = run_processes.get(key)
            if proc is None:
                proc = run_processes[key] = {
                    "pid": seen.get("pid"), "pids": [], "runs": [], "status": seen.get("status", "ok"),
                    "title": " ".join(redact_argv(seen.get("cmdline") or []) if ctx.redact else seen.get("cmdline") or []),
                    "objects": dict(named), "other_files": other}
                if seen.get("note"):
                    proc["note"] = seen["note"]
                first[key] = paths
            else:
                known = set(proc["objects"].values())
                for name, path in named.items():
                    if path not in known:
                        unique, n = name, 1
                        while unique in proc["objects"]:
                            n += 1
                            unique = f"{name}#{n}"
                        proc["objects"][unique] = path
                added, removed = sorted(paths - first[key]), sorted(first[key] - paths)
                if added or removed:
                    proc.setdefault("varies", {})[str(label)] = {"added": added, "removed": removed}
            late = paths & set(seen.get("late") or [])
            if late:
                proc["late"] = sorted(set(proc.get("late") or []) | late)
            proc["pids"].append(seen.get("pid"))
            proc["runs"].append(label)
    for proc in run_processes.values():
        proc["objects"] = dict(sorted(proc["objects"].items()))
    if run_processes:
        data["run_processes"] = run_processes
    finish(data, describer, candidates, started)
    cache.save(stop_at=deadline)
    data["cache"] = cache.summary()
    return ok(data)


SHOWN_PER_PROCESS = 60  # objects listed per process by `show -v` (a torch process maps ~150); the rest counted


def _object_lines(mapped: Dict[str, Any], objects: Dict[str, Any]) -> List[str]:
    """'    libnccl.so.2 <- /usr/lib/.../libnccl.so.2.21.5 (2.21.5, build-id 3f2a..., dpkg libnccl2 ...)'."""
    lines = []
    for name, path in sorted(mapped.items())[:SHOWN_PER_PROCESS]:
        info = as_dict(objects.get(path))
        facts = [str(info["version"])] if info.get("version") else []
        if info.get("build_id"):
            facts.append(f"build-id {str(info['build_id'])[:12]}")
        facts.append(owner_text(info))
        lines.append(f"    {name} <- {path} ({', '.join(facts)})")
    if len(mapped) > SHOWN_PER_PROCESS:
        lines.append(f"    ... and {len(mapped) - SHOWN_PER_PROCESS} more (in the snapshot's libraries section)")
    return lines


def summarize(data: Dict[str, Any]) -> List[str]:
    """'3 processes, 64 objects (12 from dpkg, 40 from distributions); strings: complete'."""
    processes = data.get("processes") or {}
    objects = data.get("objects") or {}
    owners: Dict[str, int] = {}
    for entry in objects.values():
        kind = (entry.get("owner") or {}).get("kind", "unknown")
        owners[kind] = owners.get(kind, 0) + 1
    scan = data.get("scan") or {}
    head = (f"{len(processes)} process{'es' if len(processes) != 1 else ''}, {len(objects)} object"
            f"{'s' if len(objects) != 1 else ''} ("
            + ", ".join(f"{n} {kind}" for kind, n in sorted(owners.items())) + ")")
    head += "; strings " + ("complete" if scan.get("complete") else
                            f"incomplete ({len(scan.get('unscanned') or {})} not read)")
    cache = data.get("cache") or {}
    if cache:
        head += f"; cache {cache.get('hits', 0)} hits, {cache.get('misses', 0)} read"
    lines = [head]
    for key in sorted(processes):
        entry = processes[key]
        lines.append(f"{key}: pid {entry.get('pid')} {entry.get('status')}, "
                     f"{len(entry.get('objects') or {})} objects" + (f" ({entry['note']})" if entry.get("note") else ""))
        lines.extend(_object_lines(entry.get("objects") or {}, objects))
    for key in sorted(data.get("run_processes") or {}):
        entry = data["run_processes"][key]
        lines.append(f"run {key}: {len(entry.get('objects') or {})} objects, runs {entry.get('runs')}")
        lines.extend(_object_lines(entry.get("objects") or {}, objects))
    for key, entry in sorted(objects.items()):
        if entry.get("status") != "ok":
            lines.append(f"{entry.get('status')}: {key}")
    return lines
