"""What the processes and runs showed, as factors of a cause's score: who read a variable, whether the
runs' mechanism (analysis/runs/mechanism.py) fits what the difference acts on, and what a neighbour (another
process beside the work) was seen doing.

Who read it (views.env_read_evidence): a variable the measured processes' Python code read, or NCCL
logged, reached running code (factor "read_by_process"). With read tracking on and no reader, it ranks
lower ("not_read") -- unless a C, C++ or Rust library is known to read it with getenv
(knowledge.NATIVE_READERS), which the probe cannot see: "not read by Python" never means "not read".

The mechanism: a cause whose component the mechanism implicates moves up, one it argues against moves
down (mechanism.MECHANISMS). A setting that acts through a run counter (knowledge.SERIES_LINKS: thread
pools, CPU sets) is judged by that counter instead when the runs recorded it: it moved with the setting,
or it held and the setting did not act here.

A neighbour (compare/neighbours.py) is judged by what it was seen doing: measured beside the benchmark
during the runs ("neighbour_measured") or only at capture ("neighbour_at_capture"); named by the mechanism
as what the run lost its CPU or GPU to ("mechanism_matches"), contradicted by a mechanism that found the time
elsewhere (more CPU work, waits, an idle GPU: "mechanism_contradicts"), or present while the runs lost no CPU
to anyone, or on other CPUs than the work's ("neighbour_no_effect"). Its component never matches a mechanism by itself.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

from envsnap import format as fmt
from envsnap.analysis import knowledge
from envsnap.analysis.compare import libraries as libraries_mod, neighbours
from envsnap.analysis.compare.diff import Comparison, Difference, setting_value
from envsnap.analysis.compare.env_reads import NCCL_READER
from envsnap.analysis.rank.factors import SERIES_SHORT_SHARE, Score
from envsnap.analysis.rank.priors import cpu_count
from envsnap.analysis.runs.mechanism import lost_cpu
from envsnap.model import keys
from envsnap.model.snapshot import section_data

SERIES_WORDS = {knowledge.CPU_SET: "CPU set", knowledge.PEAK_THREADS: "peak threads",
                knowledge.BUSY_CPUS: "CPUs kept busy"}


# ---------------------------------------------------------------- who read it

def _readers(comp: Comparison, name: str) -> Dict[str, Tuple[int, int]]:
    """{process: (reads, records that read it)} over both sides; a process of another run of
    `envsnap run` ("3/python-0") counts as the same process. NCCL's count is its ranks that logged the
    variable, the larger side's."""
    out: Dict[str, Tuple[int, int]] = {}
    for view in (comp.good, comp.bad):
        for key, count in (view.env_reads.get(name) or {}).items():
            process = keys.record_process(key)
            reads, runs = out.get(process, (0, 0))
            out[process] = (max(reads, count), 1) if process == NCCL_READER else (reads + count, runs + 1)
    return out


def _readers_text(readers: Dict[str, Tuple[int, int]]) -> str:
    parts = []
    for process, (reads, _runs) in sorted(readers.items(), key=lambda kv: (-kv[1][0], kv[0]))[:3]:
        if process == NCCL_READER:
            parts.append(f"NCCL (logged by {reads} rank{'s' if reads != 1 else ''})")
        else:
            parts.append(f"{process} ({reads} read{'s' if reads != 1 else ''})")
    more = len(readers) - len(parts)
    return ", ".join(parts) + (f" and {more} more" if more > 0 else "")


class LoadedCode(NamedTuple):
    """Who, among the code the measured processes loaded, can read a variable (observed.apply_reads)."""
    readers: str  # who can read it, as text ("" when none)
    in_library: bool  # one of them is an object a measured process mapped (not only a start-up hook's text)
    gaps: List[str]  # why finding none would prove nothing
    searched: str  # what was searched


def _loaded_code(comp: Comparison, name: str, d_good: Any, d_bad: Any) -> Optional[LoadedCode]:
    """Who can read it, from the code the measured processes loaded, over both sides
    (compare/libraries.who_can_read); None when neither side recorded the libraries its processes mapped."""
    found: Dict[str, List[str]] = {}
    libraries: List[str] = []  # the labels of found that are mapped objects (the rest: start-up hooks' text)
    gaps: List[str] = []
    searched: List[str] = []
    sides = 0
    for side, view, value in (("GOOD", comp.good, d_good), ("BAD", comp.bad, d_bad)):
        if value is None:
            continue  # unset on this side: nothing there could read it, whatever was loaded
        if not section_data(view.source, libraries_mod.SECTION):
            gaps.append(f"{side}: no maps of the measured processes")
            continue
        sides += 1
        evidence = libraries_mod.who_can_read(view.source, name)
        gaps.extend(f"{side}: {gap}" for gap in evidence.gaps)
        for reader in evidence.readers:
            label = reader.name if reader.kind == "library" else f"the start-up hook {reader.path}"
            owner = f" ({reader.owner})" if reader.owner and reader.owner != "unknown" else ""
            who = [keys.run_process_name(p) or p for p in reader.processes]
            entry = found.setdefault(label + owner, [])
            entry.extend(w for w in who if w not in entry)
            if reader.kind == "library" and label + owner not in libraries:
                libraries.append(label + owner)
        data = section_data(view.source, libraries_mod.SECTION)
        searched.append(f"{side}: {len(data.get('objects') or {})} libraries")
    if sides == 0:
        return None
    parts = [f"{label}{' mapped by ' + ', '.join(sorted(who)[:3]) if who else ''}"
             for label, who in sorted(found.items())[:3]]
    more = len(found) - len(parts)
    text = "; ".join(parts) + (f" and {more} more" if more > 0 else "")
    return LoadedCode(text, bool(libraries), gaps,
                      "; ".join(searched) + " scanned, start-up hooks read, Python reads tracked")


def _uncovered(comp: Comparison) -> Dict[str, float]:
    """{tracked process: when its reads stop being known} of the records, on either side, whose reads are
    not known through the end of that side's runs."""
    out: Dict[str, float] = {}
    for view in (comp.good, comp.bad):
        if view.runs_ended is None:
            continue
        for key, until in view.env_read_until.items():
            if until is not None and until < view.runs_ended:
                out[key] = min(until, out.get(key, until))
    return out


def apply_reads(d: Difference, comp: Comparison, score: Score, notes: List[str], nccl_counted: bool = False) -> None:
    """The read factor of a variable's difference (see the module doc). `nccl_counted`: NCCL's log of this
    variable already moved this cause (the key is NCCL's log, or the log confirms it): not counted twice."""
    name = d.variable
    if name is None:
        return
    readers = _readers(comp, name)
    if nccl_counted:
        readers.pop(NCCL_READER, None)
    if readers:
        score.apply("read_by_process", f"read by {_readers_text(readers)}")
        return
    code = _loaded_code(comp, name, d.good, d.bad)
    if code is not None and code.readers:
        # A string in an object a measured process mapped is an observation of that process's code; a start-up
        # hook's text that names it is text (the hook's own changes are judged as the hook: kinds/startup_hook.py).
        score.apply("readable_by_loaded_code" if code.in_library else "named_by_startup_hook",
                    f"readable by {code.readers}: its name is a string there")
        return
    tracked = sorted({k for view in (comp.good, comp.bad) for k in view.env_read_tracked if k != NCCL_READER})
    if code is not None and not code.gaps and not _uncovered(comp):
        score.apply("not_in_loaded_code", f"no code the measured processes loaded mentions it ({code.searched}); "
                                          "a name built at run time would escape this")
        return
    if code is not None and code.gaps:
        notes.append(f"no loaded code was seen to mention it, but that proves nothing here: {code.gaps[0]}")
    if not tracked:
        return
    native = knowledge.native_reader(name)
    if native is not None:
        notes.append(f"no measured process's Python code read it, but {native} reads it with getenv, unseen "
                     "by the probe: it keeps its weight")
        return
    uncovered = _uncovered(comp)
    if uncovered:
        # Records that end before the runs did cannot say the variable was not read during them.
        shown = ", ".join(sorted({keys.record_process(k) for k in uncovered})[:3])
        more = len({keys.record_process(k) for k in uncovered}) - min(3, len({keys.record_process(k) for k in uncovered}))
        when = fmt.clock(min(t for t in uncovered.values()))
        notes.append(f"no measured process's Python code read it up to their last records, but reads are not known "
                     f"after {when} for {shown}{f' and {more} more' if more > 0 else ''}, whose records end before "
                     "the runs did (a probe without a journal): not counted as not read")
        return
    processes = {keys.record_process(k) for k in tracked}
    through = " (their reads are known through the runs)" if any(
        view.runs_ended is not None for view in (comp.good, comp.bad)) else ""
    score.apply("not_read", f"not read: read tracking was on in {len(processes)} measured "
                            f"process{'es' if len(processes) != 1 else ''} and none read it{through}; no C library "
                            "is known to read it")


# ---------------------------------------------------------------- the mechanism

def _number(value: Any) -> Optional[float]:
    """A setting's size: a number, or how many CPUs a CPU list names (affinity, cpuset)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(str(value))
    except (TypeError, ValueError):
        return cpu_count(value)


def _direction(good: Any, bad: Any) -> Optional[int]:
    g, b = _number(good), _number(bad)
    if g is None or b is None or g == b:
        return None
    return 1 if b > g else -1


def apply_mechanism(d: Difference, component: str, mechanism: Optional[Mapping[str, Any]], score: Score,
                    notes: List[str]) -> None:
    """The mechanism's factors for one difference (see the module doc). `mechanism`: the verdict's
    (model/result_types.Mechanism), read as a mapping: a test may hand in only the fields it sets."""
    if not mechanism:
        return
    factors = mechanism.get("factors") or {}
    link = knowledge.series_link(d.base_key)
    if link is not None and link.series in factors:
        series = factors[link.series]
        word = SERIES_WORDS.get(link.series, link.series)
        shown = f"{fmt.num(series['good'])} \u2192 {fmt.num(series['bad'])}"
        if not series.get("beyond_noise"):
            score.apply("series_held", f"the runs' {word} held ({shown}): {link.why}, and it did not act here")
            return
        moved = -1 if series["bad"] < series["good"] else 1
        setting = _direction(setting_value(d.subject, d.good), setting_value(d.subject, d.bad))
        short = _moved_short(link.series, series, factors, d) if setting == moved else None
        if short:
            score.apply("series_moved_short", f"the runs' {word} moved with it, but {short}")
        elif setting is None or setting == moved:
            score.apply("series_moved", f"the runs' {word} moved with it ({shown}): {link.why}")
        else:
            notes.append(f"the runs' {word} moved ({shown}), the other way than this setting")
    if isinstance(mechanism.get("trace"), dict) and component != knowledge.NONE:
        _apply_trace(component, mechanism["trace"], score)
    kind = mechanism.get("kind")
    if not kind or kind == "unknown" or component == knowledge.NONE:
        return
    components = mechanism.get("components") or {}
    line = mechanism.get("line", kind)
    if component in (components.get("matches") or []):
        score.apply("mechanism_matches", f"fits the mechanism ({component}): {line}")
    elif component in (components.get("contradicts") or []):
        score.apply("mechanism_contradicts", f"contradicts the mechanism ({component}): {line}")


def _moved_short(series_name: str, series: Dict[str, Any], factors: Dict[str, Any], d: Difference) -> Optional[str]:
    """Why a thread count moved by much less than this setting would have moved it, or None. A pool sized by the
    setting adds or removes that many threads (up to the CPUs the runs had: OpenBLAS caps its pool there); a peak
    that moved by less than SERIES_SHORT_SHARE of it was moved by something else."""
    if series_name != knowledge.PEAK_THREADS:
        return None
    good, bad = _number(setting_value(d.subject, d.good)), _number(setting_value(d.subject, d.bad))
    if good is None or bad is None:
        return None
    cpus = factors.get(knowledge.CPU_SET)
    cap = max(cpus["good"], cpus["bad"]) if isinstance(cpus, dict) else None
    expected = abs(min(bad, cap) - min(good, cap)) if cap else abs(bad - good)
    observed = abs(series["bad"] - series["good"])
    if expected <= 0 or observed >= SERIES_SHORT_SHARE * expected:
        return None
    capped = f" with the {fmt.num(cap)} CPUs the runs had" if cap else ""
    return (f"by {fmt.num(observed)} ({fmt.num(series['good'])} \u2192 {fmt.num(series['bad'])}) where this "
            f"setting would move it by {fmt.num(expected)}{capped}: something else moved it")


def _apply_trace(component: str, trace: Dict[str, Any], score: Score) -> None:
    """The profiler traces' factor (runs/trace_diff.py) of a cause acting on `component`: up when the traces
    implicate it, down when they measured it and it held while another component grew."""
    line = trace.get("line", "")
    if component in (trace.get("implicates") or []):
        score.apply("trace_implicates", f"the profiler traces implicate its component ({component}): {line}")
    elif component in (trace.get("held") or []):
        score.apply("trace_held", f"the profiler traces measured its component ({component}) and it held: {line}")


# ---------------------------------------------------------------- neighbours

def apply_neighbour(d: Difference, mechanism: Optional[Mapping[str, Any]], score: Score, notes: List[str]) -> None:
    """What a neighbour (another process, or other virtual machines) was seen doing: measured during the
    runs or only at capture, and whether the runs lost any CPU to anyone (compare/neighbours.py)."""
    good = d.good if isinstance(d.good, dict) else None
    bad = d.bad if isinstance(d.bad, dict) else None
    row = {"kind": d.subject.aspect, "gpu": d.subject.item, "command": d.subject.entity, "good": good, "bad": bad}
    side = bad or good or {}
    source = str(side.get("source") or "runs")
    if not neighbours.more_on_bad(row):
        notes.append("it took less from BAD than from GOOD: it cannot have slowed BAD down")
        return
    bad_text = neighbours.describe(row, "bad", source)
    good_text = neighbours.describe(row, "good", source) or "not seen"
    if source != "runs":
        score.apply("neighbour_at_capture", f"seen at capture: BAD {bad_text}; GOOD {good_text}")
        return
    runs = f"{side.get('count')} run{'s' if side.get('count') != 1 else ''}"
    score.apply("neighbour_measured", f"measured beside the benchmark in BAD's {runs}: {bad_text}; GOOD's: {good_text}")
    factors = (mechanism or {}).get("factors") or {}
    if d.subject.aspect in ("cpu", "steal") and d.base_key not in ((mechanism or {}).get("neighbours") or []):
        machine = (bad or {}).get("machine")
        if d.subject.aspect == "cpu" and not neighbours.shares_cpus(row):
            score.apply("neighbour_no_effect", "it ran only on CPUs the work may not use (the work's CPU set is "
                                               "smaller than the machine): it took none of the work's")
            return
        if d.subject.aspect == "cpu" and isinstance(machine, dict) and machine.get("host_busy_cpus") is not None \
                and not neighbours.machine_full(machine, (bad or {}).get("cpus_online")):
            if machine.get("cpu_set_size") is not None:
                spare = (f"the {fmt.num(machine['cpu_set_size'])} CPUs the work may use had time to spare on BAD (kept "
                         f"{fmt.num(machine.get('cpu_set_busy_cpus'))} busy)")
            else:
                spare = (f"BAD's machine had CPUs to spare (it kept {fmt.num(machine['host_busy_cpus'])} of "
                         f"{fmt.num((bad or {}).get('cpus_online'))} busy, {fmt.num(machine.get('runnable'))} runnable "
                         "threads)")
            score.apply("neighbour_no_effect", f"{spare}: it took none the work waited for")
            return
        held = _held_tight(factors, neighbours.share_taken(d.subject.aspect, good, bad))
        if held:
            score.apply("neighbour_no_effect", f"the runs' {held} held, tight enough to show the share it took: "
                                               "it took nothing the work needed")
        elif (mechanism or {}).get("kind") not in (None, "unknown", "contention") and "wall_s" in factors \
                and not lost_cpu(factors):
            # The mechanism found the time in the run's own work or waits, and the runs lost no CPU either.
            score.apply("neighbour_no_effect", "the runs lost no CPU on BAD (CPUs kept busy, preemptions per CPU "
                                               "second and wall beyond their CPU time all within their spread): it "
                                               "took none of the work's")


def _held_tight(factors: Dict[str, Any], share: Optional[float]) -> str:
    """The run counters a CPU neighbour acts through ("CPUs kept busy and wall"), when they all held and
    their runs' own spread is below the share it took (a CPU-bound run loses up to that share of its CPU
    time: a spread that large would have shown it); "" when any moved, was noisier, or is missing."""
    names = {"busy_cpus": "CPUs kept busy", "wall_s": "wall"}
    found = [factors.get(name) for name in names]
    if not share or any(not isinstance(f, dict) for f in found):
        return ""
    for f in found:
        assert isinstance(f, dict)
        noise = f.get("noise_pct")
        change = abs(f.get("change_pct") or 0.0)
        if f.get("beyond_noise") or not isinstance(noise, (int, float)) or max(noise, change) >= neighbours.percent(share):
            return ""
    return " and ".join(names.values())
