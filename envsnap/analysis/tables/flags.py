"""Command lines side by side: each measured process's flags, positionals and program, and the benchmark command's,
GOOD against BAD (analysis/compare/flags.py itemises them, the same items diff compares). One group per process
present on either side with flags or arguments (a merged multi-node snapshot's prefixed "node/"), then the benchmark
command; each row an item, with both sides' values and whether they differ."""
from __future__ import annotations

from typing import Any, Dict, List, Optional

from envsnap.analysis.compare import flags
from envsnap.analysis.compare.nodes import Pairing
from envsnap.format import natural_key
from envsnap.model.argv import CommandLine, itemise
from envsnap.model.result_types import CommandGroup, CommandItem, CommandLinesTable

BENCHMARK = "the benchmark command"


def _group(key: str, where: str, good: Optional[CommandLine], bad: Optional[CommandLine]) -> CommandGroup:
    rows: List[CommandItem] = []
    for kind, name in flags.items(good, bad):
        g, b = flags.item_text(good, kind, name), flags.item_text(bad, kind, name)
        label = {flags.PROGRAM: "program", flags.ARG: f"argument {name}"}.get(kind, name)
        rows.append({"item": label, "kind": kind, "good": g, "bad": b,
                     "differs": good is not None and bad is not None and g != b})
    return {"key": key, "where": where, "good_seen": good is not None, "bad_seen": bad is not None, "rows": rows,
            "differing": sum(1 for r in rows if r["differs"])}


def command_lines_table(good: Dict[str, Any], bad: Dict[str, Any], pairing: Pairing) -> CommandLinesTable:
    """{"groups": [one per process, then the benchmark command], "differing": rows that differ}."""
    groups: List[CommandGroup] = []
    for pair in pairing.pairs:
        hint = flags.hints(*(s for s in (pair.good, pair.bad) if s is not None))
        prefix = "" if pair.name is None else f"{pair.name}/"
        lines = {side: flags.process_lines(snap, hint) if snap is not None else {}
                 for side, snap in (("good", pair.good), ("bad", pair.bad))}
        for key in sorted(set(lines["good"]) | set(lines["bad"]), key=natural_key):
            group = _group(prefix + key, flags.PROCESS, lines["good"].get(key), lines["bad"].get(key))
            if len(group["rows"]) > 1 or group["differing"]:  # a bare title (sglang::scheduler_TP0) says nothing here
                groups.append(group)
    hint = flags.hints(good, bad)
    runs = [itemise(argv, hint) if argv else None for argv in (flags.run_argv(good), flags.run_argv(bad))]
    if runs[0] is not None or runs[1] is not None:
        groups.append(_group(BENCHMARK, flags.COMMAND, runs[0], runs[1]))
    return {"groups": groups, "differing": sum(g["differing"] for g in groups)}
