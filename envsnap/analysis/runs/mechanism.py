"""How the runs got slower: GOOD's and BAD's run telemetry compared, as one mechanism with its numbers.

`mechanism(good, bad)` reads the "telemetry" of each side's successful runs (envsnap/measure/
telemetry.py) and returns

    {"kind": "cpu_work" | "fewer_cpus" | "gpu_work" | "gpu_shared" | "launch_bound" | "io_wait" | "contention"
             | "unknown",
     "line": one sentence ("CPU time per run +210%, CPU set unchanged: more work on the CPU"),
     "factors": {name: comparison}, "components": {"matches": [...], "contradicts": [...]},
     "runs": {"good": n, "bad": n}, "noise": how "beyond noise" was decided,
     "neighbours": [keys of the neighbours' differences the line names] (when it names any)}

Every comparison is a per-run series on each side (wall time, CPU time of the command's tree plus
the --pid/--sglang processes, CPUs kept busy, CPU set size, context switches, GPU utilisation and
SM clock, GPU-busy seconds). A series moved when the two sides' runs do not overlap at all AND the change of the
medians exceeds either side's own relative range (max - min over median) and the drift between two
measuring sessions (SESSION_DRIFT_PCT): the runs' own spread is the noise within a session (noise.series).
With a single run on a side there is no spread to judge by; then
only a change of SINGLE_RUN_MIN_PCT or more counts, and "noise" says so. CPU time and counts are
preferred to wall time wherever they answer the question: another program loading the machine
stretches wall time but not the CPU time of the work.

Which mechanism: (1) a smaller CPU set on BAD; (2) with GPUs busy on at least one side: utilisation
fell (launch/CPU bound) or stayed busy (GPU work slower, at a lower clock or not); (2b) with the GPU
busy most of the run on both sides and more GPU-busy time per run, CPU time that grew no faster than
it is the host waiting on the GPU (CUDA's synchronisation spins): GPU work; (3) otherwise the
extra wall time is split into what extra CPU work accounts for (extra CPU seconds over GOOD's
CPUs-busy) and the rest, off the CPU: waiting for a CPU (involuntary switches per CPU second up),
waiting for something else (voluntary switches up), or fewer threads at work. The components of
analysis/knowledge each mechanism implicates or argues against are the table MECHANISMS.

Neighbours (analysis/compare/neighbours.py, from each run's "neighbours"): another process holding a GPU the
run used on BAD only is the mechanism of its own ("GPU shared with pid N (command)": its kernels count in
the GPU's utilisation, so "GPU work grew" would mislead); other processes that used more CPU on BAD while
the run lost CPU (fewer CPUs kept busy, more involuntary switches, or a longer wall with no more CPU time)
are the contention's cause, named in the line ("runnable but not running: 2 other processes used 1.9
CPUs"); so is steal time a hypervisor gave to other guests. A line never says no counter moved while one
it compares moved beyond noise: it names what moved instead.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from envsnap.analysis.compare import neighbours as neighbours_mod
from envsnap.analysis.knowledge import (
    COMMUNICATION,
    CPU_HOST,
    DRAFTER,
    GRAPHS,
    KERNELS,
    MEMORY,
)
from envsnap.analysis.runs import noise, stats
from envsnap.analysis.runs.noise import SINGLE_RUN_MIN_PCT
from envsnap.model import keys
from envsnap.model.result_types import Mechanism, RunCounts
from envsnap.model.snapshot import number

# NVML utilisation is the share of its sample period in which any kernel ran. A GPU-bound loop
# reads 95-100%; below 90% the gaps between kernels are a tenth of the time or more: the host side
# (launches, CPU work, synchronisation) leaves the GPU waiting.
GPU_BUSY_PCT = 90.0
# A GPU that never got above this in any run on either side was not used by the workload.
GPU_ACTIVE_PCT = 1.0
# A GPU busy at least this share of the run on both sides did most of the work: then more CPU time
# can be the host waiting on it. Measured on an H200 (a run of tests/gpu): a loop
# of back-to-back bf16 8192x8192 products, never idle inside, read 72% over its active span and 62%
# over the whole run (edge readings of NVML's sample periods and the start-up dilute it); a loop
# that sleeps 6 ms after each 1.5 ms product on the host reads ~20%. Half separates the two.
GPU_MOSTLY_BUSY_PCT = 50.0
# The host thread that waits for the GPU spins (cudaDeviceSynchronize / torch.cuda.synchronize and a
# full launch queue busy-wait by default), so CPU time grows with GPU-busy time: on that H200, twice
# the GPU work (+100% GPU-busy time) cost +62% CPU time per run. CPU time that grew no faster than
# this multiple of the GPU-busy time's growth is the host waiting, not host work.
HOST_WAIT_CPU_GROWTH_MAX = 1.25
# ...and the extra GPU-busy time must account for at least this share of the extra wall time.
GPU_SHARE_OF_EXTRA_WALL = 0.5
# Share of the extra wall time that extra CPU work must account for to be the mechanism.
CPU_SHARE_OF_EXTRA_WALL = 0.5

# kind -> (components it implicates, components it argues against, why). Read by the ranking.
MECHANISMS: Dict[str, Tuple[Tuple[str, ...], Tuple[str, ...], str]] = {
    "cpu_work": ((CPU_HOST,), (),
                 "more CPU time per run: host-side work (threads, instruction sets, allocator, interpreter, "
                 "code) grew"),
    "fewer_cpus": ((CPU_HOST,), (),
                   "the work had fewer CPUs (affinity, cgroup, thread counts): a host resource"),
    "gpu_work": ((KERNELS, COMMUNICATION, DRAFTER), (CPU_HOST, GRAPHS),
                 "the GPU stayed busy and the work still took longer: the GPU's own work (kernels, "
                 "collectives, draft model) grew or slowed; launch overhead and the host cannot be what "
                 "limits a GPU that is never idle"),
    "gpu_clock": ((KERNELS,), (CPU_HOST, GRAPHS),
                  "the GPU stayed busy at a lower SM clock: clocks, power limits, throttling (gpu.* rules "
                  "of component attention/kernels)"),
    "launch_bound": ((GRAPHS, CPU_HOST), (KERNELS,),
                     "the GPU idled more: launches, CPU work or synchronisation leave it waiting; slower "
                     "kernels would have kept it busier, not idler"),
    "io_wait": ((COMMUNICATION, MEMORY), (),
                "the processes waited more (voluntary switches): peers, network, locks, paging, sleeps"),
    "contention": ((CPU_HOST,), (),
                   "runnable but not running (involuntary switches per CPU second): more threads or "
                   "processes than CPUs, or something else on them"),
    "contention_by_neighbours": ((), (),
                                 "other processes, or other virtual machines, took the CPU time the run's runnable "
                                 "threads waited for: the neighbours named are the mechanism, not a setting of the run"),
    "gpu_shared": ((), (),
                   "another process's kernels shared the GPU: they count in its utilisation and take SM time from "
                   "the run's; the neighbour named is the mechanism, not a component of the run's own"),
    "unknown": ((), (), "the telemetry does not single out a mechanism"),
}


# ---------------------------------------------------------------- per-run features

def _ok_telemetry(snap: Dict[str, Any]) -> List[Dict[str, Any]]:
    out = []
    for run in snap.get("runs") or []:
        if isinstance(run, dict) and run.get("ok") is not False and isinstance(run.get("telemetry"), dict):
            out.append(run["telemetry"])
    return out


def _watched(usage: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    found = usage.get("watched")
    return {k: v for k, v in found.items() if isinstance(v, dict) and "error" not in v} if isinstance(found, dict) else {}


def _cpu_s(usage: Dict[str, Any]) -> Optional[float]:
    user, system = number(usage.get("cpu_user_s")), number(usage.get("cpu_system_s"))
    if user is None or system is None:
        return None
    total = user + system
    for proc in _watched(usage).values():
        total += (number(proc.get("cpu_user_s")) or 0.0) + (number(proc.get("cpu_system_s")) or 0.0)
    return total


def _count(usage: Dict[str, Any], name: str) -> Optional[float]:
    own = number(usage.get(name))
    if own is None:
        return None
    return own + sum(number(p.get(name)) or 0.0 for p in _watched(usage).values())


def _active_gpus(sides: Sequence[List[Dict[str, Any]]]) -> List[str]:
    seen: Dict[str, float] = {}
    for runs in sides:
        for usage in runs:
            for index, gpu in (usage.get("gpus") or {}).items():
                util = number(gpu.get("util_pct_mean")) if isinstance(gpu, dict) else None
                if util is not None:
                    seen[index] = max(seen.get(index, 0.0), util)
    return sorted(i for i, top in seen.items() if top >= GPU_ACTIVE_PCT)


def _gpu_mean(usage: Dict[str, Any], gpus: List[str], *fields: str) -> Optional[float]:
    """Mean over the active GPUs of the first of `fields` each has (the active-span figure first:
    a benchmark's own start-up leaves the GPU idle before its work begins)."""
    import statistics  # here: runs without telemetry (most diffs) never need it, nor its fractions and decimal

    values = []
    for index in gpus:
        gpu = (usage.get("gpus") or {}).get(index)
        if not isinstance(gpu, dict):
            continue
        value = next((number(gpu.get(f)) for f in fields if number(gpu.get(f)) is not None), None)
        if value is not None:
            values.append(value)
    return statistics.fmean(values) if values else None


def _series(runs: List[Dict[str, Any]], gpus: List[str]) -> Dict[str, List[float]]:
    out: Dict[str, List[float]] = {}

    def put(name: str, value: Optional[float]) -> None:
        if value is not None:
            out.setdefault(name, []).append(value)

    for usage in runs:
        wall, cpu = number(usage.get("wall_s")), _cpu_s(usage)
        put("wall_s", wall)
        put("cpu_s", cpu)
        if wall and cpu is not None:
            put("busy_cpus", cpu / wall)
        cpus = usage.get("cpu_set")
        if isinstance(cpus, list) and cpus:
            put("cpus", float(len(cpus)))
        for key, proc in sorted(_watched(usage).items()):
            if isinstance(proc.get("cpu_set"), list) and proc["cpu_set"]:
                put(keys.series_key("cpus", key), float(len(proc["cpu_set"])))
        # What the scheduler did (measure/sched_sampling.py): time runnable but waiting on a run queue, summed over
        # the tree's and the watched processes' threads, and each watched process's own.
        put("run_delay_s", _count(usage, "run_delay_s"))
        for key, proc in sorted(_watched(usage).items()):
            put(keys.series_key("run_delay_s", key), number(proc.get("run_delay_s")))
        put("major_faults", _count(usage, "major_faults"))
        put("ctx_voluntary", _count(usage, "ctx_voluntary"))
        involuntary = _count(usage, "ctx_involuntary")
        if involuntary is not None and cpu:
            put("ctx_involuntary_per_cpu_s", involuntary / cpu)
        put("peak_threads", number(usage.get("peak_threads")))
        found = usage.get("neighbours")
        if isinstance(found, dict):  # measure/neighbours.py: the rest of the machine during the run
            put("others_cpus", number(found.get("others_cpus")))
            runnable = found.get("runnable")
            put("runnable", number(runnable.get("median")) if isinstance(runnable, dict) else None)
            put("steal_pct", number(found.get("steal_pct")))
        if gpus:
            put("gpu_util_pct", _gpu_mean(usage, gpus, "util_pct_steady_mean", "util_pct_active_mean",
                                          "util_pct_mean"))
            put("sm_clock_mhz", _gpu_mean(usage, gpus, "sm_clock_mhz_active_median", "sm_clock_mhz_median"))
            busy_s = _gpu_mean(usage, gpus, "busy_s")
            if busy_s is None and wall is not None:  # telemetry before busy_s: utilisation over the run
                mean = _gpu_mean(usage, gpus, "util_pct_mean")
                busy_s = None if mean is None else mean / 100.0 * wall
            put("gpu_busy_s", busy_s)
    return out


# ---------------------------------------------------------------- comparing two series

def compare(good: Sequence[float], bad: Sequence[float]) -> Dict[str, Any]:
    """Medians, change, the runs' own noise, and whether BAD moved beyond it (noise.series)."""
    g, b = sorted(good), sorted(bad)
    gm, bm = stats.median(g), stats.median(b)
    change = (bm - gm) / abs(gm) * 100.0 if gm else None
    out: Dict[str, Any] = {"good": round(gm, 6), "bad": round(bm, 6), "n": [len(g), len(b)],
                           "change_pct": None if change is None else round(change, 2)}
    if len(g) < 2 or len(b) < 2:
        out["noise"] = f"single run{'s' if len(g) < 2 and len(b) < 2 else ''}: {SINGLE_RUN_MIN_PCT:g}% needed"
        out["noise_pct"] = None
        out["beyond_noise"] = noise.single_run(change, gm, bm)
        return out
    spread, out["beyond_noise"] = noise.series(g, b, gm, bm, change)
    out["noise_pct"] = round(spread, 2)
    out["noise"] = "runs' own spread"
    return out


def _up(f: Optional[Dict[str, Any]]) -> bool:
    return bool(f and f["beyond_noise"] and f["bad"] > f["good"])


def _down(f: Optional[Dict[str, Any]]) -> bool:
    return bool(f and f["beyond_noise"] and f["bad"] < f["good"])


def _pct(f: Dict[str, Any]) -> str:
    change = f.get("change_pct")
    if change is None:
        return f"{_n(f['good'])} \u2192 {_n(f['bad'])}"
    sign = "+" if change >= 0 else "\u2212"
    return f"{sign}{abs(change):.0f}%"


def _times(f: Dict[str, Any]) -> str:
    if f["good"] > 0:
        return f"\u00d7{f['bad'] / f['good']:.1f}"
    return f"{_n(f['good'])} \u2192 {_n(f['bad'])}"


def _n(value: float) -> str:
    return f"{value:.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2g}"


def _plural(n: float, word: str) -> str:
    return f"{_n(n)} {word}{'' if n == 1 else 's'}"


# ---------------------------------------------------------------- the mechanism

def mechanism(good: Dict[str, Any], bad: Dict[str, Any]) -> Mechanism:
    """The mechanism of the change from GOOD's runs to BAD's (see the module doc), with the profiler traces'
    per-step comparison under "trace" when both sides' runs have traces (analysis/runs/trace_diff.py); its line
    joins the telemetry's."""
    from envsnap.analysis.runs import trace_diff

    out = _telemetry_mechanism(good, bad)
    trace = trace_diff.compare(good, bad)
    if trace is not None:
        out["trace"] = trace
        out["line"] = trace["line"] if out["kind"] == "unknown" else f"{out['line']}; {trace['line']}"
    return out


def _telemetry_mechanism(good: Dict[str, Any], bad: Dict[str, Any]) -> Mechanism:
    good_runs, bad_runs = _ok_telemetry(good), _ok_telemetry(bad)
    counts: RunCounts = {"good": len(good_runs), "bad": len(bad_runs)}
    if not good_runs or not bad_runs:
        missing = " and ".join(side for side, runs in (("GOOD", good_runs), ("BAD", bad_runs)) if not runs)
        return _result("unknown", f"no run telemetry on {missing} (measured without `envsnap run`, or "
                                  "by an envsnap that did not record it)", {}, counts, {})
    gpus = _active_gpus([good_runs, bad_runs])
    gs, bs = _series(good_runs, gpus), _series(bad_runs, gpus)
    factors = {name: compare(gs[name], bs[name]) for name in sorted(set(gs) & set(bs))}
    found = neighbours_mod.compare(good, bad)
    if not found or found["source"] != "runs":
        found = None
    kind, line, extra = _decide(factors, gpus, _reasons(bad_runs, gpus), _reasons(good_runs, gpus), found)
    return _result(kind, line, factors, counts, extra)


def _result(kind: str, line: str, factors: Dict[str, Any], counts: RunCounts,
            extra: Dict[str, Any]) -> Mechanism:
    table_kind = extra.get("table_kind", kind)
    matches, contradicts, why = MECHANISMS[table_kind]
    out: Mechanism = {"kind": kind, "line": line, "factors": factors, "runs": counts,
                      "components": {"matches": list(matches), "contradicts": list(contradicts), "why": why},
                      "noise": ("a factor moved when GOOD's and BAD's runs do not overlap and the change of the medians "
                                "exceeds either side's own relative range; with a single run on a side, when it is "
                                f"{SINGLE_RUN_MIN_PCT:g}% or more")}
    if "actor" in extra:
        out["actor"] = extra["actor"]
    if extra.get("neighbours"):
        out["neighbours"] = extra["neighbours"]
    return out


def _reasons(runs: List[Dict[str, Any]], gpus: List[str]) -> Dict[str, float]:
    """Mean share of samples each clock-event reason was on, over the active GPUs and runs."""
    shares: Dict[str, List[float]] = {}
    count = 0
    for usage in runs:
        for index in gpus:
            gpu = (usage.get("gpus") or {}).get(index)
            if not isinstance(gpu, dict):
                continue
            count += 1
            for name, share in (gpu.get("clock_event_reasons") or {}).items():
                if number(share) is not None:
                    shares.setdefault(name, []).append(float(share))
    return {name: sum(v) / count for name, v in shares.items()} if count else {}


def _decide(f: Dict[str, Dict[str, Any]], gpus: List[str], reasons_bad: Dict[str, float],
            reasons_good: Dict[str, float], found: Optional[Dict[str, Any]] = None) -> Tuple[str, str, Dict[str, Any]]:
    rows = neighbours_mod.changed_rows(found)
    full = _machine_full(found)
    kind, line, extra = _decide_counters(f, gpus, reasons_bad, reasons_good, rows, full)
    if "run-queue wait" not in line and _wait_note(f):  # runnable, not running: said whatever the mechanism
        line += ";" + _wait_note(f).lstrip(",")
    if extra.get("neighbours"):
        return kind, line, extra
    # Neighbours on BAD the counters did not single out: said, so that the line never hides them.
    more = [r for r in rows if r["kind"] in ("cpu", "steal") and neighbours_mod.more_on_bad(r)]
    if more:
        if not full:
            pinned = ((found or {}).get("machine") or {}).get("bad", {}).get("cpu_set_size") is not None
            why = "the CPUs the work may use had time to spare" if pinned else "the machine had CPUs to spare"
        elif not lost_cpu(f):
            why = "the runs lost no CPU beyond their spread"
        elif any(not neighbours_mod.shares_cpus(r) for r in more):
            why = "they ran on other CPUs than the work's"
        elif kind == "cpu_work":
            why = "the runs' own extra CPU work accounts for their time"
        elif kind == "io_wait":
            why = "the runs' own waits account for their time off the CPU"
        else:  # the counters put the time lost elsewhere: the line says where
            why = "the counters put the time elsewhere"
        line += f"; beside the runs on BAD {_neighbours_text(more)}, but {why}"
    return kind, line, extra


def _decide_counters(f: Dict[str, Dict[str, Any]], gpus: List[str], reasons_bad: Dict[str, float],
                     reasons_good: Dict[str, float], rows: Sequence[Dict[str, Any]],
                     full: str) -> Tuple[str, str, Dict[str, Any]]:
    wall: Any = f.get("wall_s")  # each a series' comparison, or None when the runs did not record it
    cpu: Any = f.get("cpu_s")
    busy: Any = f.get("busy_cpus")
    cpu_note = "CPU time per run unchanged" if cpu and not cpu["beyond_noise"] else (
        f"CPU time per run {_pct(cpu)}" if cpu else "no CPU time recorded")

    # 1. A smaller CPU set: a fact, not a statistic (every BAD run had fewer CPUs than every GOOD run).
    for name in sorted(n for n in f if keys.series_of(n)[0] == "cpus"):
        g_runs, b_runs = f[name]["good"], f[name]["bad"]
        if f[name]["beyond_noise"] and b_runs < g_runs:
            actor = keys.series_of(name)[1]
            fewer = g_runs / b_runs if b_runs else float("inf")
            if _up(cpu) and cpu["good"] and cpu["bad"] / cpu["good"] > fewer:
                break  # more CPU work outweighs the lost CPUs: the CPU-work branch says both
            who = f"{actor} " if actor else ""
            line = f"{who}ran on {_plural(b_runs, 'CPU')} instead of {_n(g_runs)}; {cpu_note}{_wait_note(f, actor)}"
            return "fewer_cpus", line, {"actor": actor} if actor else {}

    # 1b. Another process on a GPU the run used, on BAD only (or much more there): its kernels count in the
    # GPU's utilisation, so what follows would read them as the run's own GPU work.
    util: Any = f.get("gpu_util_pct")
    clock: Any = f.get("sm_clock_mhz")
    # (One that NVML saw run no kernel, SM 0%, only holds memory: not sharing the SMs.)
    shared = [r for r in rows if r["kind"] == "gpu" and neighbours_mod.more_on_bad(r)
              and ((r["bad"] or {}).get("sm_util_pct") is None or r["bad"]["sm_util_pct"] >= GPU_ACTIVE_PCT)]
    if shared:
        busy_note = f"; GPU busy {util['good']:.0f}% → {util['bad']:.0f}%" if util is not None else ""
        who = "; ".join(f"GPU {r['gpu']} shared with {_who(r)} on BAD ({neighbours_mod.describe(r, 'bad')})"
                        for r in shared)
        return ("gpu_shared", f"{who}{busy_note}: its kernels count in the GPU's utilisation and take SM time "
                              f"from the run's; {cpu_note}", {"neighbours": [neighbours_mod.row_key(r) for r in shared]})

    # 2. GPUs in play: busy or not, and was the SM clock held.
    if gpus and util is not None and max(util["good"], util["bad"]) >= GPU_BUSY_PCT:
        if _down(util) and util["bad"] < GPU_BUSY_PCT:
            return ("launch_bound", f"GPU idle {100 - util['bad']:.0f}% (GOOD: {100 - util['good']:.0f}%): "
                                    f"launch/CPU bound; {cpu_note}", {})
        if util["bad"] >= GPU_BUSY_PCT and util["good"] >= GPU_BUSY_PCT:
            both = f"GPU busy {min(util['good'], util['bad']):.0f}% on both sides"
            if _down(clock):
                # The reasons NVML gave on BAD, in at least half its samples, more often than on GOOD.
                named = sorted(n for n, share in reasons_bad.items()
                               if share >= 0.5 and share > reasons_good.get(n, 0.0) and n != "GpuIdle")
                why = f" ({', '.join(named)})" if named else ""
                return ("gpu_work", f"{both}, SM clock {_n(clock['good'])} \u2192 {_n(clock['bad'])} MHz{why}: "
                                    "the GPU ran at a lower clock", {"table_kind": "gpu_clock"})
            held = "SM clock held" if clock else "SM clock not recorded"
            return "gpu_work", f"{both}, {held}: GPU work got slower", {}

    # 2b. The GPU busy most of the run on both sides and more GPU-busy time per run: more CPU time
    # that grew no faster than the GPU-busy time is the host waiting on the GPU (it spins), not
    # host work; the GPU's own work grew.
    busy_s: Any = f.get("gpu_busy_s")
    if (gpus and util is not None and min(util["good"], util["bad"]) >= GPU_MOSTLY_BUSY_PCT and not _down(util)
            and _up(busy_s) and busy_s["good"] > 0 and (not wall or not _up(wall) or (busy_s["bad"] - busy_s["good"])
                                                        >= GPU_SHARE_OF_EXTRA_WALL * (wall["bad"] - wall["good"]))):
        busy_growth = busy_s["bad"] / busy_s["good"] - 1.0
        cpu_growth = (cpu["bad"] / cpu["good"] - 1.0) if (cpu and cpu["good"] > 0) else 0.0
        if not _up(cpu) or cpu_growth <= HOST_WAIT_CPU_GROWTH_MAX * busy_growth:
            waiting = f", CPU time {_pct(cpu)} with it (the host waits on the GPU)" if _up(cpu) else f", {cpu_note}"
            return ("gpu_work", f"GPU busy {min(util['good'], util['bad']):.0f}% on both sides, GPU-busy time per "
                                f"run {_pct(busy_s)}{waiting}: GPU work grew", {})

    # 2c. Other processes (or other virtual machines) took CPU the run lost: they are the contention -- when
    # the machine had no CPU to spare on BAD (else a runnable thread of the run would have run on one).
    gpu_note = f"; GPU busy {util['bad']:.0f}%" if util is not None else ""
    involuntary: Any = f.get("ctx_involuntary_per_cpu_s")
    lost = lost_cpu(f)
    others = [r for r in rows if r["kind"] in ("cpu", "steal") and neighbours_mod.more_on_bad(r)
              and neighbours_mod.shares_cpus(r)]
    # Waits of the run's own (voluntary switches) that grew more than its preemptions account for its time off
    # the CPU: a neighbour beside a run that sleeps more is no contention (the waits are said below).
    voluntary: Any = f.get("ctx_voluntary")
    waits = _up(voluntary) and not (_up(involuntary) and not _waits_grew_more(voluntary, involuntary, cpu))
    # So does more CPU work of the run's own that accounts for most of the extra wall (below: cpu_work).
    work = _up(cpu) and (not _up(wall) or _cpu_wall(cpu, busy) >= CPU_SHARE_OF_EXTRA_WALL * _extra_wall(wall))
    if lost and others and full and not waits and not work:
        return ("contention", f"runnable but not running: {_neighbours_text(others)}; {lost}, {full}{gpu_note}",
                {"neighbours": [neighbours_mod.row_key(r) for r in others], "table_kind": "contention_by_neighbours"})

    # 3. The CPU side: more work, or more time off the CPU (and why).
    if not _up(wall) and not _up(cpu):
        if wall is None:
            return "unknown", "no wall time in the telemetry", {}
        if _down(cpu) or _down(busy):
            # Less CPU per run with no longer a wall (a benchmark of fixed duration does less in it).
            less = ", ".join(x for x in (f"CPU time per run {_pct(cpu)}" if _down(cpu) else "",
                                         f"CPUs kept busy {busy['good']:.2f} → {busy['bad']:.2f}" if _down(busy)
                                         else "") if x)
            wall_held = f"wall {_pct(wall)}" if wall["beyond_noise"] else "wall unchanged"
            if _up(involuntary):
                return ("contention", f"{less}, {wall_held}, involuntary context switches per CPU second "
                                      f"{_times(involuntary)}{_wait_note(f)}: waiting for a CPU (contention){gpu_note}", {})
            return "fewer_cpus", f"{less}, {wall_held}: the work got less CPU{gpu_note}", {}
        moved = _moved_text(f)
        if moved:
            return "unknown", f"wall and CPU time per run held; moved beyond the runs' spread: {moved}{gpu_note}", {}
        # Worded apart from the verdict's "no change": the metric may well have moved while no counter did.
        return "unknown", "no run counter (CPU time, CPU set, switches, threads) moved beyond the runs' spread" \
            + gpu_note, {}
    extra_wall, cpu_wall = _extra_wall(wall), _cpu_wall(cpu, busy)
    set_note = "CPU set unchanged" if "cpus" in f and not f["cpus"]["beyond_noise"] else (
        f"CPU set {_n(f['cpus']['good'])} \u2192 {_n(f['cpus']['bad'])} CPUs" if "cpus" in f else "CPU set not recorded")
    if _up(cpu) and (not _up(wall) or cpu_wall >= CPU_SHARE_OF_EXTRA_WALL * extra_wall):
        threads: Any = f.get("peak_threads")
        thread_note = (f", peak threads {_n(threads['good'])} \u2192 {_n(threads['bad'])}"
                       if threads and threads["beyond_noise"] else "")
        return "cpu_work", f"CPU time per run {_pct(cpu)}, {set_note}{thread_note}: more work on the CPU{gpu_note}", {}
    wall_note = f"wall {_pct(wall)}"
    if _up(involuntary) and not (_up(voluntary) and _waits_grew_more(voluntary, involuntary, cpu)):
        return ("contention", f"{cpu_note}, {wall_note}, involuntary context switches per CPU second "
                              f"{_times(involuntary)}{_wait_note(f)}: waiting for a CPU (contention){gpu_note}", {})
    # The run-queue wait is the direct measure (schedstat): runnable threads that did not run, without more
    # preemptions when the waiting threads are few and the CPU is held by others (a lower priority, a
    # smaller share), unless the waits of the run's own (voluntary switches) grew instead.
    if _wait_note(f) and not _up(voluntary):
        return ("contention", f"{cpu_note}, {wall_note}{_wait_note(f)}: waiting for a CPU (contention){gpu_note}", {})
    if _up(voluntary):
        return ("io_wait", f"{cpu_note}, {wall_note}, voluntary context switches {_times(voluntary)}: "
                           f"waiting (I/O, sleep, locks, peers){gpu_note}", {})
    threads = f.get("peak_threads")
    if _down(busy) and _down(threads):
        return ("fewer_cpus", f"kept {busy['bad']:.1f} CPUs busy instead of {busy['good']:.1f} (peak threads "
                              f"{_n(threads['good'])} \u2192 {_n(threads['bad'])}, {set_note}): less parallel "
                              f"work; {cpu_note}", {})
    moved = _moved_text(f, skip=("wall_s", "cpu_s"))
    if moved:
        return "unknown", f"{wall_note}, {cpu_note}: the time went elsewhere; moved too: {moved}{gpu_note}", {}
    return "unknown", f"{wall_note}, {cpu_note}: the time went elsewhere and no counter says where{gpu_note}", {}


def _wait_note(f: Dict[str, Dict[str, Any]], actor: str = "") -> str:
    """", run-queue wait of scheduler_TP0 0.02 → 1.4 s per run" when a run-queue wait grew beyond noise: the
    actor's own, else the measured process whose wait grew most, else the runs' whole."""
    grew = sorted(((f[name]["bad"] - f[name]["good"], keys.series_of(name)[1]) for name in f
                   if keys.series_of(name)[0] == "run_delay_s" and keys.series_of(name)[1] and _up(f[name])),
                  reverse=True)
    who = actor if actor and _up(f.get(keys.series_key("run_delay_s", actor))) else (grew[0][1] if grew else "")
    wait = f.get(keys.series_key("run_delay_s", who)) if who else f.get("run_delay_s")
    if wait is None or not _up(wait):
        return ""
    return f", run-queue wait{f' of {who}' if who else ''} {_n(wait['good'])} \u2192 {_n(wait['bad'])} s per run"


def _extra_wall(wall: Optional[Dict[str, Any]]) -> float:
    return float(wall["bad"] - wall["good"]) if wall else 0.0


def _cpu_wall(cpu: Optional[Dict[str, Any]], busy: Optional[Dict[str, Any]]) -> float:
    """The wall seconds the extra CPU time per run accounts for, at GOOD's CPUs kept busy."""
    return float(cpu["bad"] - cpu["good"]) / max(float(busy["good"]), 1e-9) if (cpu and busy) else 0.0


# What each compared series is called in a line.
SERIES_NAMES = {"wall_s": "wall", "cpu_s": "CPU time per run", "busy_cpus": "CPUs kept busy", "cpus": "CPU set",
                "ctx_voluntary": "voluntary switches", "ctx_involuntary_per_cpu_s": "involuntary switches per CPU "
                "second", "peak_threads": "peak threads", "gpu_util_pct": "GPU busy %", "sm_clock_mhz": "SM clock",
                "gpu_busy_s": "GPU-busy time per run", "others_cpus": "CPUs other processes used",
                "runnable": "runnable threads", "steal_pct": "steal %", "run_delay_s": "run-queue wait (s per run)",
                "major_faults": "major page faults"}


def _moved_text(f: Dict[str, Dict[str, Any]], skip: Sequence[str] = ()) -> str:
    """Every series that moved beyond noise, 'CPUs kept busy 1.6 → 0.68' (none: "")."""
    return ", ".join(f"{SERIES_NAMES.get(name.partition('.')[0], name)}"
                     f"{' of ' + name.partition('.')[2] if '.' in name else ''} {_n(c['good'])} → {_n(c['bad'])}"
                     for name, c in sorted(f.items()) if c.get("beyond_noise") and name not in skip)


def lost_cpu(f: Dict[str, Dict[str, Any]]) -> str:
    """How the runs lost CPU on BAD, in words ("" when they did not): fewer CPUs kept busy, more involuntary
    switches per CPU second, a longer wall with no more CPU time; more runnable threads said beside."""
    wall, cpu, busy = f.get("wall_s"), f.get("cpu_s"), f.get("busy_cpus")
    involuntary, runnable = f.get("ctx_involuntary_per_cpu_s"), f.get("runnable")
    found = []
    if busy is not None and _down(busy):
        found.append(f"CPUs kept busy {busy['good']:.2f} → {busy['bad']:.2f}")
    if involuntary is not None and _up(involuntary):
        found.append(f"involuntary switches per CPU second {_times(involuntary)}")
    if wall is not None and _up(wall) and not _up(cpu):
        found.append(f"wall {_pct(wall)} with CPU time per run {'unchanged' if not cpu or not _down(cpu) else _pct(cpu)}")
    if found and runnable is not None and _up(runnable):
        found.append(f"runnable threads {_n(runnable['good'])} → {_n(runnable['bad'])}")
    return ", ".join(found)


def _machine_full(found: Optional[Dict[str, Any]]) -> str:
    """How BAD's machine had no CPU to spare, in words ("" when it had): neighbours.machine_full."""
    if not found:
        return ""
    return neighbours_mod.machine_full((found.get("machine") or {}).get("bad") or {}, found.get("cpus_online"))


def _who(row: Dict[str, Any]) -> str:
    """'pid 123 (python3 train.py)', 'a process whose pid is not visible here'."""
    pids = ((row.get("bad") or {}).get("pids") or [])[:3]
    if row["command"] == neighbours_mod.NOT_VISIBLE:
        return "a process whose pid is not visible here" + (f" (NVML's pid {', '.join(map(str, pids))})" if pids else "")
    return f"pid {', '.join(map(str, pids))} ({row['command']})" if pids else row["command"]


def _neighbours_text(rows: Sequence[Dict[str, Any]]) -> str:
    """'2 other processes used 1.9 CPUs (python3 busy.py: pid 1, 2; GOOD: none)' and steal time, in words."""
    parts = []
    cpu_rows = [r for r in rows if r["kind"] == "cpu"]
    if cpu_rows:
        count = sum(int(r["bad"]["processes"]) for r in cpu_rows)
        used = sum(float(r["bad"]["cpus"]) for r in cpu_rows)
        before = sum(float(r["good"]["cpus"]) for r in cpu_rows if r.get("good"))
        names = "; ".join(f"{r['command']}: pid {', '.join(map(str, r['bad']['pids'][:3]))}" for r in cpu_rows[:2])
        more = f"; and {len(cpu_rows) - 2} more" if len(cpu_rows) > 2 else ""
        parts.append(f"{count} other process{'es' if count != 1 else ''} used {used:.2g} CPUs ({names}{more}; GOOD: "
                     f"{f'{before:.2g} CPUs' if before else 'none'})")
    for row in rows:
        if row["kind"] == "steal":
            parts.append(f"the hypervisor gave {row['bad']['steal_pct']:g}% of the CPU time to other virtual machines "
                         f"(steal; GOOD: {row['good']['steal_pct']:g}%)")
    return " and ".join(parts)


def _ratio(f: Dict[str, Any]) -> float:
    return f["bad"] / f["good"] if f["good"] > 0 else float("inf")


def _waits_grew_more(voluntary: Dict[str, Any], involuntary: Dict[str, Any], cpu: Optional[Dict[str, Any]]) -> bool:
    """Did the waits (voluntary switches, per run) grow more than the preemptions (involuntary switches,
    per CPU second)? By their growth ratios, which put the two on one scale; but a side that had none on
    GOOD grows "infinitely" from any count, so there the switches a run gained are compared. (A benchmark
    that sleeps 40 more times a run beside a short-lived program: involuntary 0 -> 23 per CPU second, ~3.5
    more a run, against ~40 more waits; the ratios alone named contention for the sleeps' wall time.)"""
    # Without CPU time the involuntary switches a run had cannot be counted: the ratios decide then too.
    if (voluntary["good"] > 0 and involuntary["good"] > 0) or not cpu:
        return _ratio(voluntary) > _ratio(involuntary)
    more_preemptions = float(involuntary["bad"] * cpu["bad"] - involuntary["good"] * cpu["good"])
    return float(voluntary["bad"] - voluntary["good"]) > more_preemptions
