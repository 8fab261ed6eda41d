"""Context: which parts of the stack the snapshots show in play (a GPU, NCCL, CUDA, an OpenMP/BLAS runtime,
an SGLang server).

A rule applies where its part is in play (knowledge.REQUIREMENTS): NCCL settings need a process that
initialises NCCL on a GPU, CUDA settings a process that runs CUDA, OpenMP/BLAS thread settings a process
that loaded such a runtime, SGLang settings an SGLang server or process. What ran decides it first: the
shared objects the measured processes mapped (libraries section: libnccl, libcuda, libgomp...), the modules
they imported (the probe's lists: sglang), NCCL's own log and init records; then what is installed and
present. Per side, then both sides together:

  in_play   seen on at least one side (NVML/nvidia-smi GPUs, GPUs sampled during the runs, a probe
            record of init_process_group with backend nccl, NCCL's own log, SGLang's server args or
            process titles);
  absent    shown missing on both sides (NVML and nvidia-smi unavailable; no GPU, so no NCCL; SGLang
            not installed in the captured interpreter), or observed not to run: every measured process's
            maps were read and none loaded libnccl / the CUDA driver / an OpenMP or BLAS runtime, or every
            measured process's module list is known and none imported sglang;
  not_seen  could be there, but the processes envsnap saw (probe records, the process walk) show no
            use of it on either side (a GPU box whose probed processes never initialised NCCL, though
            torch's CUDA build maps libnccl in each of them);
  unknown   nothing captured says (no nvidia section, no probe, no package list; a process mapped libnccl
            and no probe record says whether it created a communicator): no factor.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, NamedTuple, Optional, Set, Tuple

from envsnap.analysis.compare import libraries as libraries_mod
from envsnap.analysis.compare.nodes import is_cluster
from envsnap.analysis.knowledge import (
    CUDA_CONTEXT,
    GPU_CONTEXT,
    LOADED_BY_PART,
    NCCL_CONTEXT,
    SGLANG_CONTEXT,
    THREADS_CONTEXT,
    requirement_for,
)
from envsnap.analysis.runs import trace_diff
from envsnap.model import keys
from envsnap.model.merge import node_snapshots
from envsnap.model.names import canonical_name
from envsnap.model.result_types import ContextPart
from envsnap.model.snapshot import as_dict, section_data

IN_PLAY, ABSENT, NOT_SEEN, UNKNOWN = "in_play", "absent", "not_seen", "unknown"
# Process kinds (capture/collectors/roles.py) that only SGLang's own processes carry.
SGLANG_KINDS = ("main", "scheduler", "tokenizer", "detokenizer", "dp_controller")
PART_WORDS = {GPU_CONTEXT: "a GPU", NCCL_CONTEXT: "NCCL", SGLANG_CONTEXT: "SGLang", CUDA_CONTEXT: "CUDA",
              THREADS_CONTEXT: "an OpenMP/BLAS runtime"}
PART_NOUNS = {GPU_CONTEXT: "GPU", NCCL_CONTEXT: "NCCL", SGLANG_CONTEXT: "SGLang", CUDA_CONTEXT: "CUDA",
              THREADS_CONTEXT: "OpenMP/BLAS runtime"}
# What a part's libraries are called in an observation ("no measured process loaded libnccl").
LOADED_WORDS = {NCCL_CONTEXT: "libnccl", CUDA_CONTEXT: "the CUDA driver or runtime (libcuda, libcudart)",
                THREADS_CONTEXT: "an OpenMP or BLAS runtime (libgomp, libomp, libiomp5, OpenBLAS, oneMKL, BLIS)"}


class Presence(NamedTuple):
    state: str  # IN_PLAY | ABSENT | NOT_SEEN | UNKNOWN
    why: str


@dataclass
class Context:
    parts: Dict[str, Presence] = field(default_factory=dict)

    def of(self, part: str) -> Presence:
        return self.parts.get(part, Presence(UNKNOWN, ""))

    def to_json(self) -> Dict[str, ContextPart]:
        return {part: {"state": p.state, "why": p.why} for part, p in sorted(self.parts.items())}


def _section(snap: Mapping[str, Any], name: str) -> Tuple[Optional[str], str]:
    """(status, reason) of a section (None: not in the snapshot at all)."""
    section = (snap.get("sections") or {}).get(name)
    if not isinstance(section, dict):
        return None, ""
    return section.get("status"), str(section.get("reason") or section.get("error") or "")


def _records(snap: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    probe = section_data(snap, "probe") or {}
    every: Dict[str, Any] = dict(probe.get("run_records") or {})
    every.update(probe.get("command_records") or {})
    every.update(probe.get("records") or {})
    return {str(k): v for k, v in every.items() if isinstance(v, dict)}


def _nccl_initialisers(snap: Mapping[str, Any]) -> List[str]:
    """Probed processes whose init_process_group chose NCCL ("nccl", or NCCL for CUDA in "cpu:gloo,cuda:nccl"),
    as the probe asks for NCCL's version (probe/runtime.py)."""
    return sorted(k for k, r in _records(snap).items()
                  if isinstance(r.get("init"), dict) and "nccl" in str(r["init"].get("backend") or "").lower())


def _gpu_side(snap: Mapping[str, Any]) -> Presence:
    status, reason = _section(snap, "nvidia")
    data = section_data(snap, "nvidia") or {}
    count = data.get("count")
    gpus: Any = data.get("gpus")
    if status == "ok" and ((isinstance(count, int) and count > 0) or (isinstance(gpus, dict) and gpus)):
        n = count if isinstance(count, int) else len(gpus)
        return Presence(IN_PLAY, f"{n} GPU{'s' if n != 1 else ''} captured")
    for run in snap.get("runs") or []:
        telemetry = run.get("telemetry") if isinstance(run, dict) else None
        if isinstance(telemetry, dict) and isinstance(telemetry.get("gpus"), dict) and telemetry["gpus"]:
            return Presence(IN_PLAY, "GPUs sampled during the runs")
    deep = (section_data(snap, "torch") or {}).get("deep")
    if isinstance(deep, dict) and deep.get("cuda_available") and (deep.get("device_count") or 0) > 0:
        return Presence(IN_PLAY, "torch sees a CUDA device")
    if _nccl_initialisers(snap):
        return Presence(IN_PLAY, "a process initialised NCCL, which runs on GPUs")
    if status == "ok":
        return Presence(ABSENT, "NVML lists no GPU")
    if status == "unavailable":
        return Presence(ABSENT, reason or "no GPU driver")
    return Presence(UNKNOWN, "GPUs were not captured" if status is None else f"the GPU capture failed ({status})")


class _Maps(NamedTuple):
    presence: Optional[Presence]  # None: the maps do not say
    loaders: Dict[str, Dict[str, Any]]  # the processes that loaded the part's library: name -> entry


def _maps_side(snap: Mapping[str, Any], part: str) -> _Maps:
    """What the measured processes' maps say about a part: in play when one of them loaded its library,
    absent when every measured process's maps were read and none did; None when the maps do not say
    (no libraries section, no process, or a process whose maps could not be read)."""
    data = section_data(snap, libraries_mod.SECTION) or {}
    processes = libraries_mod.process_entries(data)
    if not processes:
        return _Maps(None, {})
    found = libraries_mod.loaded_any(data, LOADED_BY_PART[part])
    if found:
        hit = sorted(found)[0]
        who = keys.run_process_words(hit.process)
        loaders = {h.process: processes[h.process] for h in found}
        more = len(loaders) - 1
        return _Maps(Presence(IN_PLAY, f"{who}{f' and {more} more' if more > 0 else ''} loaded {hit.name} "
                                       f"({hit.path})"), loaders)
    if any(p.get("status") not in (None, "ok") for p in processes.values()):
        return _Maps(None, {})
    n = len(processes)
    return _Maps(Presence(ABSENT, f"no measured process loaded {LOADED_WORDS[part]} (the maps of {n} "
                                  f"process{'es' if n != 1 else ''} read)"), {})


def _loaded_side(snap: Mapping[str, Any], part: str) -> Optional[Presence]:
    return _maps_side(snap, part).presence


def _modules_side(snap: Mapping[str, Any], module: str) -> Optional[Presence]:
    """The probe's module lists about a top-level module: in play when a probed process imported it, absent
    when every probed process listed its modules to its exit and none imported it; None otherwise."""
    records = _records(snap)
    listed = {k: r["modules"] for k, r in records.items() if isinstance(r.get("modules"), dict)}
    if not listed:
        return None
    users = sorted(k for k, m in listed.items()
                   if module in (m.get("installed") or []) or module in (m.get("elsewhere") or {})
                   or module in (m.get("stdlib") or []))
    if users:
        return Presence(IN_PLAY, f"{', '.join(users[:3])} imported {module}")
    complete = len(listed) == len(records) and all(
        r.get("reads_to_exit") or "exit" in (r.get("stages") or []) for r in records.values())
    if not complete:
        return None
    return Presence(ABSENT, f"no measured process imported {module} (the module lists of {len(listed)} "
                            f"probed process{'es' if len(listed) != 1 else ''}, to their exit)")


def _nccl_side(snap: Mapping[str, Any], gpu: Presence) -> Presence:
    initialisers = _nccl_initialisers(snap)
    if initialisers:
        shown = ", ".join(initialisers[:3]) + (f" and {len(initialisers) - 3} more" if len(initialisers) > 3 else "")
        return Presence(IN_PLAY, f"{shown} initialised NCCL (init_process_group, backend nccl)")
    nccl = section_data(snap, "nccl") or {}
    if nccl.get("ranks") or nccl.get("version"):
        return Presence(IN_PLAY, "NCCL logged its setup")
    traced = _traced_without_communication(snap)
    if traced:
        return Presence(NOT_SEEN, traced)
    observed, loaders = _maps_side(snap, NCCL_CONTEXT)
    if observed is not None and observed.state == ABSENT:
        return observed
    if gpu.state == ABSENT:
        return Presence(ABSENT, "no GPU, so no NCCL")
    records = _records(snap)
    not_initialised = "no probed process initialised NCCL (no init record with backend nccl) and no NCCL log lines"
    if observed is not None:
        # Loaded is not used: torch's CUDA build links libnccl, so every CUDA torch process maps it, and NCCL reads
        # its settings only when a communicator is created (NCCL's environment-variable docs). The probe answers
        # for the processes it recorded; a loader it did not record leaves the question open.
        unrecorded = [keys.run_process_words(process) for process, entry in sorted(loaders.items())
                      if libraries_mod.probe_record_of(records, entry) is None]
        if records and not unrecorded:
            return Presence(NOT_SEEN, f"{observed.why}, but {not_initialised}")
        why = f"no probe record of {', '.join(unrecorded[:3])}" if records else "no probe records or NCCL log"
        return Presence(UNKNOWN, f"{observed.why}; whether it created an NCCL communicator is not known ({why})")
    if records:
        return Presence(NOT_SEEN, not_initialised)
    return Presence(UNKNOWN, "no probe records or NCCL log to show whether NCCL ran")


def _traced_without_communication(snap: Mapping[str, Any]) -> Optional[str]:
    """When every successful run was profiled and its traces hold kernels but no communication kernel (an NCCL
    collective or send/receive: runs/trace_diff.py's families), what the traces show: NCCL's settings act through
    its kernels, and none ran in the measured work. None when a run went unprofiled or the traces hold no kernel."""
    runs = [r for r in snap.get("runs") or [] if isinstance(r, dict) and r.get("ok") is not False]
    traced = [r for r in runs if isinstance(r.get("trace"), dict) and r["trace"].get("files")]
    if not runs or len(traced) != len(runs):
        return None
    families: Set[str] = set()
    for run in traced:
        for summary in run["trace"]["files"]:
            for name in as_dict(as_dict(summary).get("kernels")):
                if trace_diff.kernel_component(str(name)) == "communication":
                    return None
                families.add(trace_diff.family(str(name)))
    if not families:
        return None
    return (f"the profiler traces of its {len(traced)} run{'s' if len(traced) != 1 else ''} hold {len(families)} "
            "kernel families and no communication kernel: NCCL's settings act through its kernels")


def _sglang_side(snap: Mapping[str, Any]) -> Presence:
    if _section(snap, "sglang")[0] == "ok":
        return Presence(IN_PLAY, "an SGLang server was captured")
    processes = (section_data(snap, "processes") or {}).get("processes") or {}
    seen = dict(_records(snap))
    seen.update({str(k): v for k, v in processes.items() if isinstance(v, dict)})
    titled = sorted(k for k, entry in seen.items()
                    if isinstance(entry.get("role"), dict) and entry["role"].get("kind") in SGLANG_KINDS)
    if titled:
        return Presence(IN_PLAY, f"SGLang processes captured ({', '.join(titled[:3])})")
    imported = _modules_side(snap, "sglang")
    if imported is not None:
        return imported
    if _section(snap, "packages")[0] != "ok":
        return Presence(UNKNOWN, "no package list to show whether SGLang is installed")
    packages = section_data(snap, "packages") or {}
    dists = packages.get("dists") or {}
    if not any(canonical_name(str(name)) == "sglang" for name in dists):
        described = str(packages.get("python") or "")
        if described and described in _interpreters_that_ran(snap, seen):
            return Presence(ABSENT, f"SGLang is not installed in the interpreter that ran ({described})")
        # The package list may describe envsnap's own interpreter, not the server's (--python): weaker.
        return Presence(NOT_SEEN, f"SGLang is not installed in the interpreter envsnap described ({described or '?'}),"
                                  " and no SGLang process was captured")
    if seen:
        return Presence(NOT_SEEN, "SGLang is installed, but none of the captured processes is SGLang's")
    return Presence(UNKNOWN, "SGLang is installed; no server or process was captured to show it ran")


def _interpreters_that_ran(snap: Mapping[str, Any], seen: Mapping[str, Dict[str, Any]]) -> List[str]:
    """Executables the snapshot shows running: probed processes, walked processes, the runs' command."""
    found = [str(entry.get("executable") or entry.get("exe") or "") for entry in seen.values()]
    session = snap.get("run_session")
    command = session.get("command") if isinstance(session, dict) else None
    if isinstance(command, list) and command and isinstance(command[0], str) and command[0].startswith("/"):
        found.append(command[0])
    return [f for f in found if f]


def _cuda_side(snap: Mapping[str, Any]) -> Presence:
    """CUDA in play: from what the measured processes loaded, else from whether a GPU is there."""
    observed = _loaded_side(snap, CUDA_CONTEXT)
    return observed if observed is not None else _gpu_side(snap)


def _threads_side(snap: Mapping[str, Any]) -> Presence:
    observed = _loaded_side(snap, THREADS_CONTEXT)
    return observed if observed is not None else Presence(UNKNOWN, "no maps of the measured processes to show it")


def _both(part: str, good: Presence, bad: Presence) -> Presence:
    states = {good.state, bad.state}
    if IN_PLAY in states:
        side = good if good.state == IN_PLAY else bad
        where = "both sides" if good.state == bad.state == IN_PLAY else ("good" if side is good else "bad")
        return Presence(IN_PLAY, f"{side.why} ({where})")
    reasons = good.why if good.why == bad.why else f"good: {good.why}; bad: {bad.why}"
    word = PART_WORDS[part]
    if states == {ABSENT} and all(p.why.startswith("no measured process") for p in (good, bad)):
        return Presence(ABSENT, f"{reasons} (both sides)" if good.why == bad.why else reasons)
    if states == {ABSENT}:
        return Presence(ABSENT, f"no {PART_NOUNS[part]} captured on either side ({reasons})")
    if states <= {ABSENT, NOT_SEEN}:
        return Presence(NOT_SEEN, f"{word} not seen in use on either side ({reasons})")
    return Presence(UNKNOWN, reasons)


# A cluster's side is in play when any node shows it; otherwise the least certain node's word stands
# (one node not captured keeps the whole side "unknown": absence is claimed only when every node shows it).
_CLUSTER_ORDER = (IN_PLAY, UNKNOWN, NOT_SEEN, ABSENT)


def _side(snap: Mapping[str, Any], judge: Callable[[Mapping[str, Any]], Presence]) -> Presence:
    """One side's presence: of the snapshot, or over a merged cluster's nodes (runs stay at the top)."""
    nodes = node_snapshots(dict(snap)) if is_cluster(dict(snap)) else {}
    if not nodes:
        return judge(snap)
    top = judge(snap)
    if top.state == IN_PLAY:
        return top
    found = {name: judge(node) for name, node in nodes.items()}
    for state in _CLUSTER_ORDER:
        names = sorted(n for n, p in found.items() if p.state == state)
        if names:
            why = found[names[0]].why
            where = "every node" if len(names) == len(found) else ", ".join(names)
            return Presence(state, f"{why} ({where})")
    return top


def build_context(good: Mapping[str, Any], bad: Mapping[str, Any]) -> Context:
    """What both snapshots show in play (see the module doc); a merged cluster side over its nodes."""
    gpu_g, gpu_b = _side(good, _gpu_side), _side(bad, _gpu_side)
    gpu = _both(GPU_CONTEXT, gpu_g, gpu_b)
    nccl = _both(NCCL_CONTEXT, _side(good, lambda s: _nccl_side(s, _gpu_side(s))),
                 _side(bad, lambda s: _nccl_side(s, _gpu_side(s))))
    if gpu.state == ABSENT:  # say why in GPU terms: that is the fact the snapshots show
        nccl = Presence(ABSENT, f"{gpu.why}: NCCL runs only on GPUs")
    cuda = _both(CUDA_CONTEXT, _side(good, _cuda_side), _side(bad, _cuda_side))
    if gpu.state == ABSENT and cuda.state != IN_PLAY:
        cuda = Presence(ABSENT, f"{gpu.why}: CUDA runs only on GPUs")
    return Context({GPU_CONTEXT: gpu, NCCL_CONTEXT: nccl, CUDA_CONTEXT: cuda,
                    THREADS_CONTEXT: _both(THREADS_CONTEXT, _side(good, _threads_side), _side(bad, _threads_side)),
                    SGLANG_CONTEXT: _both(SGLANG_CONTEXT, _side(good, _sglang_side), _side(bad, _sglang_side))})


def context_factor(key: str, context: Context) -> Optional[Tuple[str, str]]:
    """(factor name, evidence) when the key's part is not in play; None when it is, or nothing says."""
    requirement = requirement_for(key)
    if requirement is None:
        return None
    presence = context.of(requirement.context)
    if presence.state == ABSENT:
        return "out_of_context", f"out of context: {presence.why}; {requirement.why}"
    if presence.state == NOT_SEEN:
        return "not_seen_in_play", f"not seen in play: {presence.why}; {requirement.why}"
    return None


def context_note(key: str, context: Context) -> Optional[str]:
    """An evidence line for a key whose part is in play or unknown (no factor)."""
    requirement = requirement_for(key)
    if requirement is None:
        return None
    presence = context.of(requirement.context)
    if presence.state == IN_PLAY:
        return f"in context: {presence.why}"
    if presence.state == UNKNOWN:
        return f"whether {PART_WORDS[requirement.context]} is in play is not known ({presence.why})"
    return None
