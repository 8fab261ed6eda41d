"""Neighbours compared: the other processes that used the CPUs and the GPUs beside the measured work, on each
side, and which of them were there on one side only or used much more there.

What each side saw comes from its successful runs' telemetry ("neighbours" of each run, measured while the
benchmark ran: measure/neighbours.py) when both sides have runs with it, else from the capture's
"neighbours" section (one window at capture: capture/collectors/neighbours.py). Processes are matched
between the sides by their (redacted) command line with its digits as one symbol (same_command): pids,
ports and ranks differ from run to run. Per side a command's
CPUs are the median over the runs (a run whose busiest-processes list lacks it counts 0), so a process
busy in one run of five is not a neighbour of that side.

A neighbour is a difference of its own (`differences`: category "neighbours", subject where "neighbour")
when it used at least MIN_CPUS more on one side than on the other and either (almost) nothing on the
other side or at least MUCH_MORE times as much; on a GPU the run used, when it held the GPU in at least
half the runs of one side and in fewer than half of the other's, or much more memory or SM time there;
the hypervisor (steal time) when it took STEAL_MIN_POINTS more of the CPU time on one side, every run
of that side beyond every run of the other.

When the work may use only some of the machine's CPUs (taskset, a container's cpuset: the records'
"cpu_set_size"), those CPUs are what a neighbour must share to slow it down: whether they had time to spare
(machine_full), whether a process ran on them ("on_cpu_set"), and the share it took of them (share_taken).
"""
from __future__ import annotations

import re
from typing import Any, Dict, List, Optional, Set, Tuple

from envsnap.analysis.median import median
from envsnap.model.keys import Subject, view_key
from envsnap.model.snapshot import number

# A neighbour must use this much more CPU on one side: a quarter of a CPU sustained over the runs is no
# background daemon's flicker (USER_HZ ticks resolve 0.02 CPUs over a half-second window).
MIN_CPUS = 0.25
# Present on both sides, it counts when one side used this many times as much.
MUCH_MORE = 2.0
# Steal time: percentage points of all CPU time the hypervisor gave elsewhere (a VM's neighbours).
STEAL_MIN_POINTS = 5.0
# GPU memory held much more on one side: at least this much more, and MUCH_MORE times as much.
GPU_MEMORY_MIN_BYTES = 1 << 30
# Per-process SM utilisation (NVML) this many points higher on one side.
GPU_SM_MIN_POINTS = 20.0
# At most this many processes per side in the table (the busiest; the changed ones always).
TABLE_ROWS = 10
# A machine whose CPUs were busy this share of the time (all processes, /proc/stat) had none to spare: a
# runnable thread then waits for one (a tenth idle is a CPU free most of the time on a small machine).
BUSY_MACHINE_SHARE = 0.9
NOT_VISIBLE = "(a process whose pid is not visible here)"


def _records(snap: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The neighbours records of a side's successful runs."""
    out = []
    for run in snap.get("runs") or []:
        if not isinstance(run, dict) or run.get("ok") is False:
            continue
        found = (run.get("telemetry") or {}).get("neighbours") if isinstance(run.get("telemetry"), dict) else None
        if isinstance(found, dict):
            out.append(found)
    return out


def _capture(snap: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The capture's neighbours, without the processes the capture measured (--pid/--sglang: the processes
    section, collected beside it, so the window could not leave them out by itself)."""
    section = (snap.get("sections") or {}).get("neighbours")
    if not (isinstance(section, dict) and section.get("status") == "ok" and isinstance(section.get("data"), dict)):
        return []
    measured = (snap.get("sections") or {}).get("processes")
    procs = ((measured.get("data") or {}).get("processes") or {}) if isinstance(measured, dict) else {}
    pids = {p.get("pid") for p in procs.values() if isinstance(p, dict)} if isinstance(procs, dict) else set()
    data = dict(section["data"])
    data["top"] = [e for e in data.get("top") or [] if not (isinstance(e, dict) and e.get("pid") in pids)]
    if isinstance(data.get("gpus"), dict):
        data["gpus"] = {index: dict(gpu, processes=[p for p in gpu.get("processes") or []
                                                     if not (isinstance(p, dict) and p.get("pid") in pids)])
                        for index, gpu in data["gpus"].items() if isinstance(gpu, dict)}
    return [data]


def _gpus_of_the_run(records: List[Dict[str, Any]]) -> Optional[Set[str]]:
    """GPU indexes where the run's own processes were (None: none identified, every GPU counts)."""
    found: Set[str] = set()
    for record in records:
        for index, gpu in (record.get("gpus") or {}).items():
            for proc in (gpu or {}).get("processes") or []:
                if isinstance(proc, dict) and (proc.get("own") is True or (
                        proc.get("own") is None and "probably the run's own" in str(proc.get("why") or ""))):
                    found.add(str(index))
    return found or None


def is_envsnap(command: str) -> bool:
    """Whether a neighbour's command is envsnap or starts it (`envsnap capture ...`, `python -m envsnap ...`,
    `torchrun ... bash -c "envsnap capture ..."`, or a process named [envsnap] whose command line was gone):
    the tool measuring, not a workload. Several nodes' captures of one cluster started on one host see each
    other and each other's launchers; none of them is a neighbour of the user's processes. envsnap counts
    where a word named envsnap is followed by a subcommand (a lower-case word), so a path that merely ends
    in envsnap does not."""
    if command in ("[envsnap]", "envsnap"):
        return True
    names = [word.rsplit("/", 1)[-1] for word in command.split()]
    return any(name == "envsnap" and (following.isalpha() and following.islower()
                                      or previous == "-m")
               for previous, name, following in zip([""] + names, names, names[1:] + [""]))


# Digits in a command line (ports, pids, ranks, dates in a path) differ from run to run while the process
# is the same program doing the same job: the sides match commands with every run of digits as one.
_DIGITS = re.compile(r"\d+")


def same_command(command: str) -> str:
    """What a command is matched by between the sides and the runs: its digits made one symbol."""
    return _DIGITS.sub("#", command)


def _side(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    """One side's neighbours: machine figures per record, CPU per command per record, GPU holders."""
    n = len(records)
    cpu: Dict[str, Dict[str, Any]] = {}
    for i, record in enumerate(records):
        for entry in record.get("top") or []:
            if not isinstance(entry, dict) or number(entry.get("cpus")) is None:
                continue
            if is_envsnap(str(entry.get("command") or "")):
                continue
            command = str(entry.get("command") or "?")
            group = cpu.setdefault(same_command(command), {"command": command, "cpus": [0.0] * n, "pids": set(),
                                                           "users": set(), "processes": [0] * n,
                                                           "on_cpu_set": set()})
            group["cpus"][i] += float(entry["cpus"])
            if isinstance(entry.get("on_cpu_set"), bool):
                group["on_cpu_set"].add(entry["on_cpu_set"])
            group["processes"][i] += 1
            if number(entry.get("pid")) is not None:
                group["pids"].add(int(entry["pid"]))
            if entry.get("user"):
                group["users"].add(str(entry["user"]))
    gpus = _gpus_of_the_run(records)
    gpu: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for i, record in enumerate(records):
        for index, found in sorted((record.get("gpus") or {}).items()):
            if gpus is not None and str(index) not in gpus:
                continue
            for proc in (found or {}).get("processes") or []:
                if not isinstance(proc, dict) or proc.get("own") is not False:
                    continue
                command = str(proc.get("command") or NOT_VISIBLE)
                group = gpu.setdefault((str(index), same_command(command)),
                                       {"command": command, "runs": set(), "memory": 0.0, "sm": [], "pids": set()})
                group["runs"].add(i)
                group["memory"] = max(group["memory"], number(proc.get("used_memory_bytes")) or 0.0)
                if number(proc.get("sm_util_pct_mean")) is not None:
                    group["sm"].append(float(proc["sm_util_pct_mean"]))
                if number(proc.get("pid")) is not None:
                    group["pids"].add(int(proc["pid"]))

    def series(name: str) -> List[float]:
        return [v for v in (number(r.get(name)) for r in records) if v is not None]

    runnable = [v for v in (number((r.get("runnable") or {}).get("median")) for r in records) if v is not None]
    online = [v for v in (number(r.get("cpus_online")) for r in records) if v is not None]
    cpu_set = series("cpu_set_size")
    return {"n": n, "cpu": cpu, "gpu": gpu, "others_cpus": series("others_cpus"), "steal_pct": series("steal_pct"),
            "host_busy_cpus": series("host_busy_cpus"), "runnable": runnable,
            "cpus_online": max(online) if online else None, "cpu_set_size": max(cpu_set) if cpu_set else None,
            "cpu_set_busy_cpus": series("cpu_set_busy_cpus")}


def _median(values: List[float]) -> Optional[float]:
    """The median rounded to 3 places; None for no values (a side that recorded none)."""
    return round(median(values), 3) if values else None


def _cpu_row(g: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]) -> Dict[str, Any]:
    row: Dict[str, Any] = {"kind": "cpu", "command": (b or g or {})["command"]}
    for side, group in (("good", g), ("bad", b)):
        if group is None:
            row[side] = None
            continue
        row[side] = {"cpus": _median(group["cpus"]) or 0.0, "processes": max(group["processes"]),
                     "pids": sorted(group["pids"])[:8], "users": sorted(group["users"]),
                     "runs": sum(1 for cpus in group["cpus"] if cpus > 0), "of": len(group["cpus"])}
        if group["on_cpu_set"]:  # it ran on a CPU the work may use (in any run), or only on others
            row[side]["on_cpu_set"] = True in group["on_cpu_set"]
    gc = row["good"]["cpus"] if row["good"] else 0.0
    bc = row["bad"]["cpus"] if row["bad"] else 0.0
    low, high = min(gc, bc), max(gc, bc)
    row["changed"] = bool(high - low >= MIN_CPUS and (low < MIN_CPUS or high >= MUCH_MORE * low))
    return row


def _gpu_row(index: str, g: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]], ng: int,
             nb: int) -> Dict[str, Any]:
    row: Dict[str, Any] = {"kind": "gpu", "gpu": index, "command": (b or g or {})["command"]}
    for side, group, n in (("good", g, ng), ("bad", b, nb)):
        if group is None:
            row[side] = None
            continue
        row[side] = {"present": round(len(group["runs"]) / max(n, 1), 3), "used_memory_bytes": int(group["memory"]),
                     "sm_util_pct": round(sum(group["sm"]) / len(group["sm"]), 1) if group["sm"] else None,
                     "pids": sorted(group["pids"])[:8]}
    present = [bool(row[s] and row[s]["present"] >= 0.5) for s in ("good", "bad")]
    changed = present[0] != present[1]
    if all(present):
        gm, bm = row["good"]["used_memory_bytes"], row["bad"]["used_memory_bytes"]
        low, high = min(gm, bm), max(gm, bm)
        changed = high - low >= GPU_MEMORY_MIN_BYTES and high >= MUCH_MORE * max(low, 1)
        gs, bs = row["good"]["sm_util_pct"], row["bad"]["sm_util_pct"]
        if gs is not None and bs is not None and abs(bs - gs) >= GPU_SM_MIN_POINTS:
            changed = True
    row["changed"] = changed
    return row


def _steal_row(g: Dict[str, Any], b: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    gs, bs = g["steal_pct"], b["steal_pct"]
    if not gs or not bs:
        return None
    gm, bm = median(gs), median(bs)
    apart = min(bs) > max(gs) or min(gs) > max(bs) if len(gs) > 1 and len(bs) > 1 else True
    return {"kind": "steal", "command": "other virtual machines (steal time)", "good": {"steal_pct": round(gm, 2)},
            "bad": {"steal_pct": round(bm, 2)}, "changed": bool(abs(bm - gm) >= STEAL_MIN_POINTS and apart)}


def compare(good: Dict[str, Any], bad: Dict[str, Any], use_runs: bool = True) -> Optional[Dict[str, Any]]:
    """The neighbours of the two sides compared (see the module doc); None when a side recorded none.
    `use_runs` False: the captures' only (a node of merged snapshots: the runs are the whole job's)."""
    g_records, b_records = (_records(good), _records(bad)) if use_runs else ([], [])
    source = "runs"
    if not g_records or not b_records:
        g_records, b_records, source = _capture(good), _capture(bad), "capture"
    if not g_records or not b_records:
        return None
    g, b = _side(g_records), _side(b_records)
    rows = [_cpu_row(g["cpu"].get(command), b["cpu"].get(command)) for command in sorted(set(g["cpu"]) | set(b["cpu"]))]
    rows.sort(key=lambda r: (not r["changed"], -max((r["good"] or {}).get("cpus", 0.0),
                                                    (r["bad"] or {}).get("cpus", 0.0)), r["command"]))
    rows = [r for i, r in enumerate(rows) if r["changed"] or i < TABLE_ROWS]
    gpu_rows = [_gpu_row(key[0], g["gpu"].get(key), b["gpu"].get(key), g["n"], b["n"])
                for key in sorted(set(g["gpu"]) | set(b["gpu"]))]
    steal = _steal_row(g, b)
    machine = {}
    for side, found in (("good", g), ("bad", b)):
        machine[side] = {"others_cpus": _median(found["others_cpus"]), "runnable": _median(found["runnable"]),
                         "steal_pct": _median(found["steal_pct"]), "host_busy_cpus": _median(found["host_busy_cpus"])}
        if found["cpu_set_size"] is not None:  # the work may use only some of the machine's CPUs
            machine[side].update(cpu_set_size=found["cpu_set_size"],
                                 cpu_set_busy_cpus=_median(found["cpu_set_busy_cpus"]))
    out: Dict[str, Any] = {"source": source, "count": {"good": g["n"], "bad": b["n"]},
                           "cpus_online": g["cpus_online"] or b["cpus_online"], "machine": machine,
                           "processes": rows, "gpu": gpu_rows}
    if steal is not None:
        out["steal"] = steal
    for row in rows + gpu_rows + ([steal] if steal is not None else []):  # the words every renderer prints
        row["key"] = row_key(row)
        for side in ("good", "bad"):
            row[f"{side}_text"] = describe(row, side, source) or "not seen"
    out["summary"] = _summary(out)
    return out


def _summary(found: Dict[str, Any]) -> str:
    """'measured during the runs (GOOD 5, BAD 5) on 2 CPUs: other processes kept 0.02 → 1.6 CPUs busy, ...'."""
    count, machine = found["count"], found["machine"]
    where = (f"measured during the runs (GOOD {count['good']}, BAD {count['bad']})" if found["source"] == "runs"
             else "seen at capture")
    online = found.get("cpus_online")
    parts = []
    for name, words, unit in (("others_cpus", "other processes kept", " CPUs busy"),
                              ("runnable", "runnable threads", ""), ("steal_pct", "steal", "%")):
        g, b = machine["good"].get(name), machine["bad"].get(name)
        if g is not None or b is not None:
            parts.append(f"{words} {_shown(g)} \u2192 {_shown(b)}{unit}")
    return f"{where}{f' on {online:g} CPUs' if isinstance(online, (int, float)) else ''}: {', '.join(parts)}"


def _shown(value: Optional[float]) -> str:
    return "?" if value is None else f"{value:.2g}"


def share_taken(kind: str, good: Optional[Dict[str, Any]], bad: Optional[Dict[str, Any]]) -> Optional[float]:
    """The share (0..1) of the machine a neighbour took on BAD beyond GOOD, from a difference's two values
    (each a row side with "cpus_online"): its extra CPUs over the CPUs online, its extra steal time, its SM
    utilisation on a GPU; None when it cannot be told (no CPU count, no SM figure from NVML). A process that ran
    on the CPUs the work may use, when those are fewer than the machine's, is sized against those."""
    g, b = good or {}, bad or {}
    if kind == "steal":
        return max(0.0, float(b.get("steal_pct") or 0) - float(g.get("steal_pct") or 0)) / 100.0
    if kind == "gpu":
        sm = b.get("sm_util_pct")
        return min(1.0, float(sm) / 100.0) if isinstance(sm, (int, float)) else None
    online = b.get("cpus_online") or g.get("cpus_online")
    cpu_set = (b.get("machine") or {}).get("cpu_set_size") if isinstance(b.get("machine"), dict) else None
    if b.get("on_cpu_set") is True and isinstance(cpu_set, (int, float)) and cpu_set > 0:
        online = cpu_set
    if not isinstance(online, (int, float)) or online <= 0:
        return None
    return min(1.0, max(0.0, float(b.get("cpus") or 0) - float(g.get("cpus") or 0)) / float(online))


def more_on_bad(row: Dict[str, Any]) -> bool:
    """A neighbour's row that BAD had more of (present there only, or using more there)."""
    good, bad = row.get("good"), row.get("bad")
    if bad is None:
        return False
    if good is None:
        return True
    if row["kind"] == "cpu":
        return float(bad["cpus"]) > float(good["cpus"])
    if row["kind"] == "steal":
        return float(bad["steal_pct"]) > float(good["steal_pct"])
    return (float(bad.get("present") or 0) > float(good.get("present") or 0)
            or float(bad.get("used_memory_bytes") or 0) > float(good.get("used_memory_bytes") or 0)
            or float(bad.get("sm_util_pct") or 0) > float(good.get("sm_util_pct") or 0))


def shares_cpus(row: Dict[str, Any]) -> bool:
    """Whether a neighbour on BAD could have taken the work's CPUs: not one seen only on CPUs the work may
    not use (when it may use only some of the machine's)."""
    return (row.get("bad") or {}).get("on_cpu_set") is not False


def machine_full(machine: Dict[str, Any], online: Any) -> str:
    """How a side's machine had no CPU to spare, in words ("" when it had, or cannot be told): the CPUs the work
    may use, when fewer than the machine's, all but all busy (BUSY_MACHINE_SHARE); else more runnable threads
    than CPUs, or the machine's CPUs all but all busy."""
    size, on_set = machine.get("cpu_set_size"), machine.get("cpu_set_busy_cpus")
    if isinstance(size, (int, float)) and size > 0 and isinstance(on_set, (int, float)):
        if on_set >= BUSY_MACHINE_SHARE * size:
            return f"the {size:g} CPU{'s' if size != 1 else ''} the work may use kept {on_set:.2g} busy"
        return ""  # the work's own CPUs had time to spare, whatever the rest of the machine did
    if not isinstance(online, (int, float)) or online <= 0:
        return ""
    runnable, busy = machine.get("runnable"), machine.get("host_busy_cpus")
    cpus = f"{online:g} CPU{'s' if online != 1 else ''}"
    if isinstance(runnable, (int, float)) and runnable > online:
        return f"{runnable:g} runnable threads for {cpus}"
    if isinstance(busy, (int, float)) and busy >= BUSY_MACHINE_SHARE * online:
        return f"the machine kept {busy:.2g} of {cpus} busy"
    return ""


def percent(share: float) -> float:
    return share * 100.0


def changed_rows(found: Optional[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """The rows that are causes of their own, CPU first (the busiest), then GPU, then steal time."""
    if not found:
        return []
    rows = [r for r in found["processes"] if r["changed"]] + [r for r in found["gpu"] if r["changed"]]
    if found.get("steal", {}).get("changed"):
        rows.append(found["steal"])
    return rows


def row_subject(row: Dict[str, Any]) -> Subject:
    """What a neighbour's difference is about: its command, its kind (cpu, gpu, steal) and GPU; its key
    (model/keys.py) reads neighbour.cpu.<command>, neighbour.gpu.<i>.<command>, neighbour.steal."""
    return Subject("neighbour", row["command"], row["kind"], row.get("gpu", ""))


def row_key(row: Dict[str, Any]) -> str:
    """The readable key of a neighbour's difference (singular "neighbour": the "neighbours" section's own
    fields are volatile, these are not)."""
    return view_key(row_subject(row))


def describe(row: Dict[str, Any], side: str, source: str = "runs") -> Optional[str]:
    """One side of a row in words: '1.9 CPUs (2 processes: pid 123, 124)', 'on the GPU in 5/5 runs, 40 GiB'."""
    value = row.get(side)
    if value is None:
        return None
    if row["kind"] == "steal":
        return f"steal {value['steal_pct']:g}% of CPU time"
    if row["kind"] == "gpu":
        bits = [f"held GPU {row['gpu']} in {value['present']:.0%} of the {source}" if source == "runs"
                else f"held GPU {row['gpu']}"]
        if value.get("used_memory_bytes"):
            bits.append(f"{value['used_memory_bytes'] / 2**30:.1f} GiB")
        if value.get("sm_util_pct") is not None:
            bits.append(f"SM {value['sm_util_pct']:g}%")
        if value.get("pids"):
            bits.append("pid " + ", ".join(map(str, value["pids"][:3])))
        return ", ".join(bits)
    pids = value.get("pids") or []
    who = (f"{value['processes']} processes: pid {', '.join(map(str, pids[:3]))}" if value.get("processes", 1) > 1
           else (f"pid {pids[0]}" if pids else ""))
    runs = value.get("runs")
    seen = (f", busy in {runs} of the {value['of']} runs" if source == "runs" and isinstance(runs, int)
            and runs < value.get("of", runs) else "")
    return f"{value['cpus']:g} CPUs" + (f" ({who}{seen})" if who or seen else "")
