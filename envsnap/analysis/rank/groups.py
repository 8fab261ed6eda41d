"""Causes the snapshots cannot tell apart, and how to tell them apart: `envsnap bisect`.

Causes with equal evidence share a rank (causes.py). Each such group is reported once, with the bisect
command that separates them by measurement and its estimated cost: bisect re-runs the benchmark with
subsets of the differing variables and files switched to BAD (Zeller's ddmin); one cause among n
deltas takes 2*ceil(log2(n)) + 2 configurations at worst (the GOOD and BAD baselines included), each run
--repeat times (3 by default): bisect's own ddmin gives the same count (a test runs both). The command is
the one the snapshots' runs measured (run_session), when known.
"""
from __future__ import annotations

import math
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

from envsnap.analysis.compare import flags as flag_keys
from envsnap.format import plural
from envsnap.model.argv import itemise
from envsnap.model.result_types import BisectHint, Group, RankedCause

BISECT_REPEAT = 3  # `envsnap bisect --repeat` default (cli/bisect.py)
MAX_LISTED = 4  # changed arguments named in the different-commands warning
# What bisect can switch per run: environment variables and files (bisect: deltas, files).
SWITCHABLE_FILES = ("integrity", "startup", "files")


def switchable(cause: Mapping[str, Any]) -> bool:
    """Can `envsnap bisect` re-create this difference per run (a variable, or a file)?"""
    if cause.get("variable"):
        return True
    if cause.get("where") in SWITCHABLE_FILES:
        return True
    return cause.get("where") == "git" and cause.get("aspect") in ("dirty", "untracked")


def configurations_for_one_cause(n: int) -> int:
    """At worst, how many configurations bisect's ddmin runs to isolate one cause among n deltas, the two
    baselines included (analysis cannot import bisect, the layer above it: the closed form of that count)."""
    if n <= 0:
        return 0
    return 2 if n == 1 else 2 * math.ceil(math.log2(n)) + 2


def _delta_count(causes: Sequence[Mapping[str, Any]]) -> int:
    """About how many deltas bisect would search: the differing variables and files among the causes (an
    estimate from the comparison: bisect itself resolves each against this machine)."""
    changes = {_change_of(c) for c in causes if switchable(c)}
    return len(changes)


def run_command(snap: Mapping[str, Any]) -> Optional[str]:
    """The benchmark command a snapshot's runs measured (`envsnap run`), as one shell line."""
    session = snap.get("run_session")
    command = session.get("command") if isinstance(session, dict) else None
    if isinstance(command, list) and command and all(isinstance(a, str) for a in command):
        return shlex.join(command)
    return None


def commands_differ(good: Mapping[str, Any], bad: Mapping[str, Any]) -> Optional[str]:
    """A warning when GOOD's and BAD's runs measured different commands. Other arguments of one program are
    causes of their own (run.flag.X, run.arg.N: analysis/compare/flags.py), ranked with the rest, which bisect
    cannot switch; another program is another benchmark, whose metric may not compare."""
    g, b = run_command(good), run_command(bad)
    if not (g and b and g != b):
        return None
    hint = flag_keys.hints(good, bad)
    good_argv, bad_argv = flag_keys.run_argv(good), flag_keys.run_argv(bad)
    good_line = itemise(good_argv, hint) if good_argv else None
    bad_line = itemise(bad_argv, hint) if bad_argv else None
    changed = flag_keys.changed_items(good_line, bad_line)
    if good_line is not None and bad_line is not None and good_line.program == bad_line.program and changed:
        shown = ", ".join(changed[:MAX_LISTED]) + (f" and {len(changed) - MAX_LISTED} more"
                                                   if len(changed) > MAX_LISTED else "")
        return (f"GOOD and BAD ran the benchmark command {good_line.program!r} with different arguments ({shown}): "
                "each is ranked among the causes (run.flag.*, run.arg.*); bisect runs one command and cannot "
                "switch them")
    return (f"GOOD and BAD ran different benchmark programs ({g!r} vs {b!r}): their metrics may not measure the "
            "same thing, and bisect cannot switch the program")


def bisect_hint(good: Mapping[str, Any], bad: Mapping[str, Any], good_file: Optional[str],
                bad_file: Optional[str], causes: Sequence[Mapping[str, Any]]) -> BisectHint:
    """The bisect command for these two snapshots and its estimated cost."""
    deltas = _delta_count(causes)
    configurations = configurations_for_one_cause(deltas)
    command = run_command(bad) or run_command(good)
    files = " ".join(shlex.quote(f) if f and f != "-" else placeholder
                     for f, placeholder in ((good_file, "GOOD.json"), (bad_file, "BAD.json")))
    return {"command": f"envsnap bisect {files} -- {command or 'BENCHMARK-COMMAND'}",
            "command_known": command is not None, "deltas": deltas, "configurations": configurations,
            "repeat": BISECT_REPEAT, "runs": configurations * BISECT_REPEAT}


def tie_groups(causes: Sequence[RankedCause],
               hint: Union[None, BisectHint, Callable[[], BisectHint]]) -> List[Group]:
    """Every group of two or more causes that share a rank, with the bisect command where it can help
    (`hint`: the bisect hint, or a function that makes it, called only when a group needs it)."""
    by_rank: Dict[int, List[RankedCause]] = {}
    for cause in causes:
        by_rank.setdefault(cause["rank"], []).append(cause)
    groups = []
    for rank in sorted(by_rank):
        members = by_rank[rank]
        if len(members) < 2:
            continue
        can = [m["key"] for m in members if switchable(m)]
        changes = {_change_of(m) for m in members}
        group: Group = {"rank": rank, "size": len(members), "score": members[0]["score"],
                        "keys": [m["key"] for m in members],
                        "line": f"these {len(members)} cannot be told apart from the snapshots "
                                "(the evidence scores them equally)"}
        if len(changes) == 1:
            group["line"] = (f"these {len(members)} are one change ({next(iter(changes))}) seen in "
                             f"{len(members)} places, scored equally")
        elif can and hint:
            if callable(hint):
                hint = hint()
            if hint["deltas"]:
                group["bisect"] = {**hint, "switchable": can}
                group["bisect_line"] = bisect_line(hint, len(can), len(members))
        groups.append(group)
    return groups


def _change_of(cause: Mapping[str, Any]) -> str:
    """What one change is, whichever key shows it: the variable, the file, else the key itself."""
    if cause.get("variable"):
        return str(cause["variable"])
    if cause.get("where") == "git" and cause.get("item"):
        return f"{cause.get('entity')}/{cause['item']}"
    return str(cause.get("key"))


def bisect_line(hint: Mapping[str, Any], switchable_count: int, size: int) -> str:
    text = (f"to tell them apart: {hint['command']}  (about {plural(hint['runs'], 'run')}: "
            f"{plural(hint['configurations'], 'configuration')} x {hint['repeat']} over {hint['deltas']} variables and files)")
    if switchable_count < size:
        text += f"; {size - switchable_count} of them (host, packages, GPU facts) cannot be switched by bisect"
    if not hint.get("command_known"):
        text += "; put the benchmark command after --"
    return text
