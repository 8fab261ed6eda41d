"""Who read each environment variable, and how far the records say so: evidence for the ranking, never compared.

The probe's per-process read counts (its records and journals) and NCCL's "X set by environment to Y" lines
(each a getenv by NCCL); and, per tracked process, until when its reads are known, against when the runs ended.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from envsnap.model.argv import multiprocessing_helper
from envsnap.model.snapshot import as_dict, number, section_data

# Who stands for NCCL in the read evidence: NCCL logs a variable ("X set by environment to Y")
# only when it reads it with getenv, so each such line is a read by NCCL (nccl_log.py).
NCCL_READER = "NCCL"


def env_read_evidence(snap: Dict[str, Any]) -> Tuple[Dict[str, Dict[str, int]], List[str]]:
    """({variable: {process: reads}}, processes whose reads were counted) for one snapshot.

    Processes are the probe's record keys ("scheduler_TP0", "python-2", "3/python-0" for a process
    of the third run of `envsnap run` that is not the compared one); a record counts only
    when the probe that wrote it tracked reads (it has "env_reads"), so an old record is no
    evidence either way. NCCL counts as one reader ("NCCL") whose count is the number of ranks
    that logged the variable. A variable missing here was read by none of the tracked
    processes' Python code -- C code (NCCL before its log, CUDA, OpenMP, glibc) reads with
    getenv, which the probe does not see: "not read by Python" never means "not read".
    Taken from the snapshot's own sections whatever the other side has: it is evidence about
    this side's processes, not a compared key. multiprocessing's helper processes (its resource tracker,
    forkserver) run none of the program's code: their reads are no worker's, and they are left out.
    """
    reads: Dict[str, Dict[str, int]] = {}
    tracked: List[str] = []
    probe = section_data(snap, "probe") or {}
    every = dict(probe.get("run_records") or {})  # an older envsnap's other runs: "<run>/<process>"
    every.update(probe.get("command_records") or {})  # `envsnap run`'s command processes: "<run>/<process>"
    every.update(probe.get("records") or {})
    for key, record in sorted(every.items()):
        counts = record.get("env_reads") if isinstance(record, dict) else None
        if not isinstance(counts, dict) or _helper(record):
            continue
        tracked.append(key)
        for name, count in counts.items():
            if isinstance(count, int) and not isinstance(count, bool) and count > 0:
                reads.setdefault(str(name), {})[key] = count
    nccl = section_data(snap, "nccl") or {}
    ranks = [info for info in (nccl.get("ranks") or {}).values() if isinstance(info, dict)]
    if ranks:
        tracked.append(NCCL_READER)
        for info in ranks:
            for name in as_dict(info.get("env")):
                per = reads.setdefault(str(name), {})
                per[NCCL_READER] = per.get(NCCL_READER, 0) + 1
    return {name: dict(sorted(per.items())) for name, per in sorted(reads.items())}, tracked


def _helper(record: Dict[str, Any]) -> bool:
    argv = record.get("argv")
    return isinstance(argv, list) and multiprocessing_helper([str(a) for a in argv]) is not None


def env_read_coverage(snap: Dict[str, Any]) -> Tuple[Dict[str, Optional[float]], Optional[float]]:
    """({tracked process: how far its reads are known, epoch s, or None when to its exit}, when the runs
    ended (epoch s; None without runs)). A record is known to its exit when it has an exit stage; else up
    to when envsnap last read its journal (reads_until), else its last write (an older probe)."""
    import datetime

    probe = section_data(snap, "probe") or {}
    every = dict(probe.get("run_records") or {})
    every.update(probe.get("command_records") or {})
    every.update(probe.get("records") or {})
    until: Dict[str, Optional[float]] = {}
    for key, record in sorted(every.items()):
        if not isinstance(record, dict) or not isinstance(record.get("env_reads"), dict) or _helper(record):
            continue
        if record.get("reads_to_exit") or "exit" in (record.get("stages") or []):
            until[key] = None
        else:
            known = number(record.get("reads_until"))
            until[key] = known if known is not None else number(record.get("written_at"))
    ended: Optional[float] = None
    for run in snap.get("runs") or []:
        if not isinstance(run, dict) or not isinstance(run.get("started"), str):
            continue
        start = None
        for form in ("%Y-%m-%dT%H:%M:%S.%fZ", "%Y-%m-%dT%H:%M:%SZ"):  # utc_now's, and without microseconds
            try:
                start = datetime.datetime.strptime(run["started"], form)
                break
            except ValueError:
                continue
        if start is None:
            continue
        end = start.replace(tzinfo=datetime.timezone.utc).timestamp() + (number(run.get("duration_s")) or 0.0)
        ended = end if ended is None else max(ended, end)
    return until, ended
