"""Walk a process tree: every process's command line, role, affinity and environment as /proc shows it.

Three facts shape this module:

* Processes come and go while we look (a tokenizer worker restarts, a benchmark
  client exits). Every read can fail with NoSuchProcess or AccessDenied; each becomes
  a per-process status ("gone", "denied"), never an exception out of the walk. A pid
  that was reused between listing and reading is caught by comparing create times.
* /proc/PID/environ is the environment *as it was at exec*. In-process changes
  (`os.environ[...] = ...` in SGLang's `_set_envs_and_config`, a sitecustomize.py) are
  invisible there; the probe (envsnap/probe/runtime.py) records those.
* A process's environment *now* is the C `environ` array in its memory: read without stopping it
  (live_environ.py) into "live_environ", with "live_environ_status"/"live_environ_note" where the
  kernel refused (another user, Yama) or it could not be located (a static binary).
* How each process is scheduled and placed (policy, autogroup, memory nodes, cgroup limits) and its
  threads by name are placement.py's: "placement" and "threads".
* setproctitle (used by SGLang for every scheduler) reuses the argv+environ memory
  area for the title and clears it: /proc/PID/environ then reads as NUL bytes (checked
  with setproctitle 1.3.8: 1307 bytes, all NUL; with SPT_NOENV=1 the environment stays).
  Such a process did not lose its environment; we just cannot see it. It is reported as
  "unreadable" with a note, never as an empty environment.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

import psutil

from envsnap.capture import procfs
from envsnap.capture.collectors import live_environ, placement, roles as roles_mod
from envsnap.redact import redact_argv, redact_env

UNREADABLE_NOTE = ("environment unreadable: process title overwrote it; start with SPT_NOENV=1 "
                   "or use the probe (envsnap probe install)")
DENIED_NOTE = ("not permitted to read this process's environment (another user's process): "
               "run envsnap as that user or as root, or use the probe")


def classify_environ(raw: bytes) -> Tuple[str, Optional[Dict[str, str]], str]:
    """Read the bytes of /proc/PID/environ: (environ_status, environment or None, note).

    An empty file is a process started with an empty environment (`env -i`): that is
    a real, empty environment. A non-empty area that is all NUL, or that does not start
    with NAME=value, was overwritten in place (setproctitle): unreadable.
    """
    if not raw:
        return "ok", {}, ""
    if not raw.strip(b"\0"):
        return "unreadable", None, UNREADABLE_NOTE
    if raw[:1] == b"\0":
        # Seen with setproctitle 1.3.8 in a spawn child: the head is cleared but the last
        # entries (here the ones the parent had added in-process) survive at the end.
        # Showing them would present two variables as the whole environment.
        fragments = len([e for e in raw.split(b"\0") if e])
        return "unreadable", None, (UNREADABLE_NOTE + f" ({fragments} stale fragment{'s' if fragments != 1 else ''} "
                                    "left at the end of the cleared area are not shown)")
    env: Dict[str, str] = {}
    for entry in raw.split(b"\0"):
        if not entry:
            continue
        name, sep, value = entry.partition(b"=")
        if not sep or not name:
            # Title text spilled into the environment area: what follows is not trustworthy.
            return "unreadable", None, UNREADABLE_NOTE + " (partly overwritten)"
        env[name.decode("utf-8", "surrogateescape")] = value.decode("utf-8", "surrogateescape")
    return "ok", env, ""


def read_environ(pid: int) -> Tuple[str, Optional[Dict[str, str]], str]:
    """/proc/PID/environ, classified; never raises."""
    raw, status, note = read_environ_bytes(pid)
    if raw is not None:
        return classify_environ(raw)
    return _psutil_environ(pid) if status == NO_PROCFS else (status, None, note)


NO_PROCFS = "no procfs"
# Read whole: the kernel caps exec's strings at a quarter of the stack limit (a few MiB); an in-process setenv is
# not in this block at all.
MAX_ENVIRON_BYTES = 64 << 20


def read_environ_bytes(pid: int) -> Tuple[Optional[bytes], str, str]:
    """/proc/PID/environ's bytes, unclassified (run telemetry classifies them once its run is over), or None with
    the status and note of why not (NO_PROCFS: no /proc at all); never raises."""
    path = f"/proc/{pid}/environ"
    try:
        return procfs.read_file(path, MAX_ENVIRON_BYTES), "ok", ""
    except FileNotFoundError:
        if not os.path.isdir("/proc/self"):
            return None, NO_PROCFS, ""
        return None, "gone", "process exited"
    except ProcessLookupError:
        return None, "gone", "process exited"
    except PermissionError:
        return None, "denied", DENIED_NOTE
    except OSError as exc:
        return None, "denied", f"cannot read {path}: {exc.strerror or exc}"


def _psutil_environ(pid: int) -> Tuple[str, Optional[Dict[str, str]], str]:
    try:
        return "ok", dict(psutil.Process(pid).environ()), ""
    except psutil.NoSuchProcess:
        return "gone", None, "process exited"
    except psutil.AccessDenied:
        return "denied", None, DENIED_NOTE
    except Exception as exc:  # platform without environ support
        return "denied", None, f"cannot read the environment: {exc}"


def divergence(parent: Dict[str, str], child: Dict[str, str]) -> Dict[str, Any]:
    """What a child's exec-time environment adds, drops and changes relative to its parent's."""
    added = {k: child[k] for k in child if k not in parent}
    removed = sorted(k for k in parent if k not in child)
    changed = {k: {"parent": parent[k], "child": child[k]} for k in child if k in parent and parent[k] != child[k]}
    return {"added": added, "removed": removed, "changed": changed}


def _redact_divergence(div: Dict[str, Any]) -> Dict[str, Any]:
    changed = {name: {"parent": redact_env({name: pair["parent"]})[name], "child": redact_env({name: pair["child"]})[name]}
               for name, pair in div["changed"].items()}
    return {"added": redact_env(div["added"]), "removed": div["removed"], "changed": changed}


def children_map() -> Dict[int, List[Tuple[float, int]]]:
    """{ppid: [(create_time, pid), ...]} from one pass over /proc (psutil's children() rescans each call)."""
    kids: Dict[int, List[Tuple[float, int]]] = {}
    for proc in psutil.process_iter(["ppid", "create_time"]):
        info = proc.info
        ppid = info.get("ppid")
        if ppid is None:
            continue
        kids.setdefault(ppid, []).append((info.get("create_time") or 0.0, proc.pid))
    for value in kids.values():
        value.sort()
    return kids


def inspect(pid: int, expected_create_time: Optional[float] = None) -> Dict[str, Any]:
    """Everything psutil can tell about one process; per-field failures become data."""
    info: Dict[str, Any] = {"pid": pid, "status": "ok"}
    denied: List[str] = []
    try:
        proc = psutil.Process(pid)
        if expected_create_time and abs(proc.create_time() - expected_create_time) > 0.01:
            return {"pid": pid, "status": "gone", "note": "exited (its pid was reused)"}
    except psutil.NoSuchProcess:
        return {"pid": pid, "status": "gone", "note": "exited before it could be read"}
    except psutil.AccessDenied:
        return {"pid": pid, "status": "denied", "note": "not permitted to read this process"}
    fields: List[Tuple[str, Callable[[], Any]]] = [
        ("ppid", proc.ppid), ("name", proc.name), ("cmdline", proc.cmdline), ("exe", proc.exe),
        ("cwd", proc.cwd), ("nice", proc.nice), ("num_threads", proc.num_threads),
        ("psutil_status", proc.status),
    ]
    if hasattr(proc, "cpu_affinity"):
        fields.append(("cpu_affinity", proc.cpu_affinity))
    try:
        with proc.oneshot():
            for name, getter in fields:
                try:
                    info[name] = getter()
                except psutil.ZombieProcess:
                    info["status"] = "gone"
                    info["note"] = "exited (zombie, not yet reaped by its parent)"
                    break
                except psutil.NoSuchProcess:
                    info["status"] = "gone"
                    info["note"] = "exited while being read"
                    break
                except psutil.AccessDenied:
                    denied.append(name)
                except OSError as exc:  # e.g. a vanished cwd: a fact about the process
                    info.setdefault("read_errors", {})[name] = str(exc.strerror or exc)
    except psutil.NoSuchProcess:
        info["status"] = "gone"
        info.setdefault("note", "exited while being read")
    if info.get("psutil_status") == psutil.STATUS_ZOMBIE:
        info["status"] = "gone"
        info["note"] = "exited (zombie, not yet reaped by its parent)"
    info.pop("psutil_status", None)
    if "cmdline" in info:
        cmd = list(info["cmdline"])
        while cmd and cmd[-1] == "":
            cmd.pop()  # setproctitle pads the old argv area with NULs
        info["cmdline"] = cmd
    if "cpu_affinity" in info:
        info["cpu_affinity"] = sorted(info["cpu_affinity"])
    if denied:
        info["denied_fields"] = sorted(denied)
        if "cmdline" in denied and "ppid" in denied:
            info["status"] = "denied"
    return info


def _environ_for(info: Dict[str, Any]) -> Tuple[str, Optional[Dict[str, str]], str]:
    if info["status"] == "gone":
        return "gone", None, info.get("note", "process exited")
    if info["status"] == "denied":
        return "denied", None, DENIED_NOTE
    status, env, note = read_environ(info["pid"])
    if status == "ok" and not env and info.get("cmdline") == [] and info.get("status") == "ok":
        # Kernel threads have neither a command line nor an environment.
        return "ok", {}, ""
    return status, env, note


def walk(
    roots: Sequence[int],
    deadline: float,
    redact: bool = True,
    gpus: Optional[Dict[int, List[int]]] = None,
    forced_main: Iterable[int] = (),
    on_visit: Optional[Callable[[int], None]] = None,
) -> Dict[str, Any]:
    """Walk each root's tree; return the processes section data.

    `on_visit(pid)` is called just before a process is read: tests use it to make a
    process exit mid-walk. `deadline` is a time.monotonic() value; a walk past it stops
    and says so in "errors".
    """
    kids = children_map()
    mounts = placement.CgroupMounts()
    forced = set(forced_main)
    alloc = roles_mod.KeyAllocator()
    processes: Dict[str, Dict[str, Any]] = {}
    raw_envs: Dict[str, Dict[str, str]] = {}
    root_keys: List[str] = []
    errors: Dict[str, str] = {}
    seen: Set[int] = set()

    def visit(pid: int, parent_key: Optional[str], create_time: Optional[float]) -> Optional[str]:
        if pid in seen:
            return None
        seen.add(pid)
        if time.monotonic() > deadline:
            errors["walk"] = "stopped at the capture deadline; some processes were not read"
            return None
        if on_visit is not None:
            on_visit(pid)
        info = inspect(pid, create_time)
        if parent_key is None and info["status"] == "gone":
            errors[f"pid {pid}"] = "no such process"
            return None
        env_status, env, note = _environ_for(info)
        cmdline = info.get("cmdline") or []
        role = roles_mod.parse_role(cmdline) if cmdline else None
        if role is None and pid in forced:
            role = {"kind": "main", "key": "sglang-main"}
        if role is None:
            role = roles_mod.helper_role(cmdline)
        if role is None:
            role = roles_mod.rank_role(env)
        if role is None:
            base = roles_mod.safe_name(info.get("name") or (os.path.basename(cmdline[0]) if cmdline else "")) \
                if info["status"] != "gone" or cmdline else "gone"
            key = alloc.numbered(base, sep="-")
            role = {"kind": "other"}
        elif role.pop("numbered", False):
            key = alloc.numbered(role["key"], sep="_")
        else:
            key = alloc.take(role["key"])
        role.pop("key", None)
        entry: Dict[str, Any] = {
            "pid": pid,
            "ppid": info.get("ppid"),
            "parent_key": parent_key,
            "title": roles_mod.title_of(cmdline),
            "cmdline": redact_argv(cmdline) if redact else list(cmdline),
            "role": role,
            "status": info["status"],
            "environ_status": env_status,
        }
        for field in ("name", "exe", "cwd", "cpu_affinity", "nice", "num_threads", "denied_fields", "read_errors"):
            if field in info:
                entry[field] = info[field]
        if info.get("note"):
            entry["note"] = info["note"]
        if note:
            entry["environ_note"] = note
        if env is not None and env_status == "ok":
            entry["environ"] = redact_env(env) if redact else dict(env)
            raw_envs[key] = env
        if info["status"] == "ok":
            entry["placement"] = placement.read_placement(pid, mounts)
            groups = placement.thread_groups(pid)
            if groups is not None:
                entry["threads"] = groups
        if info["status"] == "ok" and cmdline:  # a kernel thread has no user memory
            live = live_environ.read_live_environ(pid, deadline)
            entry["live_environ_status"] = live.status
            if live.note:
                entry["live_environ_note"] = live.note
            if live.env is not None:
                entry["live_environ"] = redact_env(live.env) if redact else dict(live.env)
        if gpus is not None:
            entry["gpus"] = sorted(gpus.get(pid, []))
        if redact:
            entry["title"] = " ".join(entry["cmdline"])
        processes[key] = entry
        for child_time, child_pid in kids.get(pid, []):
            visit(child_pid, key, child_time)
        return key

    for root in roots:
        key = visit(int(root), None, None)
        if key is not None:
            root_keys.append(key)

    for key, entry in processes.items():
        parent_key = entry.get("parent_key")
        if parent_key in raw_envs and key in raw_envs:
            div = divergence(raw_envs[parent_key], raw_envs[key])
            entry["divergence"] = _redact_divergence(div) if redact else div
        elif parent_key is not None and entry["environ_status"] != "ok":
            entry["divergence_note"] = "not compared: this process's environment is " + entry["environ_status"]
    return {"processes": processes, "roots": root_keys, "errors": errors}


def find_sglang_roots(exclude: Iterable[int] = ()) -> Tuple[List[int], List[int]]:
    """Running SGLang servers: (root pids, pids that are mains by position rather than by command line).

    A root is a `sglang.launch_server` / `sglang serve` process, or — for servers started
    from Python through `sglang.Engine`, or whose main was renamed — the nearest ancestor
    of `sglang::` titled processes that is not titled itself.
    """
    excluded = set(exclude) | {os.getpid()}
    procs: Dict[int, Tuple[int, List[str], float]] = {}
    for proc in psutil.process_iter(["ppid", "cmdline", "create_time"]):
        info = proc.info
        procs[proc.pid] = (info.get("ppid") or 0, [a for a in (info.get("cmdline") or []) if a], info.get("create_time") or 0.0)
    mains = {pid for pid, (_, cmd, _) in procs.items() if cmd and roles_mod.is_sglang_main(cmd) and pid not in excluded}
    titled = {pid for pid, (_, cmd, _) in procs.items()
              if cmd and pid not in mains and (roles_mod.parse_role(cmd) or {}).get("kind") not in (None, "main")}
    by_position = set()
    candidates = set(mains)
    for pid in titled:
        current = pid
        while True:
            parent = procs.get(current, (0, [], 0.0))[0]
            if parent in titled:
                current = parent
                continue
            if parent in mains or parent in candidates:
                candidates.add(parent)
            elif parent > 1 and parent in procs and parent not in excluded:
                candidates.add(parent)
                if not roles_mod.runs_another_package(procs[parent][1]):
                    by_position.add(parent)
            else:
                candidates.add(current)  # orphaned: its parent died or is init
            break

    def has_candidate_ancestor(pid: int) -> bool:
        seen = set()
        current = procs.get(pid, (0, [], 0.0))[0]
        while current > 1 and current in procs and current not in seen:
            if current in candidates:
                return True
            seen.add(current)
            current = procs[current][0]
        return False

    roots = [pid for pid in candidates if not has_candidate_ancestor(pid)]
    roots.sort(key=lambda pid: (" ".join(procs.get(pid, (0, [], 0.0))[1]), procs.get(pid, (0, [], 0.0))[2], pid))
    return roots, sorted(by_position & set(roots))
