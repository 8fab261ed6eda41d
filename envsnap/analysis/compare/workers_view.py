"""The workers' view: the measured processes (the /proc walk and the probe's records, joined by pid) as keys.

One "workers.env.X" when all TP workers agree, "workers.disagree.X" when they don't, "workers.parent_only.X" when
a parent has a value of a performance-relevant variable the workers don't run with (unset there, or another value;
the server's own parent process, set in-process after the TP workers started; else the capturing shell),
per-process keys (command lines, what changed in-process), and the run command's own processes apart
("command.<name>.*"). Built last by views.build_view.
"""
from __future__ import annotations

import json
from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import flags
from envsnap.analysis.compare.view_model import MISSING, PROCESS_FIELDS, View, agree, norm
from envsnap.model import keys
from envsnap.model.keys import Subject, env_subject
from envsnap.model.workers import (
    COMMAND,
    SERVER,
    SOURCE_LABELS,
    SeenProcess,
    command_records,
    live_environ,
    role_kind,
    role_kinds,
    run_environs,
    seen_processes,
    tp_workers,
)


def workers_view(view: View, processes: Optional[Dict[str, Any]], probe: Optional[Dict[str, Any]],
                  hint: flags.Hints, run_line: Optional[flags.CommandLine], runs: Any = None) -> None:
    procs = {k: v for k, v in ((processes or {}).get("processes") or {}).items() if isinstance(v, dict)}
    records = {k: v for k, v in ((probe or {}).get("records") or {}).items() if isinstance(v, dict)}
    commands = command_records(probe or {})
    if not procs and not records and not commands and not run_environs(runs)[1]:
        return
    seen = seen_processes(processes or {}, probe or {}, runs)
    kinds = role_kinds(processes or {}, probe or {})
    workers = tp_workers(seen, kinds)
    view.workers_are_tp = any(kinds.get(k) == "scheduler" for k in workers)
    view.workers_are_command = bool(workers) and all(seen[k].group == COMMAND for k in workers)
    envs: Dict[str, Dict[str, Any]] = {}
    flat_of: Dict[str, str] = {}
    sources: Set[str] = set()
    for key in workers:
        process = seen[key]
        if process.env is None:
            view.unreadable_workers.append(key)
            continue
        envs[key], flat_of[key] = process.env, process.flat
        view.worker_views[key] = (process.env, process.source_label)
        sources.add({"environ": "proc", "live_environ": "memory"}.get(process.source, "probe"))
    view.workers = sorted(envs)
    view.worker_env_source = next(iter(sources)) if len(sources) == 1 else ("mixed" if sources else "")
    if envs:
        agree(view, "workers", envs, flat_of,
               lambda name, split: env_subject("workers", name, "disagree" if split else ""))
        walk_workers = {seen[k].walk_key for k in workers if seen[k].walk_key}
        probe_workers = {seen[k].probe_key for k in workers if seen[k].probe_key and seen[k].group == SERVER}
        _server_parent_only(view, procs, records, walk_workers, probe_workers, envs, flat_of)
        _parent_only(view, envs, flat_of)
    for key, process in seen.items():
        if process.group == COMMAND:
            view.command_seen.add(keys.command_process_name(key) or key)
            record = commands.get(keys.command_process_name(key) or "") or {}
        else:
            record = records.get(process.probe_key) or {} if process.probe_key else {}
        proc = procs.get(process.walk_key) or {}
        line = flags.process_line(proc, record, hint)
        if process.group == COMMAND and flags.same_as_run(line, run_line):
            line = None  # the benchmark command itself: its items are run.*
        _process_keys(view, key, process, proc, record, line)


def _process_keys(view: View, key: str, process: SeenProcess, proc: Dict[str, Any], rec: Dict[str, Any],
                  line: Optional[flags.CommandLine] = None) -> None:
    """One process's own keys: `workers.<key>.<field>` for the server's, `command.<name>.<field>` for the
    `envsnap run` command's own processes (never among the server's). Its command line, itemised, stands
    for its title (the title of a process not retitled is that command line)."""
    records = "command_records" if process.group == COMMAND else "records"
    record_flat = keys.probe_record_flat(process.probe_key, records=records)
    walk_flat = keys.process_flat(process.walk_key)
    view.put("workers", process.title, (walk_flat if proc else record_flat,), Subject("process", key), presence=True)
    itemised = flags.put_process(view, Subject(flags.PROCESS, key), line,
                                 record_flat if flags.from_probe(rec) else walk_flat)
    for name in PROCESS_FIELDS:
        if name == "title" and (itemised or flags.bookkeeping_only(proc, rec)):
            continue
        if name in proc:
            view.put("workers", norm(proc[name], name), (keys.flat_key(walk_flat, name),), Subject("process", key, name))
    _placement_keys(view, key, walk_flat, proc)
    if isinstance(rec.get("init"), dict):
        view.put("workers", norm(rec["init"]), (keys.flat_key(record_flat, "init"),), Subject("process", key, "init"))
    changes = in_process_changes(record_flat, rec) if rec else memory_changes(process)
    for name, (value, flats) in changes.items():
        view.put("workers", value, flats,
                 Subject("in_process", key, keys.aspect("changed_in_process", name), variable=name), aggregate=True)
    modules = rec.get("modules")
    if isinstance(modules, dict):
        for name, shadow in sorted((modules.get("shadowed") or {}).items()):
            if isinstance(shadow, dict):
                view.put("workers", norm(shadow), (keys.flat_key(record_flat, "modules", "shadowed", name),),
                         Subject("process", key, keys.aspect(keys.SHADOWED, name)))
        for name, path in sorted((modules.get("elsewhere") or {}).items()):
            if name not in (modules.get("shadowed") or {}):
                view.put("workers", path, (keys.flat_key(record_flat, "modules", "elsewhere", name),),
                         Subject("process", key, keys.aspect(keys.MODULE, name)))


def _placement_keys(view: View, key: str, walk_flat: str, proc: Dict[str, Any]) -> None:
    """How the process was scheduled and placed (placement.py): `workers.<key>.placement.<field>`,
    `workers.<key>.cgroup.<field>` and its threads by name, `workers.<key>.threads.<name>` (a pool that
    grew, shrank, came or went)."""
    placed = proc.get("placement")
    if isinstance(placed, dict):
        for name, value in sorted(placed.items()):
            if name == "cgroup" and isinstance(value, dict):
                for field, limit in sorted(value.items()):
                    view.put("workers", limit, (keys.flat_key(walk_flat, "placement", "cgroup", field),),
                             Subject("process", key, keys.aspect("cgroup", field)))
            elif name != "note":
                view.put("workers", value, (keys.flat_key(walk_flat, "placement", name),),
                         Subject("process", key, keys.aspect("placement", name)))
    threads = proc.get("threads")
    if isinstance(threads, dict):
        for name, count in sorted(threads.items()):
            view.put("workers", count, (keys.flat_key(walk_flat, "threads", name),),
                     Subject("process", key, keys.aspect("threads", name)))


def in_process_changes(record_flat: str, record: Dict[str, Any]) -> Dict[str, Tuple[Dict[str, Any], List[str]]]:
    """{NAME: (value, flat keys)} for each variable a probed process changed in its own os.environ after
    start-up (by init_process_group and by exit), whatever its title or role: /proc/PID/environ never
    shows these, and a process that never reaches init_process_group shows them only here.

    The value is {"start": value at start, "after": [each later value that differs from it, in stage
    order, None = removed]}: the same change reads the same whether or not the process lived to exit.
    """
    start = record.get("env_at_start")
    if not isinstance(start, dict):
        return {}
    stages: List[Tuple[str, Dict[str, Any]]] = []
    for stage in ("init", "exit"):
        env = record.get(f"env_at_{stage}")
        if isinstance(env, dict):
            stages.append((stage, env))
    names: Set[str] = set()
    for _, env in stages:
        names.update(n for n in set(env) | set(start) if env.get(n) != start.get(n))
    out: Dict[str, Tuple[Dict[str, Any], List[str]]] = {}
    for name in sorted(names):
        after: List[Any] = []
        flats = [keys.flat_key(record_flat, "env_at_start", name)] if name in start else []
        for stage, env in stages:
            value = env.get(name)
            if value != start.get(name) and value not in after:
                after.append(value)
            if name in env:
                flats.append(keys.flat_key(record_flat, f"env_at_{stage}", name))
        out[name] = ({"start": start.get(name), "after": after}, flats)
    return out


def memory_changes(process: SeenProcess) -> Dict[str, Tuple[Dict[str, Any], List[str]]]:
    """{NAME: (value, flat keys)} for each variable a process not probed changed in-process, as its memory
    (the C environ at capture, or as a run went on) shows against /proc/PID/environ (the block at exec):
    in_process_changes' shape, "start" being the value at exec. Only where both were read (a title that
    overwrote the exec block leaves nothing to compare with: then memory is the process's environment)."""
    live, at_exec = process.env, process.exec_env
    if process.source != "live_environ" or process.in_probe or live is None or at_exec is None:
        return {}
    out: Dict[str, Tuple[Dict[str, Any], List[str]]] = {}
    for name in sorted(n for n in set(live) | set(at_exec) if live.get(n) != at_exec.get(n)):
        flats = [keys.flat_key(flat, name) for flat, env in ((process.exec_flat, at_exec), (process.flat, live))
                 if name in env]
        out[name] = ({"start": at_exec.get(name), "after": [live.get(name)]}, flats)
    return out


def _display_names(procs: Dict[str, Dict[str, Any]], records: Dict[str, Dict[str, Any]]) -> Dict[Tuple[str, str], str]:
    """A name per (source, key) for evidence lines. The process walk and the probe key processes on their
    own ("python-0" in one may be "sglang-main" in the other: the probe keys by the title a process had
    when it last wrote); the same pid ties them, and the name that carries a role wins."""
    by_pid: Dict[Any, List[Tuple[str, str, str]]] = {}
    for source, entries in (("proc", procs), ("probe", records)):
        for key, entry in entries.items():
            pid = entry.get("pid")
            by_pid.setdefault(pid if isinstance(pid, int) else None, []).append((source, key, role_kind(entry)))
    names: Dict[Tuple[str, str], str] = {}
    for pid, found in by_pid.items():
        if pid is None or len(found) == 1:
            for source, key, _ in found:
                names[(source, key)] = key
            continue
        best = sorted(found, key=lambda f: (f[2] == "other", f[0] != "proc", f[1]))[0][1]
        for source, key, _ in found:
            names[(source, key)] = best
    return names


def _spawner(entries: Dict[str, Dict[str, Any]], workers: Set[str]) -> Optional[str]:
    """The one process (in one source) that started the TP workers, if that source shows it."""
    parents = {p for p in (entries[w].get("parent_key") for w in workers if w in entries)
               if isinstance(p, str)} - workers
    if len(parents) != 1:
        return None
    parent = next(iter(parents))
    return parent if parent in entries else None


def _server_parent_only(view: View, procs: Dict[str, Dict[str, Any]], records: Dict[str, Dict[str, Any]],
                        walk_workers: Set[str], probe_workers: Set[str], envs: Dict[str, Dict[str, Any]],
                        flat_of: Dict[str, str]) -> None:
    """Performance-relevant variables the server's parent process had that no TP worker saw.

    /proc/PID/environ of the parent is its environment at exec, so a variable it set in-process
    after starting the workers (os.environ[...] in a patched engine.py) shows only in the probe's
    later records of it (exit, init) and in children it started afterwards (the detokenizer):
    those are "late" evidence, flagged when no worker saw that value. The parent's own exec-time
    environment (probe at start, /proc) is flagged only when the workers lack the variable
    altogether, since SGLang itself changes some values for its workers before starting them.
    """
    names = _display_names(procs, records)
    late: List[Tuple[str, str, Dict[str, Any], str]] = []  # (process, source, env, flat prefix)
    early: List[Tuple[str, str, Dict[str, Any], str]] = []
    spawner = None
    pmain = _spawner(records, probe_workers)
    if pmain is not None:
        spawner = names.get(("probe", pmain), pmain)
        rec = records[pmain]
        for field_name in ("env_at_exit", "env_at_init"):
            if isinstance(rec.get(field_name), dict):
                late.append((spawner, SOURCE_LABELS[field_name], rec[field_name],
                             keys.probe_record_flat(pmain, field_name)))
        if isinstance(rec.get("env_at_start"), dict):
            early.append((spawner, SOURCE_LABELS["env_at_start"], rec["env_at_start"],
                          keys.probe_record_flat(pmain, "env_at_start")))
        for key in sorted(records):
            child = records[key]
            if (child.get("parent_key") == pmain and key not in probe_workers and role_kind(child) != "scheduler"
                    and isinstance(child.get("env_at_start"), dict)):
                late.append((names.get(("probe", key), key), SOURCE_LABELS["env_at_start"], child["env_at_start"],
                             keys.probe_record_flat(key, "env_at_start")))
    qmain = _spawner(procs, walk_workers)
    if qmain is not None:
        spawner = spawner or names.get(("proc", qmain), qmain)
        for key in sorted(procs):
            proc = procs[key]
            now = live_environ(proc)
            if key == qmain and now is not None:  # its environment now, in-process changes included: late
                late.append((names.get(("proc", key), key), SOURCE_LABELS["live_environ"], now,
                             keys.process_flat(key, "live_environ")))
            readable = proc.get("environ_status", "ok") == "ok" and isinstance(proc.get("environ"), dict)
            if not readable:
                continue
            if key == qmain:
                early.append((names.get(("proc", key), key), SOURCE_LABELS["environ"], proc["environ"],
                              keys.process_flat(key, "environ")))
            elif proc.get("parent_key") == qmain and key not in walk_workers and role_kind(proc) != "scheduler":
                late.append((names.get(("proc", key), key), SOURCE_LABELS["environ"], proc["environ"],
                             keys.process_flat(key, "environ")))
    if spawner is None:
        return

    def first_values(sources: List[Tuple[str, str, Dict[str, Any], str]]) -> Dict[str, Any]:
        found: Dict[str, Any] = {}
        for _, _, env, _ in sources:
            for name, value in env.items():
                if name not in found and knowledge.is_performance_variable(name):
                    found[name] = value
        return found

    late_values, early_values = first_values(late), first_values(early)
    for name in sorted(set(late_values) | set(early_values)):
        seen = {k: env.get(name) for k, env in envs.items()}
        if name in late_values:
            value = late_values[name]
            is_late = early_values.get(name, MISSING) != value
            if any(v == value for v in seen.values()):
                continue
            if not is_late and any(v is not None for v in seen.values()):
                continue
        else:
            value, is_late = early_values[name], False
            if any(v is not None for v in seen.values()):
                continue  # a changed value: SGLang's _set_envs_and_config does that on purpose
        distinct = {json.dumps(v, default=str) for v in seen.values()}
        workers_value = next(iter(seen.values())) if len(distinct) == 1 else "mixed"
        has = [(who, src) for who, src, env, _ in late + early if env.get(name, MISSING) == value]
        lacks = [(who, src) for who, src, env, _ in early if name not in env] if is_late else []
        flats = [keys.flat_key(prefix, name) for _, _, env, prefix in late + early
                 if env.get(name, MISSING) == value]
        flats += [keys.flat_key(flat_of[k], name) for k in sorted(envs) if name in envs[k]]
        view.put("workers", {"parent": value, "workers": workers_value, "in": "server"}, flats,
                 env_subject("parent_only", name, "server"), aggregate=True)
        view.parent_only_info[name] = {"process": spawner, "late": is_late, "has": has, "lacks": lacks}


def _parent_only(view: View, envs: Dict[str, Dict[str, Any]], flat_of: Dict[str, str]) -> None:
    """Performance-relevant variables set in the capturing shell that no worker sees with that value
    (unless the server's own parent already accounts for them: the stronger evidence)."""
    for name, value in view.parent_env.items():
        if not knowledge.is_performance_variable(name):
            continue
        if name in view.parent_only_info:
            view.parent_only_info[name]["shell"] = value
            continue
        seen = {k: env.get(name) for k, env in envs.items()}
        if any(v == value for v in seen.values()):
            continue
        distinct = {json.dumps(v, default=str) for v in seen.values()}
        workers_value = next(iter(seen.values())) if len(distinct) == 1 else "mixed"
        flats = [keys.env_var_flat(name)] + [keys.flat_key(flat_of[k], name) for k in sorted(envs) if name in envs[k]]
        view.put("workers", {"parent": value, "workers": workers_value},
                 flats, env_subject("parent_only", name, "shell"), aggregate=True)
