"""The one reader of "what each process saw": a snapshot's processes and probe records, merged.

A process can be seen twice: walking the process tree (section processes: /proc/PID/environ, the
environment as it was at exec) and by the in-process probe (section probe: os.environ inside the
process at start, at init_process_group, at exit). Which environment a process ran with is decided
here and nowhere else:

  1. the probe at init_process_group (what NCCL read),
  2. else the probe at start,
  3. else /proc/PID/environ, when it was readable (not clobbered by setproctitle, not denied),

and the /proc view is kept beside a probe view, so changes made in-process stay visible. Processes
are ordered the way people read a server: main process, DP controller, tokenizer, detokenizer,
then the schedulers by DP/TP/PP rank; probe-only processes by the rank they initialised as.
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from envsnap.model.snapshot import as_dict

# Reading order of process kinds (roles.py gives kinds from SGLang's process titles).
KIND_ORDER = {"main": 0, "dp_controller": 1, "tokenizer": 2, "detokenizer": 3, "scheduler": 4, "rank": 5, "other": 6}
# Front-end processes: not TP workers, whatever else runs.
FRONT_END_KINDS = ("main", "tokenizer", "detokenizer", "dp_controller")

# Where an environment was seen, as evidence lines and the report name it.
SOURCE_LABELS = {"env_at_init": "probe at init_process_group", "env_at_start": "probe at start",
                 "env_at_exit": "probe at exit", "environ": "/proc, as at exec"}
PRECEDENCE = ("env_at_init", "env_at_start")  # probe fields, most telling first; then /proc


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

    @property
    def source_label(self) -> str:
        return SOURCE_LABELS.get(self.source, "")



def _natural(text: str) -> Tuple[Any, ...]:
    return tuple(int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", text))


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


def seen_processes(processes: Mapping[str, Any], probe: Mapping[str, Any]) -> Dict[str, SeenProcess]:
    """Every process of one snapshot (section data of `processes` and `probe`), in reading order."""
    procs = {str(k): v for k, v in as_dict(processes.get("processes")).items() if isinstance(v, dict)}
    records = {str(k): v for k, v in as_dict(probe.get("records")).items() if isinstance(v, dict)}
    out: List[SeenProcess] = []
    for key in set(procs) | set(records):
        proc, record = procs.get(key, {}), records.get(key, {})
        walked_ok = proc.get("environ_status", "ok") == "ok" and isinstance(proc.get("environ"), dict)
        env, source, flat = None, "", ""
        for name in PRECEDENCE:
            if isinstance(record.get(name), dict):
                env, source, flat = record[name], name, f"probe.records.{key}.{name}"
                break
        exec_env = proc["environ"] if walked_ok and env is not None else None
        if env is None and walked_ok:
            env, source, flat = proc["environ"], "environ", f"processes.processes.{key}.environ"
        status = "ok" if env is not None else str(proc.get("environ_status") or "unreadable")
        entry = proc or record
        kind = role_kind(proc) if proc else ("rank" if role_kind(record) == "other" else role_kind(record))
        parent = proc.get("parent_key") if proc else record.get("parent_key")
        out.append(SeenProcess(
            key=key, title=str(proc.get("title") or record.get("title") or key), kind=kind,
            order=_order(entry if proc else record), parent=parent if isinstance(parent, str) else None,
            status=status, note=str(proc.get("environ_note") or ""), env=env, source=source, flat=flat,
            exec_env=exec_env, in_probe=bool(record), in_walk=bool(proc)))
    out.sort(key=lambda p: (KIND_ORDER[p.kind], p.order, _natural(p.key)))
    return {p.key: p for p in out}


def tp_workers(seen: Mapping[str, SeenProcess], roles: Mapping[str, str]) -> List[str]:
    """The TP workers (they run NCCL): the schedulers; without roles, every non-front-end process.

    `roles` maps each key to the role kind its own records give (a probe-only record is "rank" for
    reading order, but its role decides whether it is a worker)."""
    workers = sorted(k for k in seen if roles.get(k) == "scheduler")
    if not workers:
        workers = sorted(k for k in seen if roles.get(k, "other") not in FRONT_END_KINDS)
    return workers or sorted(seen)


def role_kinds(processes: Mapping[str, Any], probe: Mapping[str, Any]) -> Dict[str, str]:
    """Each process key's role kind, the walk's over the probe's (the walk reads the title it has now)."""
    kinds = {str(k): role_kind(r) for k, r in as_dict(probe.get("records")).items() if isinstance(r, dict)}
    kinds.update({str(k): role_kind(p) for k, p in as_dict(processes.get("processes")).items() if isinstance(p, dict)})
    return kinds
