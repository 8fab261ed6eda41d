"""Records of the in-process probe (`--probe-dir DIR`): os.environ inside each worker.

Each record (<host>-<pid>.json, written by envsnap/probe/runtime.py) is keyed the way
the processes section keys live processes: by SGLang role from the title the process
had when it last wrote ("scheduler_TP0"), else by its torch.distributed rank ("rank0"),
else "<program>-<n>" in tree order. Pids stay inside as volatile fields.
"""
from __future__ import annotations

import json
import math
import os
import stat
from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.capture.base import CaptureContext, failed, ok, unavailable
from envsnap.model.rules import NONE, SectionRules, volatile
from envsnap.model.schema import ENV_SHAPE

# --- What this section is: its data's shape (model/schema.py's shape language, checked when a
# snapshot is loaded) and its fields' rules (analysis/knowledge matches keys against them). ---
_ENV_CHANGE_SHAPE = {"added": ENV_SHAPE, "removed": ("list", "str"),
                     "changed": ("map", {"before": "str", "after": "str"})}
_RECORD_SHAPE = {
    "pid": "num", "ppid": "num", "argv": ("list", "str"), "title": "str", "env_at_start": ENV_SHAPE,
    "env_at_init": ENV_SHAPE, "env_at_exit": ENV_SHAPE, "init": "dict", "host": "str",
    "changed_before_init": _ENV_CHANGE_SHAPE, "changed_before_exit": _ENV_CHANGE_SHAPE,
    # What the process's Python code read: {name: reads}, whole-environment walks, names over the cap;
    # when the probe started; which `envsnap run` run the process belonged to (1-based, or "warmup N").
    "env_reads": ("map", "num"), "env_copies": "num", "env_reads_dropped": "num", "started_at": "num",
    "run": "scalar",
}
SHAPE = {"dir": "str", "records": ("map", _RECORD_SHAPE), "env_at_init_common": ENV_SHAPE, "records_from_runs": "num",
         "run_records": ("map", _RECORD_SHAPE), "compared_run": "num"}
RULES = SectionRules(category="workers", component=NONE, compares="in-process worker environments", rules=(
    volatile("probe.records.*.written_at", "a timestamp"),
    volatile("probe.dir", "where this capture's probe records lay"),
    volatile("probe.records.*.file", "probe record file names carry pids"),
    volatile("probe.records.*.host", "host name of the record (compared through the top-level host)"),
    volatile("probe.records.*.forked_from", "pid of the forking parent"),
    volatile("probe.records.*.argv*", "multiprocessing spawn arguments carry fd numbers"),
))

MAX_RECORD_BYTES = 16 * 1024 * 1024


def _env_change(before: Dict[str, str], after: Dict[str, str]) -> Dict[str, Any]:
    from envsnap.capture.collectors.proctree import divergence

    div = divergence(before, after)
    return {"added": div["added"], "removed": div["removed"],
            "changed": {k: {"before": v["parent"], "after": v["child"]} for k, v in div["changed"].items()}}


def read_records(directory: str) -> Tuple[List[Dict[str, Any]], Dict[str, str]]:
    """Every probe record in `directory` (own process excluded), and per-file errors."""
    import socket

    records: List[Dict[str, Any]] = []
    errors: Dict[str, str] = {}
    me = (socket.gethostname(), os.getpid())
    for name in sorted(os.listdir(directory)):
        if name.startswith(".") or not name.endswith(".json"):
            continue
        path = os.path.join(directory, name)
        try:
            # O_NONBLOCK + regular files only, bounded read: a FIFO named *.json would block the
            # collector, and a link to /dev/zero (size 0) would be read without end.
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with os.fdopen(fd, "rb") as handle:
                if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                    errors[name] = "not a regular file: not a probe record"
                    continue
                raw = handle.read(MAX_RECORD_BYTES + 1)
            if len(raw) > MAX_RECORD_BYTES:
                errors[name] = "larger than 16 MiB: not a probe record"
                continue
            record = json.loads(raw.decode("utf-8", "surrogateescape"))
        except (OSError, ValueError) as exc:
            errors[name] = f"unreadable: {exc}"
            continue
        if not isinstance(record, dict) or not isinstance(record.get("pid"), int) or "probe_version" not in record:
            errors[name] = "not a probe record"
            continue
        if (record.get("host"), record.get("pid")) == me:
            continue
        record["file"] = name
        records.append(record)
    return records, errors


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
        if role is None and ident in titled_parents:
            role = {"kind": "main", "key": "sglang-main"}
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
    reads = record.get("env_reads")
    if isinstance(reads, dict):
        out["env_reads"] = {str(k): v for k, v in reads.items()
                            if type(v) is int and 0 < v < 2 ** 63}
    for name in ("env_copies", "env_reads_dropped"):
        if type(record.get(name)) is int and 0 <= record[name] < 2 ** 63:
            out[name] = record[name]
    started = record.get("started_at")
    if isinstance(started, (int, float)) and not isinstance(started, bool) and math.isfinite(started):
        out["started_at"] = started
    return out


def collect(ctx: CaptureContext) -> Dict[str, Any]:
    if not ctx.probe_dir:
        return unavailable("not requested: use --probe-dir DIR (after `envsnap probe install`, "
                           "start the server with ENVSNAP_PROBE_DIR=DIR)")
    directory = os.path.abspath(ctx.probe_dir)
    if not os.path.isdir(directory):
        return failed(f"{ctx.probe_dir}: no such directory")
    records, errors = read_records(directory)
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
                                        "env_at_start", "env_at_start_note", "env_at_init", "init", "env_at_exit")
                 if k in record}
        entry.update(_read_fields(record))
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
    lines = [head]
    for key in sorted(records):
        record = records[key]
        init = record.get("init") or {}
        stages = ",".join(record.get("stages") or [])
        lines.append(f"{key}: pid {record.get('pid')} stages {stages}"
                     + (f" rank {init.get('rank')}/{init.get('world_size')}" if "rank" in init else "")
                     + (f" ({record['title'][:100]})" if record.get("title") else ""))
        for stage, field_name in (("init", "changed_before_init"), ("exit", "changed_before_exit")):
            for item in _change_text(record.get(field_name) or {}):
                lines.append(f"    set in-process, start \u2192 {stage}: {item}")
    lines += list(data.get("warnings") or [])
    return lines


def collect_after_runs(ctx: CaptureContext, at_capture: Dict[str, Any],
                       windows: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """The probe section once `envsnap run` has run its command: the records in the directory now.

    The capture before the runs saw only what was there then (a running server's records); the
    command's own processes write theirs while the runs go on, and a server adds init and exit
    stages. A record whose process started inside a run's time window belongs to that run
    ("run": 1-based number, or "warmup N"); `windows` are {"run": label, "start": epoch s, "end":
    epoch s}. "records" -- what diff compares, process by process -- holds the records from before
    the runs and those of the first measured run that wrote any ("compared_run"): every run starts
    the same command, and comparing one run's processes keeps GOOD and BAD comparable whatever
    their --repeat. The other runs' records (warm-ups too) are kept whole in "run_records", keyed
    "<run>/<process>", as evidence of who read what. If the directory cannot be read any more, the
    section taken at capture stays, with a warning saying why.
    """
    directory = os.path.abspath(ctx.probe_dir or "")
    if not ctx.probe_dir or not os.path.isdir(directory):
        return _kept(at_capture, f"{ctx.probe_dir}: no such directory")
    records, errors = read_records(directory)
    if not records:
        return _kept(at_capture, None)
    tags = {(r.get("host"), r["pid"]): _run_of(r, windows) for r in records}
    measured = sorted(t for t in tags.values() if isinstance(t, int))
    compared = measured[0] if measured else None
    kept = [r for r in records if tags[(r.get("host"), r["pid"])] in (None, compared)]
    others = [r for r in records if tags[(r.get("host"), r["pid"])] not in (None, compared)]
    if not kept:  # only warm-up records: compare those rather than nothing
        kept, others = others, []
    data = _section(directory, kept, errors)
    for entry in data["records"].values():
        tag = tags.get((entry.get("host"), entry.get("pid")))
        if tag is not None:
            entry["run"] = tag
    if others:
        by_run: Dict[Any, List[Dict[str, Any]]] = {}
        for record in others:
            by_run.setdefault(tags[(record.get("host"), record["pid"])], []).append(record)
        run_records: Dict[str, Dict[str, Any]] = {}
        for tag, group in sorted(by_run.items(), key=lambda kv: str(kv[0])):
            entries, _ = _entries(group)
            for key, entry in entries.items():
                entry["run"] = tag
                run_records[f"{tag}/{key}"] = entry
        data["run_records"] = run_records
    data["records_from_runs"] = sum(1 for t in tags.values() if t is not None)
    if compared is not None:
        data["compared_run"] = compared
    return ok(data)


def _run_of(record: Dict[str, Any], windows: Sequence[Dict[str, Any]]) -> Any:
    moment = record.get("started_at", record.get("written_at"))
    if not isinstance(moment, (int, float)) or isinstance(moment, bool):
        return None
    for window in windows:
        if window["start"] <= moment <= window["end"]:
            return window["run"]
    return None


def _kept(at_capture: Dict[str, Any], reason: Optional[str]) -> Dict[str, Any]:
    """The section as captured before the runs, with a warning when the directory went away."""
    kept = dict(at_capture)
    if reason and kept.get("status") == "ok":
        data = dict(kept.get("data") or {})
        data["warnings"] = sorted(list(data.get("warnings") or [])
                                  + [f"records written during the runs could not be read: {reason}"])
        kept["data"] = data
    return kept
