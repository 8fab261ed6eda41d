"""The one reader of "what each process saw": a snapshot's processes and probe records, merged.

A process can be seen twice, by the process-tree walk (/proc/PID/environ: the environment at exec; and its
C `environ` read from memory at capture: the environment now, capture/collectors/live_environ.py) and by
the in-process probe (os.environ inside it), each keyed its own way: joined here, one process one entry,
and which environment it ran with is decided here and nowhere else (PRECEDENCE).
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from envsnap.format import natural_key
from envsnap.model.keys import command_process, flat_key as keys_flat, probe_record_flat, process_flat
from envsnap.model.snapshot import as_dict

# Reading order of process kinds (roles.py gives kinds from SGLang's process titles): main process, DP
# controller, tokenizer, detokenizer, then the schedulers by DP/TP/PP rank; probe-only processes by the
# rank they initialised as.
KIND_ORDER = {"main": 0, "dp_controller": 1, "tokenizer": 2, "detokenizer": 3, "scheduler": 4, "rank": 5, "other": 6}
# Front-end processes: not TP workers, whatever else runs.
FRONT_END_KINDS = ("main", "tokenizer", "detokenizer", "dp_controller")

# Where an environment was seen, as evidence lines and the report name it.
SOURCE_LABELS = {"env_at_init": "probe at init_process_group", "env_at_start": "probe at start",
                 "env_at_exit": "probe at exit", "environ": "/proc, as at exec",
                 "live_environ": "process memory, at capture"}
# Which environment a process ran with: the probe at init_process_group (what NCCL read), else the probe
# at start, else its C `environ` read from memory at capture (in-process changes and titled processes
# included; the process walk's "live_environ"), else /proc/PID/environ when it was readable (not
# clobbered by setproctitle, not denied). The /proc view is kept beside a probe or memory view, so
# changes made in-process stay visible.
PRECEDENCE = ("env_at_init", "env_at_start")  # probe fields, most telling first; then memory, then /proc


# `envsnap run`'s own command (the benchmark client) is not the server: its processes (the probe's
# "command_records" of the compared run) form a group of their own, apart from the server's, in the model
# and in every output built on it.
SERVER, COMMAND = "server", "command"


class SeenProcess(NamedTuple):
    """One process as envsnap saw it."""
    key: str
    title: str
    kind: str  # a KIND_ORDER key
    order: Tuple[int, int, int]  # (dp, tp, pp) rank, for sorting peers
    parent: Optional[str]
    status: str  # ok | unreadable | clobbered | denied | gone ...
    note: str
    env: Optional[Dict[str, Any]]  # what the process ran with (None: not readable)
    source: str  # "env_at_init" | "env_at_start" | "environ" | ""
    flat: str  # flattened snapshot key of `env` ("probe.records.K.env_at_init")
    exec_env: Optional[Dict[str, Any]]  # /proc's view beside a probe view (in-process changes), else None
    in_probe: bool
    in_walk: bool
    group: str = SERVER  # SERVER | COMMAND (the `envsnap run` command's own processes)
    walk_key: str = ""  # its key in the processes section ("" when the walk did not see it)
    probe_key: str = ""  # its key in the probe section's records or command_records ("" when not probed)
    initialised: bool = False  # it called init_process_group (the probe's init record): a distributed worker
    exec_flat: str = ""  # flattened snapshot key of `exec_env`

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS.get(self.source, "")


def role_kind(entry: Mapping[str, Any]) -> str:
    """The role kind of a process or probe record (roles.py's kinds; 'other' without a role)."""
    role = entry.get("role")
    kind = role.get("kind", "other") if isinstance(role, dict) else "other"
    return kind if kind in KIND_ORDER else "other"


def _order(entry: Mapping[str, Any]) -> Tuple[int, int, int]:
    role = as_dict(entry.get("role"))
    rank = as_dict(entry.get("init")).get("rank")

    def num(value: Any) -> int:
        return value if isinstance(value, int) and not isinstance(value, bool) else 0
    if role:
        return num(role.get("dp")), num(role.get("tp")), num(role.get("pp"))
    return 0, num(rank), 0


def _pid(entry: Mapping[str, Any]) -> Optional[int]:
    pid = entry.get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


def _joined_key(walk_key: str, proc: Mapping[str, Any], probe_key: str, record: Mapping[str, Any]) -> str:
    """The key of a process both collectors saw: an SGLang role first (the walk reads the title the process
    has now), else a rank, else the walk's key."""
    if role_kind(proc) != "other":
        return walk_key
    if role_kind(record) != "other" or isinstance(as_dict(record.get("role")).get("rank"), int):
        return probe_key
    return walk_key


def command_records(probe: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """The compared run's command processes ({process key: record}, the run prefix taken off)."""
    compared = probe.get("compared_run")
    out: Dict[str, Dict[str, Any]] = {}
    for key, record in as_dict(probe.get("command_records")).items():
        run, _, name = str(key).partition("/")
        if isinstance(record, dict) and name and record.get("run") == compared and run == str(compared):
            out[name] = record
    return out


def run_environs(runs: Any) -> Tuple[int, Dict[str, Dict[str, Any]]]:
    """(index, environs) of the last successful run whose telemetry read its command's processes' environments
    (measure/environ_sampling.py); (-1, {}) when none did."""
    found: Tuple[int, Dict[str, Dict[str, Any]]] = (-1, {})
    for index, run in enumerate(runs if isinstance(runs, list) else []):
        environs = as_dict(as_dict(run).get("telemetry")).get("environs") if isinstance(run, dict) else None
        if isinstance(run, dict) and run.get("ok") is not False and isinstance(environs, dict) and environs:
            found = (index, {str(k): v for k, v in environs.items() if isinstance(v, dict)})
    return found


def seen_processes(processes: Mapping[str, Any], probe: Mapping[str, Any], runs: Any = None) -> Dict[str, SeenProcess]:
    """Every process of one snapshot (section data of `processes` and `probe`), in reading order: the server's
    (walked and probed, joined by pid), then the compared run's command processes (the probe's records of them;
    without those, the environments the last run read from their memory: `runs`, the snapshot's runs)."""
    procs = {str(k): v for k, v in as_dict(processes.get("processes")).items() if isinstance(v, dict)}
    records = {str(k): v for k, v in as_dict(probe.get("records")).items() if isinstance(v, dict)}
    # The walk keys a process by the title it has now, the probe by the title it had when it last wrote (or
    # its rank): joined by pid, under the key that says most (an SGLang role, else a rank, else the walk's),
    # both sources' keys kept for evidence. The walk reads this machine's /proc (its entries carry no
    # host); a probe record names its host, so the join is by host too where both name one.
    walked_by_pid = {_pid(p): k for k, p in procs.items() if _pid(p) is not None}
    # (key, walk key, probe key) per process: the probe's records joined to the walk by pid
    members: List[Tuple[str, str, str]] = []
    joined = set()
    probe_to_key: Dict[str, str] = {}
    for probe_key in sorted(records):
        record = records[probe_key]
        walk_key = walked_by_pid.get(_pid(record))
        if walk_key is not None and procs[walk_key].get("host", record.get("host")) != record.get("host"):
            walk_key = None
        if walk_key is not None and walk_key not in joined:
            joined.add(walk_key)
            key = _joined_key(walk_key, procs[walk_key], probe_key, records[probe_key])
            members.append((key, walk_key, probe_key))
        else:
            members.append((probe_key, "", probe_key))
        probe_to_key[probe_key] = members[-1][0]
    members += [(k, k, "") for k in procs if k not in joined]
    walk_to_key = {w: k for k, w, _ in members if w}
    used: Dict[str, int] = {}
    out: List[SeenProcess] = []
    for key, walk_key, probe_key in members:
        used[key] = used.get(key, 0) + 1
        if used[key] > 1:  # a probe key equal to another process's walk key: keep both apart
            key = f"{key}#{used[key]}"
        proc, record = procs.get(walk_key, {}), records.get(probe_key, {})
        parent = proc.get("parent_key") if proc else record.get("parent_key")
        if isinstance(parent, str):
            parent = (walk_to_key if proc else probe_to_key).get(parent, parent)
        out.append(_seen(key, proc, record, walk_key, probe_key, "records", SERVER,
                         parent if isinstance(parent, str) else None))
    for name, record in sorted(command_records(probe).items()):
        key = command_process(name)
        parent = record.get("parent_key")
        out.append(_seen(key, {}, record, "", f"{record.get('run')}/{name}", "command_records", COMMAND,
                         command_process(parent) if isinstance(parent, str) else None))
    if not command_records(probe):
        index, environs = run_environs(runs)
        for name, entry in sorted(environs.items()):
            flat = keys_flat("runs", str(index), "telemetry", "environs", name)
            out.append(_seen(command_process(name), entry, {}, "", "", "command_records", COMMAND, None, flat))
    out.sort(key=lambda p: (p.group == COMMAND, KIND_ORDER[p.kind], p.order, natural_key(p.key)))
    return {p.key: p for p in out}


def names_by_pid(processes: Mapping[str, Any], probe: Mapping[str, Any]) -> Dict[int, str]:
    """{pid: the process's key} of the server's processes, as seen_processes keys them: another section that
    keys processes on its own (libraries: the walk's key, or the probe's) names each one the same way, so one
    process has one name in every key of a snapshot ("rank1", not "python-0" here and "rank1" there)."""
    procs = as_dict(processes.get("processes"))
    records = as_dict(probe.get("records"))
    out: Dict[int, str] = {}
    for process in seen_processes(processes, probe).values():
        if process.group != SERVER:
            continue
        for entry in (procs.get(process.walk_key), records.get(process.probe_key)):
            pid = _pid(as_dict(entry))
            if pid is not None:
                out.setdefault(pid, process.key)
    return out


def _seen(key: str, proc: Dict[str, Any], record: Dict[str, Any], walk_key: str, probe_key: str, field: str,
          group: str, parent: Optional[str], proc_flat: str = "") -> SeenProcess:
    """One process from its walk entry `proc` (or a run's environs entry, at `proc_flat`) and probe `record`."""
    proc_flat = proc_flat or process_flat(walk_key)
    walked_ok = proc.get("environ_status", "ok") == "ok" and isinstance(proc.get("environ"), dict)
    env, source, flat = None, "", ""
    for name in PRECEDENCE:
        if isinstance(record.get(name), dict):
            env, source, flat = record[name], name, probe_record_flat(probe_key, name, records=field)
            break
    if env is None and live_environ(proc) is not None:
        env, source, flat = live_environ(proc), "live_environ", keys_flat(proc_flat, "live_environ")
    exec_env = proc["environ"] if walked_ok and env is not None else None
    if env is None and walked_ok:
        env, source, flat = proc["environ"], "environ", keys_flat(proc_flat, "environ")
    status = "ok" if env is not None else str(proc.get("environ_status") or "unreadable")
    if proc:
        kind = role_kind(proc)
    elif group == COMMAND:
        kind = role_kind(record)
    else:
        kind = "rank" if role_kind(record) == "other" else role_kind(record)
    # /proc's note (a title overwrote the environment...) matters only where /proc is what was read; where
    # memory could not be read either, its reason is said beside it.
    note = str(proc.get("environ_note") or "") if source in ("", "environ") else ""
    if source in ("", "environ") and proc.get("live_environ_note") and proc.get("live_environ_status") != "ok":
        note = "; ".join(n for n in (note, f"memory: {proc['live_environ_note']}") if n)
    return SeenProcess(
        key=key, title=str(proc.get("title") or record.get("title") or key), kind=kind,
        order=_order(proc if proc else record), parent=parent, status=status,
        note=note, env=env, source=source, flat=flat, exec_env=exec_env,
        in_probe=bool(record), in_walk=bool(walk_key), group=group, walk_key=walk_key, probe_key=probe_key,
        initialised=isinstance(record.get("init"), dict),
        exec_flat=keys_flat(proc_flat, "environ") if exec_env is not None else "")


def live_environ(proc: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A walked process's environment read from its memory at capture (None: not read, or not readable)."""
    env = proc.get("live_environ")
    return env if proc.get("live_environ_status") == "ok" and isinstance(env, dict) else None


def tp_workers(seen: Mapping[str, SeenProcess], roles: Mapping[str, str]) -> List[str]:
    """The TP workers (they run NCCL): the server's schedulers; without roles, the server's processes that
    initialised a process group (init_process_group, seen by the probe), else every non-front-end process
    of the server; without server processes, the `envsnap run` command's own (what was measured).

    `roles` maps each key to the role kind its own records give (a probe-only record is "rank" for
    reading order, but its role decides whether it is a worker)."""
    server = {k: p for k, p in seen.items() if p.group == SERVER}
    pool = server or dict(seen)
    workers = sorted(k for k in pool if roles.get(k) == "scheduler")
    if not workers:
        workers = sorted(k for k in pool if pool[k].initialised)
    if not workers:
        workers = sorted(k for k in pool if roles.get(k, "other") not in FRONT_END_KINDS)
    return workers or sorted(pool)


def role_kinds(processes: Mapping[str, Any], probe: Mapping[str, Any]) -> Dict[str, str]:
    """Each process key (seen_processes' keys) to its role kind, the walk's over the probe's (the walk reads
    the title the process has now)."""
    seen = seen_processes(processes, probe)
    procs = as_dict(processes.get("processes"))
    records = as_dict(probe.get("records"))
    commands = command_records(probe)
    kinds: Dict[str, str] = {}
    for key, process in seen.items():
        if process.walk_key and isinstance(procs.get(process.walk_key), dict):
            kinds[key] = role_kind(procs[process.walk_key])
        elif process.group == COMMAND:
            kinds[key] = role_kind(commands.get(key.partition("/")[2], {}))
        else:
            kinds[key] = role_kind(as_dict(records.get(process.probe_key)))
    return kinds
