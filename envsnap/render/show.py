"""Text rendering of one snapshot for `envsnap show` (pure: returns strings).

Each section's summary lines come from its collector (`summarize(data)` beside the collector);
the CLI passes them in, so rendering never imports a collector. A merged multi-node snapshot is
shown node by node."""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Sequence, Set, Tuple, cast

from envsnap import format as fmt
from envsnap.format import plural
from envsnap.model.snapshot import as_dict
from envsnap.model.types import Run, Section, Snapshot

_MARK = {"ok": "ok", "unavailable": "--", "error": "!!", "timeout": "!!"}


def render_show(snap: Snapshot, verbose: bool = False,
                summarize: Callable[[str, Dict[str, Any]], List[str]] = lambda name, data: [],
                order: Sequence[str] = ()) -> str:
    """A snapshot's header, each section's status and summary, its runs; a merged multi-node
    snapshot (`envsnap merge`) shows each node's sections under its host name."""
    lines = []
    label = snap.get("label") or "(no label)"
    nodes = snap.get("nodes") if isinstance(snap.get("nodes"), dict) else {}
    where = (f"cluster of {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({', '.join(nodes)})" if nodes
             else f"host {snap.get('host', '?')}")
    lines.append(f"snapshot {label}  {where}  created {snap.get('created', '?')}")
    lines.append(f"envsnap {snap.get('envsnap_version', '?')}  schema {snap.get('schema_version')}  "
                 f"redaction {snap.get('redaction', '?')}")
    if snap.get("provenance"):
        lines.append(f"provenance: {snap['provenance'].get('note', snap['provenance'])}")
    runs = snap.get("runs") or []
    if not nodes:
        lines.append("")
        body, tally = _sections(snap.get("sections", {}), verbose, summarize, order, "  ")
        lines.extend(body)
        lines.extend(_runs(runs))
        lines.extend(_run_command(snap))
        lines.append("")
        lines.append(tally)
        return fmt.text_lines(lines)
    for host, node in nodes.items():
        node = as_dict(node)
        facts = [f"{word} {node[k]}" for k, word in (("label", "label"), ("created", "captured"),
                                                    ("envsnap_version", "envsnap")) if node.get(k)]
        if node.get("file"):
            facts.append(f"merged from {node['file']}")
        lines.append("")
        lines.append(f"node {host}" + (f"  ({', '.join(facts)})" if facts else ""))
        body, tally = _sections(node.get("sections") or {}, verbose, summarize, order, "    ")
        lines.extend(body)
        lines.append(f"  {tally}")
    lines.extend(_runs(runs, by_host=True))
    return fmt.text_lines(lines)


def _sections(raw_sections: Mapping[str, Section], verbose: bool, summarize: Callable[[str, Dict[str, Any]], List[str]],
              order: Sequence[str], indent: str) -> Tuple[List[str], str]:
    """Each section's status line (and its summary with verbose), and the tally line."""
    lines = []
    order_of = {name: i for i, name in enumerate(order)}
    sections = {n: raw_sections[n] for n in sorted(raw_sections, key=lambda n: (order_of.get(n, len(order_of)), n))}
    width = max([len(n) for n in sections] + [8])
    problems = []
    for name, section in sections.items():
        status = section.get("status", "?")
        elapsed = section.get("elapsed_s")
        timing = f"{elapsed:6.2f}s" if isinstance(elapsed, (int, float)) else "       "
        detail = section.get("reason") or section.get("error") or ""
        summary = summarize(name, section.get("data") or {}) if status == "ok" or section.get("data") else []
        head = summary[0] if summary else ""
        lines.append(f"{indent}{_MARK.get(status, '??')} {name:<{width}} {timing}  {detail or head}")
        if verbose:
            # The head line is shown above unless the reason took its place (and then only if it says more).
            skip = 1 if not detail or summary[:1] == [detail] else 0
            for extra in summary[skip:]:
                lines.append(f"{indent}   {'':<{width}}          {extra}")
        if status in ("error", "timeout"):
            problems.append(f"{name}: {detail}")
    ok_count = sum(1 for s in sections.values() if s.get("status") == "ok")
    unavailable_count = sum(1 for s in sections.values() if s.get("status") == "unavailable")
    tally = (f"{ok_count}/{len(sections)} sections captured, {unavailable_count} unavailable or not requested (--), "
             f"{len(problems)} failed (!!)" + (f": {'; '.join(problems)}" if problems else ""))
    return lines, tally


def _runs(runs: List[Run], by_host: bool = False) -> List[str]:
    if not runs:
        return []
    from envsnap.analysis.runs import stats  # here: a snapshot without runs is shown without it

    good = [r for r in runs if r.get("ok", True)]
    head = f"runs: {len(runs)} ({len(runs) - len(good)} failed)"
    if by_host:
        hosts: Dict[str, int] = {}
        for run in runs:
            hosts[str(run.get("host", "?"))] = hosts.get(str(run.get("host", "?")), 0) + 1
        head += " from " + ", ".join(f"{host} {count}" for host, count in sorted(hosts.items()))
    lines = ["", head]
    names = sorted({m for r in good for m in (r.get("metrics") or {})})
    for metric in names:
        values = sorted(r["metrics"][metric] for r in good if metric in (r.get("metrics") or {}))
        if values:
            line = (f"  {metric:<28} median {stats.median(values):.4g}  (n={len(values)}, min {values[0]:.4g}, "
                    f"max {values[-1]:.4g})")
            # measure/parsers.py's caveat: a benchmark printed the server's lifetime figure under this name
            if any(f"{metric} is the server's running average" in str(r.get("note") or "") for r in good):
                line += "  (the server's running average since it started, not each run's own)"
            lines.append(line)
    lines.extend(_neighbours(good))
    return lines


def _neighbours(runs: List[Run]) -> List[str]:
    """Who else used the machine during the runs (each run's telemetry "neighbours"): the machine's figures
    per run, and the busiest other processes with the most CPUs each used in a run."""
    found = [r["telemetry"]["neighbours"] for r in runs if isinstance(r.get("telemetry"), dict)
             and isinstance(r["telemetry"].get("neighbours"), dict)]
    if not found:
        return []

    def span(name: str, unit: str = "") -> str:
        values = sorted(v for v in (f.get(name) for f in found) if isinstance(v, (int, float)))
        return f"{values[0]:.2g}-{values[-1]:.2g}{unit}" if values else "?"

    runnable = sorted(r["median"] for r in (f.get("runnable") for f in found)
                      if isinstance(r, dict) and isinstance(r.get("median"), (int, float)))
    lines = [f"  neighbours over {plural(len(found), 'run')}: other processes kept {span('others_cpus')} CPUs busy, runnable "
             f"threads {f'{runnable[0]:g}-{runnable[-1]:g}' if runnable else '?'}, steal {span('steal_pct', '%')}"]
    busiest: Dict[str, Tuple[float, Set[Any]]] = {}
    for record in found:
        for entry in record.get("top") or []:
            if isinstance(entry, dict) and isinstance(entry.get("cpus"), (int, float)):
                most, pids = busiest.get(str(entry.get("command")), (0.0, set()))
                busiest[str(entry.get("command"))] = (max(most, float(entry["cpus"])), pids | {entry.get("pid")})
    for command, (most, pids) in sorted(busiest.items(), key=lambda kv: -kv[1][0])[:3]:
        shown = ", ".join(str(pid) for pid in sorted(p for p in pids if p is not None)[:3])
        lines.append(f"    up to {most:.2g} CPUs in a run: {command[:120]} (pid {shown})")
    for record in found[:1]:
        for index, gpu in sorted((record.get("gpus") or {}).items()):
            for proc in (gpu or {}).get("processes") or []:
                if isinstance(proc, dict) and proc.get("own") is False:
                    lines.append(f"    GPU {index}: pid {proc.get('pid')} {proc.get('command') or proc.get('why') or ''}")
    return lines


def _run_command(snap: Snapshot) -> List[str]:
    """The benchmark command `envsnap run` ran, and its flags one by one."""
    from envsnap.analysis.runs.session import interrupted_series
    from envsnap.model.argv import describe, itemise

    session = snap.get("run_session")
    command = session.get("command") if isinstance(session, dict) else None
    interrupted = interrupted_series(cast(Dict[str, Any], snap))
    warning = [f"  ! {interrupted}"] if interrupted else []
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        return warning
    line = itemise(command)
    return warning + [f"  command: {' '.join(command)}"] + (describe(line) if line is not None else [])


def summary_line(snap: Snapshot, path: str) -> str:
    sections = snap.get("sections", {})
    counts: Dict[str, int] = {}
    for section in sections.values():
        counts[section.get("status", "?")] = counts.get(section.get("status", "?"), 0) + 1
    parts = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    return fmt.printable(f"wrote {path}: {len(sections)} sections ({parts})")
