"""Parse NCCL's `NCCL_DEBUG=INFO` output: the settings NCCL says it actually used, per rank.

Line shapes (from real logs: tests/data/nccl/h200-*.log, NCCL 2.28.9, and
multi-rank logs quoted in NVIDIA/nccl issues #1189, #1538, #1595):

  <host>:<pid>:<tid> [<cuda dev>] NCCL INFO <message>
  [2026-11-29 08:38:33] <host>:<pid>:<tid> [0] init.cc:904 NCCL WARN Duplicate GPU detected : ...
  ... NCCL INFO NCCL version 2.28.9+cuda13.0
  ... NCCL INFO NCCL_NVLS_ENABLE set by environment to 0.           (integer parameters)
  ... NCCL INFO NCCL_PROTO set by environment to LL                 (string ones)
  ... NCCL INFO ncclCommInitRankConfig comm 0x.. rank 0 nranks 1 cudaDev 0 nvmlDev 0 busId 60 commId 0x.. - Init START
  ... NCCL INFO comm 0x.. rank 0 nRanks 1 nNodes 1 localRanks 1 localRank 0 MNNVL 0
  ... NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read
  ... NCCL INFO Channel 07/0 : 0[0] -> 2[0] [receive] via NET/IB/3/GDRDMA
  ... NCCL INFO 64 coll channels, 64 collnet channels, 0 nvls channels, 64 p2p channels, 64 p2p channels per peer
  ... NCCL INFO 805306368 Bytes -> Algo 1 proto 2 time 3970.683594   (NCCL_DEBUG_SUBSYS=TUNING; numbers)
  ... NCCL INFO AllReduce: 4096 Bytes -> Algo RING proto LL channel{Lo..Hi}={0..1}   (newer, src/enqueue.cc)

Lines may carry a prefix (mpirun --tag-output's "[0] ", a logger's timestamp), so the
NCCL part is searched, not anchored. Everything is grouped by process (host, pid) and
keyed by the process's rank: its rank in the largest communicator it initialised
(the world), so a TP sub-communicator does not renumber it.

A variable is logged only when NCCL reads it (a 1-rank job never reads NCCL_PROTO), so a
missing "set by environment" line is not proof that the variable was unset.
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

ABSENT_MEANS = "not read by NCCL, not proof of unset"

# WARN lines put the source location before "NCCL" ("[0] init.cc:904 NCCL WARN ...", NCCL 2.28.9).
_LINE = re.compile(r"(?P<host>[^\s:\[\]]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] (?:[\w./-]+:\d+ )?"
                   r"NCCL (?P<level>INFO|WARN|TRACE|ABORT) (?P<msg>.*)$")
_BARE = re.compile(r"NCCL (?P<level>INFO|WARN) (?P<msg>.*)$")
_VERSION = re.compile(r"^NCCL version (?P<version>\S+)")
_ENV = re.compile(r"^(?P<name>[A-Z][A-Z0-9_]*) set by environment to (?P<value>.*?)\s*$")
_INIT = re.compile(r"^(?P<func>ncclCommInit\w*) comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nranks (?P<nranks>\d+)"
                   r"(?: cudaDev (?P<cuda>-?\d+))?(?: nvmlDev (?P<nvml>-?\d+))?(?: busId (?P<bus>[0-9a-fA-F:.]+))?"
                   r"(?: commId (?P<commid>0x[0-9a-fA-F]+))?(?: localSize \d+)?(?: used \d+ bytes)?"
                   r"(?: - Init (?P<phase>START|COMPLETE))?")
_COMM = re.compile(r"^comm (?P<comm>0x[0-9a-fA-F]+) rank (?P<rank>\d+) nRanks (?P<nranks>\d+) nNodes (?P<nnodes>\d+) "
                   r"localRanks (?P<local_ranks>\d+) localRank (?P<local_rank>\d+)")
_TRANSPORT = re.compile(r"^Channel (?P<ch>\d+)(?:/\d+)? : (?P<src>\d+)\[\w+\] -> (?P<dst>\d+)\[\w+\]"
                        r"(?: \[(?P<dir>send|receive)\])? via (?P<via>\S+)")
_CHANNEL_COUNT = re.compile(r"^Channel \d+/(?P<n>\d+) :(?: +\d+)+\s*$")
_CHANNELS = re.compile(r"^(?P<coll>\d+) coll channels, (?P<collnet>\d+) collnet channels,(?: (?P<nvls>\d+) nvls channels,)?"
                       r" (?P<p2p>\d+) p2p channels, (?P<per_peer>\d+) p2p channels per peer")
_ALGO_NUM = re.compile(r"(?:(?P<func>\w+): )?\d+ Bytes -> Algo (?P<algo>\d+) proto (?P<proto>\d+)")
_ALGO_NAME = re.compile(r"(?:(?P<func>\w+): )?\d+ Bytes -> Algo (?P<algo>[A-Za-z_]+) proto (?P<proto>[A-Za-z0-9_]+)")
_USING_NET = re.compile(r"^Using network (?P<net>\S+)")

# nccl_common.h: algorithm and protocol indices as printed by the numeric tuning line.
_ALGOS = ["Tree", "Ring", "CollNetDirect", "CollNetChain", "NVLS", "NVLSTree", "PAT"]
_PROTOS = ["LL", "LL128", "Simple"]
# src/enqueue.cc prints names through ncclAlgoToString/ncclProtoToString ("RING", "SIMPLE"):
# one spelling for both line kinds, so a diff does not see Ring vs RING as a change.
_CANON = {name.lower(): name for name in _ALGOS + _PROTOS}
_CANON.update({"collnet_direct": "CollNetDirect", "collnet_chain": "CollNetChain", "nvls_tree": "NVLSTree"})


def _canon(name: str) -> str:
    return _CANON.get(name.lower(), name)


def _new_proc(host: Optional[str], pid: Optional[int]) -> Dict[str, Any]:
    return {"host": host, "pid": pid, "devs": set(), "env": {}, "transports": {}, "comms": {},
            "algorithms": set(), "protocols": set(), "warnings": [], "channels": None, "network": None,
            "version": None, "rings": set()}


def parse_lines(lines: Iterable[str], state: Optional[Dict[Tuple[Any, Any], Dict[str, Any]]] = None,
                order: Optional[List[Tuple[Any, Any]]] = None
                ) -> Tuple[Dict[Tuple[Any, Any], Dict[str, Any]], List[Tuple[Any, Any]]]:
    """Fold NCCL lines into per-process state {(host, pid): {...}} (pass state to continue)."""
    procs = state if state is not None else {}
    seen = order if order is not None else []
    for raw in lines:
        if "NCCL" not in raw:
            continue
        line = raw.rstrip("\r\n")
        match = _LINE.search(line)
        if match:
            key: Tuple[Any, Any] = (match.group("host"), int(match.group("pid")))
            dev: Optional[int] = int(match.group("dev"))
        else:
            match = _BARE.search(line)
            if not match:
                continue
            key, dev = (None, None), None
        if key not in procs:
            procs[key] = _new_proc(*key)
            seen.append(key)
        _fold(procs[key], match.group("level"), match.group("msg").strip(), dev)
    return procs, seen


def _fold(proc: Dict[str, Any], level: str, msg: str, dev: Optional[int]) -> None:
    if dev is not None:
        proc["devs"].add(dev)
    if level == "WARN":
        if len(proc["warnings"]) < 20:
            proc["warnings"].append(msg[:300])
        return
    m = _ENV.match(msg)
    if m:
        value = m.group("value")
        # Integer parameters end the sentence with a period ("... to 0."); strings do not.
        if re.fullmatch(r"-?\d+\.", value):
            value = value[:-1]
        proc["env"][m.group("name")] = value
        return
    m = _VERSION.match(msg)
    if m:
        proc["version"] = m.group("version")
        return
    m = _INIT.match(msg)
    if m:
        comm = proc["comms"].setdefault(m.group("comm"), {})
        comm.update({"function": m.group("func"), "rank": int(m.group("rank")), "nranks": int(m.group("nranks"))})
        for field, group in (("cuda_dev", "cuda"), ("nvml_dev", "nvml")):
            if m.group(group) is not None:
                comm[field] = int(m.group(group))
        if m.group("bus"):
            comm["bus_id"] = m.group("bus")
        if m.group("phase"):
            comm["phase"] = m.group("phase")
        return
    m = _COMM.match(msg)
    if m:
        comm = proc["comms"].setdefault(m.group("comm"), {})
        comm.setdefault("rank", int(m.group("rank")))
        comm.setdefault("nranks", int(m.group("nranks")))
        for field in ("nnodes", "local_ranks", "local_rank"):
            comm[field] = int(m.group(field))
        return
    m = _TRANSPORT.match(msg)
    if m:
        via = m.group("via")
        proc["transports"][via] = proc["transports"].get(via, 0) + 1
        return
    m = _CHANNEL_COUNT.match(msg)
    if m:
        proc["rings"].add(int(m.group("n")))
        return
    m = _CHANNELS.match(msg)
    if m:
        proc["channels"] = {k: int(v) for k, v in m.groupdict().items() if v is not None}
        return
    m = _ALGO_NUM.search(msg)
    if m:
        a, p = int(m.group("algo")), int(m.group("proto"))
        proc["algorithms"].add(_ALGOS[a] if a < len(_ALGOS) else f"algo{a}")
        proc["protocols"].add(_PROTOS[p] if p < len(_PROTOS) else f"proto{p}")
        return
    m = _ALGO_NAME.search(msg)
    if m:
        proc["algorithms"].add(_canon(m.group("algo")))
        proc["protocols"].add(_canon(m.group("proto")))
        return
    m = _USING_NET.match(msg)
    if m:
        proc["network"] = m.group("net")


def summarize_ranks(procs: Dict[Tuple[Any, Any], Dict[str, Any]], order: List[Tuple[Any, Any]]) -> Dict[str, Any]:
    """Per-rank data for the snapshot: {"version", "ranks": {"0": {...}}, "env", "env_conflicts"}."""
    ranks: Dict[str, Dict[str, Any]] = {}
    unknown = 0
    versions = []
    for key in order:
        proc = procs[key]
        comms = list(proc["comms"].values())
        world = max(comms, key=lambda c: (c.get("nranks", 0), -c.get("rank", 0))) if comms else None
        entry: Dict[str, Any] = {"host": proc["host"], "pid": proc["pid"], "env": dict(sorted(proc["env"].items())),
                                 "transports": dict(sorted(proc["transports"].items()))}
        if proc["version"]:
            entry["version"] = proc["version"]
            versions.append(proc["version"])
        if proc["devs"]:
            entry["cuda_devs"] = sorted(proc["devs"])
        if world is not None:
            entry["rank"] = world.get("rank")
            entry["nranks"] = world.get("nranks")
            entry["init"] = {k: v for k, v in world.items() if k not in ("rank",)}
            entry["communicators"] = len(comms)
        channel_counts = sorted(proc["rings"])
        if channel_counts:
            entry["channels"] = channel_counts[-1]
        if proc["channels"]:
            entry["channel_counts"] = proc["channels"]
        if proc["algorithms"]:
            entry["algorithms"] = sorted(proc["algorithms"])
        if proc["protocols"]:
            entry["protocols"] = sorted(proc["protocols"])
        if proc["network"]:
            entry["network"] = proc["network"]
        if proc["warnings"]:
            entry["warnings"] = proc["warnings"]
        if world is not None:
            name = str(world.get("rank"))
        else:
            name = f"unknown-{unknown}"
            unknown += 1
        if name in ranks:  # two processes claim one rank: two jobs in one log, or two hosts' worlds
            suffix = 2
            while f"{name}#{suffix}" in ranks:
                suffix += 1
            name = f"{name}#{suffix}"
        ranks[name] = entry
    env: Dict[str, str] = {}
    conflicts: Dict[str, Dict[str, str]] = {}
    names = sorted({n for r in ranks.values() for n in r["env"]})
    for name in names:
        values = {k: r["env"][name] for k, r in ranks.items() if name in r["env"]}
        if len(set(values.values())) == 1:
            env[name] = next(iter(values.values()))
        else:
            conflicts[name] = values
    out: Dict[str, Any] = {"ranks": dict(sorted(ranks.items(), key=lambda kv: _rank_sort(kv[0]))),
                           "env": env, "absent_means": ABSENT_MEANS}
    if conflicts:
        out["env_conflicts"] = conflicts
    if versions:
        out["version"] = versions[0]
        if len(set(versions)) > 1:
            out["versions"] = sorted(set(versions))
    return out


def _rank_sort(name: str) -> Tuple[int, str]:
    head = name.split("#", 1)[0]
    return (int(head), name) if head.isdigit() else (1 << 30, name)


def log_files(paths: Iterable[str]) -> Tuple[List[str], Dict[str, str]]:
    """Expand --log arguments: files as given, directories (NCCL_DEBUG_FILE=dir/%h.%p) to their files."""
    files: List[str] = []
    errors: Dict[str, str] = {}
    for path in paths:
        full = os.path.abspath(path)
        if os.path.isdir(full):
            entries = sorted(os.path.join(full, n) for n in os.listdir(full) if not n.startswith("."))
            found = [e for e in entries if os.path.isfile(e)]
            if not found:
                errors[full] = "directory holds no files"
            files += found
        elif os.path.isfile(full):
            files.append(full)
        elif os.path.exists(full):
            errors[full] = "not a regular file"
        else:
            errors[full] = "no such file"
    return list(dict.fromkeys(files)), errors


def parse_files(paths: Iterable[str], deadline: Optional[float] = None) -> Dict[str, Any]:
    """Parse every log; returns the nccl section data (with "errors" for unreadable files)."""
    import time

    files, errors = log_files(paths)
    procs: Dict[Tuple[Any, Any], Dict[str, Any]] = {}
    order: List[Tuple[Any, Any]] = []
    read = []
    for path in files:
        try:
            with open(path, "r", encoding="utf-8", errors="replace") as handle:
                for number, line in enumerate(handle):
                    parse_lines((line,), procs, order)
                    if number % 20000 == 0 and deadline is not None and time.monotonic() > deadline:
                        errors[path] = f"stopped at line {number}: capture deadline"
                        break
            read.append(path)
        except OSError as exc:
            errors[path] = f"cannot read: {exc.strerror or exc}"
    data = summarize_ranks(procs, order)
    data["logs"] = read
    if errors:
        data["errors"] = errors
    return data
