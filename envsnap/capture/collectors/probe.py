"""Records of the in-process probe (`--probe-dir DIR`): os.environ inside each worker.

Each record (<host>-<pid>.json, written by envsnap/probe/runtime.py, with its journal folded in by
probe_records.py) is keyed the way the processes section keys live processes: by SGLang role from the
title the process had when it last wrote ("scheduler_TP0"), else by its torch.distributed rank
("rank0"), else "<program>-<n>" in tree order. Pids stay inside as volatile fields. The modules a
process imported are classified by probe_modules.py (stdlib, installed, elsewhere, shadowed).

`envsnap run` keeps its command's own processes apart from the server's: those in the command's
session (the probe records its session id; run_command starts the command in a session of its own),
or started by one of them, go to "command_records", never to "records".
"""
from __future__ import annotations

import math
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.format import plural
from envsnap.model.rules import CPU_HOST, NONE, SectionRules, rule, volatile
from envsnap.model.schema import ENV_SHAPE
from envsnap.model.types import Section

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
_ENV_CHANGE_SHAPE = {"added": ENV_SHAPE, "removed": ("list", "str"),
                     "changed": ("map", {"before": "str", "after": "str"})}
_MODULES_SHAPE = {"count": "num", "stdlib": ("list", "str"), "installed": ("list", "str"),
                  "elsewhere": ("map", "str"), "main": "str",
                  "shadowed": ("map", {"file": "str", "instead_of": "str", "kind": "str"})}
_RECORD_SHAPE = {
    "pid": "num", "ppid": "num", "argv": ("list", "str"), "title": "str", "env_at_start": ENV_SHAPE,
    "env_at_init": ENV_SHAPE, "env_at_exit": ENV_SHAPE, "init": "dict", "host": "str",
    "changed_before_init": _ENV_CHANGE_SHAPE, "changed_before_exit": _ENV_CHANGE_SHAPE,
    # What the process's Python code read: {name: reads}, whole-environment walks, names over the cap;
    # when the probe started; which `envsnap run` run the process belonged to (1-based, or "warmup N").
    # startup_reads: what site.py and the start-up hooks read before the program ran (not the program's).
    "env_reads": ("map", "num"), "startup_reads": ("map", "num"), "env_copies": "num", "env_reads_dropped": "num",
    "started_at": "num",
    "run": "scalar",
    # How far the process's reads are known (epoch s; probe_records.py), whether to its exit; its session
    # and working directory; the modules it imported (probe_modules.py) and when they were last listed.
    "reads_until": "num", "reads_to_exit": "scalar", "sid": "num", "cwd": "str", "modules": _MODULES_SHAPE,
    "modules_listed_at": "num",
    # The files its Python code opened for reading (the probe's audit hook; files_read.py hashes them), how
    # many more it did not list, and where its interpreter's standard library and site directories are.
    "files_opened": ("list", "str"), "files_opened_dropped": "num", "stdlib_dir": "str", "site_dirs": ("list", "str"),
}
SHAPE = {"dir": "str", "records": ("map", _RECORD_SHAPE), "env_at_init_common": ENV_SHAPE, "records_from_runs": "num",
         "run_records": ("map", _RECORD_SHAPE), "command_records": ("map", _RECORD_SHAPE), "compared_run": "num"}
RULES = SectionRules(category="workers", component=NONE, compares="in-process worker environments", rules=(
    volatile("probe.*records.*.written_at", "a timestamp"),
    volatile("probe.dir", "where this capture's probe records lay"),
    volatile("probe.*records.*.file", "probe record file names carry pids"),
    volatile("probe.*records.*.host", "host name of the record (compared through the top-level host)"),
    volatile("probe.*records.*.forked_from", "pid of the forking parent"),
    volatile("probe.*records.*.argv*", "multiprocessing spawn arguments carry fd numbers"),
    volatile("probe.*.reads_until", "when the reads were read (a timestamp)"),
    volatile("probe.*.modules_listed_at", "a timestamp"),
    volatile("probe.*.sid", "a session id (a pid)"),
    # Python's import system (docs.python.org "The import system", sys.path): the first directory on sys.path
    # that holds a name wins, and the script's directory comes first, so a statistics.py or numpy/ beside the
    # script runs instead of the library of that name: other code, other speed, in every call to it.
    *(rule(f"{who}.*.modules.shadowed.*", "workers", CPU_HOST, 0.6,
           "a module named like a standard-library or installed one was loaded from another file instead")
      for who in ("workers", "command")),
    # The program's own modules (not a library's name): which copy of them ran.
    *(rule(f"{who}.*.modules.elsewhere.*", "workers", NONE, 0.2,
           "a module of the program's own was loaded from another file, or only on one side")
      for who in ("workers", "command")),
))


def _env_change(before: Dict[str, str], after: Dict[str, str]) -> Dict[str, Any]:
    from envsnap.capture.collectors.proctree import divergence

    div = divergence(before, after)
    return {"added": div["added"], "removed": div["removed"],
            "changed": {k: {"before": v["parent"], "after": v["child"]} for k, v in div["changed"].items()}}


def read_records(directory: str) -> Tuple[List[Dict[str, Any]], Dict[str, str]]:
    """Every probe record in `directory` (own process excluded), journals folded in, and per-file errors."""
    import socket

    from envsnap.capture.collectors.probe_records import read_records as read

    host = socket.gethostname()
    records, errors = read(directory, (host, os.getpid()))
    _titles_now(records, host)
    return records, errors


def _titles_now(records: List[Dict[str, Any]], host: str) -> None:
    """A record holds the title its process had when it last wrote: a process that retitled itself since
    (setproctitle after its start record: SGLang's detokenizer) would be keyed by its old command line
    here and by its title by the process walk. A process of this host still running -- the same one: it
    started before its record and not long before -- is keyed by its title now, as the walk keys it."""
    import psutil

    from envsnap.capture.collectors import roles as roles_mod
    from envsnap.redact import redact_text

    for record in records:
        started = record.get("started_at")
        if record.get("host") != host or not isinstance(started, (int, float)) or isinstance(started, bool):
            continue
        try:
            process = psutil.Process(int(record["pid"]))
            created = process.create_time()
            cmdline = process.cmdline()
        except (psutil.Error, OSError, ValueError, OverflowError):
            continue
        if cmdline and created <= started + 1.0 and started - created < _SAME_PROCESS_S:
            title = roles_mod.title_of(cmdline)
            if title and title != record.get("title"):
                record["title"] = redact_text(title)


# How long after its process started a probe record's start may be (interpreter start-up on a loaded machine):
# a pid whose process started longer before the record is another process that took the pid.
_SAME_PROCESS_S = 300.0


def assign_keys(records: List[Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """Stable keys for records, in process-tree order (parents first)."""
    from envsnap.capture.collectors import roles as roles_mod

    by_id = {(r.get("host"), r["pid"]): r for r in records}
    children: Dict[Any, List[Dict[str, Any]]] = {}
    roots: List[Dict[str, Any]] = []
    for record in records:
        parent = (record.get("host"), record.get("ppid"))
        if parent in by_id and parent != (record.get("host"), record["pid"]):
            children.setdefault(parent, []).append(record)
        else:
            roots.append(record)
    order_key = lambda r: (str(r.get("host")), r["pid"])  # noqa: E731
    titled_parents = set()
    for record in records:
        role = roles_mod.parse_role([record.get("title") or ""]) or {}
        if role.get("kind") not in (None, "main"):
            titled_parents.add((record.get("host"), record.get("ppid")))
    alloc = roles_mod.KeyAllocator()
    keyed: Dict[str, Dict[str, Any]] = {}

    def visit(record: Dict[str, Any], parent_key: Optional[str]) -> None:
        title = record.get("title") or ""
        argv = record.get("argv") or []
        role = roles_mod.parse_role([title]) or roles_mod.parse_role(argv)
        ident = (record.get("host"), record["pid"])
        if role is None and ident in titled_parents and not roles_mod.runs_another_package(argv):
            role = {"kind": "main", "key": "sglang-main"}
        if role is None:
            role = roles_mod.helper_role(argv)
        rank = (record.get("init") or {}).get("rank")
        if role is None and isinstance(rank, int):
            role = {"kind": "other", "key": f"rank{rank}", "rank": rank}
        if role is None:
            base = roles_mod.safe_name(os.path.basename(argv[0]) if argv else "python")
            key = alloc.numbered(base, sep="-")
            role = {"kind": "other"}
        elif role.pop("numbered", False):
            key = alloc.numbered(role.pop("key"), sep="_")
        else:
            key = alloc.take(role.pop("key"))
        keyed[key] = dict(record, role=role, parent_key=parent_key)
        for child in sorted(children.get(ident, []), key=order_key):
            visit(child, key)

    for root in sorted(roots, key=order_key):
        visit(root, None)
    return keyed


def _read_fields(record: Dict[str, Any]) -> Dict[str, Any]:
    """What the process's Python code read (probe "env_reads"), kept only when well-formed: a
    record is written by other people's processes, and a malformed count must not make the
    whole snapshot unloadable."""
    out: Dict[str, Any] = {}
    for field in ("env_reads", "startup_reads"):  # the program's reads; site's and the start-up hooks'
        reads = record.get(field)
        if isinstance(reads, dict):
            out[field] = {str(k): v for k, v in reads.items() if type(v) is int and 0 < v < 2 ** 63}
    for name in ("env_copies", "env_reads_dropped"):
        if type(record.get(name)) is int and 0 <= record[name] < 2 ** 63:
            out[name] = record[name]
    started = record.get("started_at")
    if isinstance(started, (int, float)) and not isinstance(started, bool) and math.isfinite(started):
        out["started_at"] = started
    return out


def _where_fields(record: Dict[str, Any]) -> Dict[str, Any]:
    """Session, working directory, how far the reads are known, and the classified modules: each kept only
    when well-formed (other people's processes wrote the record), paths redacted."""
    from envsnap.capture.collectors.probe_modules import classify
    from envsnap.redact import redact_text

    out: Dict[str, Any] = {}
    for name in ("reads_until", "modules_listed_at"):
        value = record.get(name)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            out[name] = value
    if type(record.get("sid")) is int:
        out["sid"] = record["sid"]
    if isinstance(record.get("cwd"), str):
        out["cwd"] = redact_text(record["cwd"])
    out.update(_opened_fields(record))
    modules = classify(record)
    if modules is not None:
        modules["elsewhere"] = {k: redact_text(v) for k, v in modules["elsewhere"].items()}
        if "main" in modules:
            modules["main"] = redact_text(modules["main"])
        for shadow in (modules.get("shadowed") or {}).values():
            shadow["file"], shadow["instead_of"] = redact_text(shadow["file"]), redact_text(shadow["instead_of"])
        out["modules"] = modules
    return out


def _opened_fields(record: Dict[str, Any]) -> Dict[str, Any]:
    """The files the process opened for reading (sorted paths), the count it left out, and its standard-library
    and site directories: each kept only when well-formed, paths redacted."""
    from envsnap.redact import redact_text

    out: Dict[str, Any] = {}
    opened = record.get("files_opened")
    if isinstance(opened, dict):
        out["files_opened"] = sorted({redact_text(p) for p in opened if isinstance(p, str)})
    if type(record.get("files_opened_dropped")) is int and 0 < record["files_opened_dropped"] < 2 ** 63:
        out["files_opened_dropped"] = record["files_opened_dropped"]
    if isinstance(record.get("stdlib_dir"), str):
        out["stdlib_dir"] = redact_text(record["stdlib_dir"])
    sites = record.get("site_dirs")
    if isinstance(sites, list):
        out["site_dirs"] = [redact_text(d) for d in sites if isinstance(d, str)]
    return out


def collect(ctx: CaptureContext) -> Section:
    if not ctx.probe_dir:
        return unavailable("not requested: use --probe-dir DIR (after `envsnap probe install`, "
                           "start the server with ENVSNAP_PROBE_DIR=DIR)")
    directory = os.path.abspath(ctx.probe_dir)
    if not os.path.isdir(directory):
        return failed(f"{ctx.probe_dir}: no such directory")
    records, errors = read_records(directory)
    unreadable = {name: why for name, why in errors.items() if why.startswith("unreadable")}
    if not records and unreadable:
        # Records are there, the probe wrote them: what is missing is the right to read them.
        first = min(unreadable)
        listing = first == "."
        what = "" if listing else f"{plural(len(unreadable), 'probe record')} in {directory} cannot be read: {first}: "
        why = unreadable[first][len("unreadable: "):]
        more = f" (and {len(unreadable) - 1} more)" if len(unreadable) > 1 else ""
        where = f"{directory}: " if listing else ""
        return failed(f"{where}{what}{why}{more}", {"dir": directory, "errors": errors})
    if not records:
        return unavailable(f"no probe records in {directory} (is the probe installed in the server's "
                           "Python and ENVSNAP_PROBE_DIR set in its environment?)",
                           {"dir": directory, "errors": errors} if errors else None)
    return ok(_section(directory, records, errors))


def _entries(records: List[Dict[str, Any]]) -> Tuple[Dict[str, Dict[str, Any]], List[str]]:
    """Keyed section entries of raw records, and warnings about them."""
    out: Dict[str, Dict[str, Any]] = {}
    warnings: List[str] = []
    for key, record in assign_keys(records).items():
        entry: Dict[str, Any] = {k: record[k] for k in ("pid", "ppid", "host", "argv", "title", "role", "parent_key", "file",
                                        "written_at", "stages", "python_version", "executable", "forked_from",
                                        "env_at_start", "env_at_start_note", "env_at_init", "init", "env_at_exit",
                                        "reads_to_exit") if k in record}
        entry.update(_read_fields(record))
        entry.update(_where_fields(record))
        # What the process changed in its own os.environ after start-up (an `os.environ[...] =` in a
        # launcher, engine.py or a library), whatever the process is: by init_process_group, and by exit.
        start = record.get("env_at_start")
        for stage, field_name in (("init", "changed_before_init"), ("exit", "changed_before_exit")):
            later = record.get(f"env_at_{stage}")
            if isinstance(start, dict) and isinstance(later, dict):
                entry[field_name] = _env_change(start, later)
        if "#" in key:
            warnings.append(f"{key}: another record has the same role; the directory holds more than one "
                            "launch (use a fresh --probe-dir per launch)")
        out[key] = entry
    return out, warnings


def _section(directory: str, records: List[Dict[str, Any]], errors: Dict[str, str]) -> Dict[str, Any]:
    out, warnings = _entries(records)
    inits = [r["env_at_init"] for r in out.values() if isinstance(r.get("env_at_init"), dict)]
    data: Dict[str, Any] = {"dir": directory, "records": out, "redaction": "applied by the probe"}
    if inits:
        common = {k: v for k, v in inits[0].items() if all(env.get(k) == v for env in inits[1:])}
        data["env_at_init_common"] = common
    if warnings:
        data["warnings"] = sorted(warnings)
    if errors:
        data["errors"] = errors
    return data


def _change_text(change: Dict[str, Any]) -> List[str]:
    """'NAME: unset → value' items of one start→stage change, sorted by name."""
    items = {}
    for name, value in (change.get("added") or {}).items():
        items[name] = f"{name}: unset \u2192 {value}"
    for name, values in (change.get("changed") or {}).items():
        items[name] = f"{name}: {values.get('before')} \u2192 {values.get('after')}"
    for name in change.get("removed") or []:
        items[name] = f"{name}: removed"
    return [items[name] for name in sorted(items)]


def summarize(data: Dict[str, Any]) -> List[str]:
    records = data.get("records") or {}
    inits = {k: r for k, r in records.items() if r.get("init")}
    head = f"{len(records)} probe record{'s' if len(records) != 1 else ''} in {data.get('dir')}"
    if inits:
        worlds = sorted({r["init"].get("world_size") for r in inits.values() if r["init"].get("world_size")})
        backends = sorted({str(r["init"].get("backend")) for r in inits.values()})
        head += f", {len(inits)} at init_process_group ({'/'.join(backends)}, world size {','.join(map(str, worlds)) or '?'})"
    changed = [k for k, r in records.items() if _change_text(r.get("changed_before_init") or {})
               or _change_text(r.get("changed_before_exit") or {})]
    if changed:
        head += f"; {len(changed)} changed their environment in-process"
    commands = data.get("command_records") or {}
    if commands:
        head += (f"; and {len(commands)} of the benchmark command's own process{'es' if len(commands) != 1 else ''} "
                 "(envsnap run), kept apart")
    lines = [head]
    for key in sorted(records):
        record = records[key]
        init = record.get("init") or {}
        stages = ",".join(record.get("stages") or [])
        lines.append(f"{key}: pid {record.get('pid')} stages {stages}"
                     + (f" rank {init.get('rank')}/{init.get('world_size')}" if "rank" in init else "")
                     + (f" ({record['title'][:100]})" if record.get("title") else ""))
        lines += _record_details(record)
    if commands:
        runs = sorted({str(r.get("run")) for r in commands.values() if isinstance(r, dict)})
        lines.append(f"the benchmark command's own processes (envsnap run), kept apart from the server's: "
                     f"{len(commands)} record{'s' if len(commands) != 1 else ''} over run{'s' if len(runs) != 1 else ''} "
                     f"{', '.join(runs)}; run {data.get('compared_run', '?')} is the one compared")
        for key in sorted(commands):
            record = commands[key]
            if isinstance(record, dict) and record.get("run") == data.get("compared_run"):
                lines.append(f"command {key}: pid {record.get('pid')} stages {','.join(record.get('stages') or [])}"
                             + (f" ({record['title'][:100]})" if record.get("title") else ""))
                lines += _record_details(record)
    lines += list(data.get("warnings") or [])
    return lines


def _record_details(record: Dict[str, Any]) -> List[str]:
    """A record's command line item by item, in-process changes, how far its reads are known, and its shadowed
    modules."""
    from envsnap import format as fmt
    from envsnap.model.argv import describe, itemise

    argv = record.get("argv")
    line = itemise(argv) if isinstance(argv, list) and argv else None
    lines = describe(line) if line is not None else []
    for stage, field_name in (("init", "changed_before_init"), ("exit", "changed_before_exit")):
        for item in _change_text(record.get(field_name) or {}):
            lines.append(f"    set in-process, start \u2192 {stage}: {item}")
    if isinstance(record.get("env_reads"), dict):
        until = record.get("reads_until")
        if record.get("reads_to_exit") or "exit" in (record.get("stages") or []):
            known = "to its exit"
        elif isinstance(until, (int, float)) and not isinstance(until, bool):
            known = f"up to {fmt.clock(until)}"
        else:
            known = "up to its last record"
        lines.append(f"    read {len(record['env_reads'])} variable{'s' if len(record['env_reads']) != 1 else ''} "
                     f"(reads known {known})")
    modules = record.get("modules")
    if isinstance(modules, dict):
        elsewhere = modules.get("elsewhere") or {}
        lines.append(f"    imported {modules.get('count', '?')} top-level modules: {len(modules.get('stdlib') or [])} "
                     f"standard library, {len(modules.get('installed') or [])} installed, {len(elsewhere)} from "
                     "elsewhere" + (f" (main script {modules['main']})" if modules.get("main") else ""))
        for name, shadow in sorted((modules.get("shadowed") or {}).items()):
            if isinstance(shadow, dict):
                lines.append(f"    SHADOWED: {name} loaded from {shadow.get('file')} instead of the "
                             f"{'standard library' if shadow.get('kind') == 'stdlib' else 'installed'} "
                             f"{shadow.get('instead_of')}")
    return lines


def collect_after_runs(ctx: CaptureContext, at_capture: Section, windows: Sequence[Dict[str, Any]],
                       restore: Optional[Callable[[Dict[str, Any]], None]] = None) -> Section:
    """The probe section once `envsnap run` has run its command: the records in the directory now.

    The capture before the runs saw only what was there then (a running server's records); the
    command's own processes write theirs while the runs go on, and a server adds init and exit
    stages and journal lines. `windows` are {"run": label, "start": epoch s, "end": epoch s, "sid": the
    command's session id}. A record whose process is in a run command's session, or was started by
    such a process, is the command's: it goes to "command_records", keyed "<run>/<process>" with "run"
    (1-based number, or "warmup N"), never among the server's "records"; "compared_run" is the first
    measured run that wrote any. Any other record (the server's) stays in "records", with "run" when its
    process started inside a run's window. If the directory cannot be read any more, the section taken
    at capture stays, with a warning saying why.
    """
    directory = os.path.abspath(ctx.probe_dir or "")
    if not ctx.probe_dir or not os.path.isdir(directory):
        return _kept(at_capture, f"{ctx.probe_dir}: no such directory")
    records, errors = read_records(directory)
    if not records:
        return _kept(at_capture, None)
    if restore is not None:
        _restore_launch_env(records, restore)
    commands = _command_runs(records, windows)
    server = [r for r in records if _ident(r) not in commands]
    data = _section(directory, server, errors) if server else _empty_section(directory, errors)
    for entry in data["records"].values():
        tag = _run_of(entry, windows)
        if tag is not None:
            entry["run"] = tag
    if commands:
        by_run: Dict[Any, List[Dict[str, Any]]] = {}
        for record in records:
            if _ident(record) in commands:
                by_run.setdefault(commands[_ident(record)], []).append(record)
        command_records: Dict[str, Dict[str, Any]] = {}
        for tag, group in sorted(by_run.items(), key=lambda kv: str(kv[0])):
            entries, _ = _entries(group)
            for key, entry in entries.items():
                entry["run"] = tag
                command_records[f"{_tag_text(tag)}/{key}"] = entry
        data["command_records"] = command_records
        measured = sorted(t for t in by_run if isinstance(t, int))
        if measured:
            data["compared_run"] = measured[0]
    data["records_from_runs"] = len(commands) + sum(1 for e in data["records"].values() if "run" in e)
    return ok(data)


def _restore_launch_env(records: List[Dict[str, Any]], restore: Callable[[Dict[str, Any]], None]) -> None:
    """Records as the processes would show them without `envsnap run`'s observation (probe/launch.py: its
    private directory on PYTHONPATH, the probe's own modules loaded from there) taken back out."""
    for record in records:
        try:
            restore(record)
        except Exception:  # a malformed record (other people's processes wrote it) stays as it is
            pass


def _ident(record: Dict[str, Any]) -> Tuple[Any, Any]:
    return record.get("host"), record.get("pid")


def _tag_text(tag: Any) -> str:
    return str(tag).replace(" ", "")


def _command_runs(records: List[Dict[str, Any]], windows: Sequence[Dict[str, Any]]) -> Dict[Tuple[Any, Any], Any]:
    """{record identity: run label} of the records that are a run command's processes: in its session,
    or started (ppid) by such a process (a child that made a session of its own)."""
    by_sid = {w["sid"]: w["run"] for w in windows if type(w.get("sid")) is int}
    found: Dict[Tuple[Any, Any], Any] = {}
    for record in records:
        sid = record.get("sid")
        if type(sid) is int and sid in by_sid:
            found[_ident(record)] = by_sid[sid]
    by_pid = {_ident(r): r for r in records}
    changed = True
    while changed:  # children of the command's processes, to any depth the records show
        changed = False
        for record in records:
            ident = _ident(record)
            parent = (record.get("host"), record.get("ppid"))
            if ident not in found and parent in found and parent in by_pid:
                found[ident] = found[parent]
                changed = True
            elif ident not in found and type(record.get("ppid")) is int and record["ppid"] in by_sid:
                found[ident] = by_sid[record["ppid"]]
                changed = True
    return found


def _empty_section(directory: str, errors: Dict[str, str]) -> Dict[str, Any]:
    data: Dict[str, Any] = {"dir": directory, "records": {}, "redaction": "applied by the probe"}
    if errors:
        data["errors"] = errors
    return data


def _run_of(record: Dict[str, Any], windows: Sequence[Dict[str, Any]]) -> Any:
    moment = record.get("started_at", record.get("written_at"))
    if not isinstance(moment, (int, float)) or isinstance(moment, bool):
        return None
    for window in windows:
        if window["start"] <= moment <= window["end"]:
            return window["run"]
    return None


def _kept(at_capture: Section, reason: Optional[str]) -> Section:
    """The section as captured before the runs, with a warning when the directory went away."""
    kept = at_capture.copy()
    if reason and kept.get("status") == "ok":
        data = dict(kept.get("data") or {})
        data["warnings"] = sorted(list(data.get("warnings") or [])
                                  + [f"records written during the runs could not be read: {reason}"])
        kept["data"] = data
    return kept
