"""The warnings of a comparison: what makes two snapshots less comparable than they look (a section captured on
one side only, unreadable workers, a variable a parent has that the workers never saw, environments read from
/proc only, other hosts), worded for people; the shell's variables the workers lack also as data (ShellTrap),
whose advice result.py completes once the patches are known."""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from envsnap.analysis import knowledge
from envsnap.analysis.compare import nodes as nodes_mod
from envsnap.analysis.compare.view_model import View
from envsnap.model import keys


class ShellTrap(NamedTuple):
    """A variable the capturing shell has with a value the workers do not run with (workers.parent_only.NAME,
    the shell's kind): a measurement warning, whose advice depends on what set the workers' value."""
    name: str
    value: str  # the shell's
    where: str  # "good", "bad" or "both snapshots"
    seen: str  # the workers' value ("unset", "mixed")
    side: str  # the side whose workers are described ("bad" when both)

    def warning(self, setter: str = "") -> str:
        """The warning line; `setter`: what sets the workers' value in-process (an edited file's patch and its
        line), which an export in the shell cannot override: the place to change it."""
        head = f"{self.name}={self.value} is set in the shell that captured {self.where}, but the workers see {self.seen}"
        if setter:
            return f"{head}: {setter} sets it in-process, over any export: change it there, not in the shell"
        return f"{head}: setting it in that shell does not reach the running server"


def comparison_warnings(good: Dict[str, Any], bad: Dict[str, Any], va: View, vb: View, compare_hosts: bool = True,
                        traps: Optional[List[ShellTrap]] = None) -> List[str]:
    """What a comparison of two snapshots (or of one node's pair) must warn about: a section usable on one side
    only, workers whose environment could not be read, variables a parent has and the workers never saw (the
    shell's are `traps` too, as data), environments read from /proc only, two different hosts."""
    out: List[str] = []
    ga, ba = good.get("sections") or {}, bad.get("sections") or {}
    for name in sorted(set(ga) | set(ba)):
        sa, sb = ga.get(name) or {}, ba.get(name) or {}
        if (sa.get("status") == "ok") == (sb.get("status") == "ok"):
            continue
        side, section = ("bad", sb) if sa.get("status") == "ok" else ("good", sa)
        status = section.get("status") or "absent"
        detail = section.get("reason") or section.get("error")
        out.append(f"{name} {status} in {side}{f' ({detail})' if detail else ''}: "
                   f"can't compare {knowledge.section_compares(name)}")
    for side, view in (("good", va), ("bad", vb)):
        if view.unreadable_workers:
            out.append(f"{side}: environment of {len(view.unreadable_workers)} worker(s) unreadable "
                       f"({', '.join(view.unreadable_workers[:4])}): capture as their user or with the probe")
    # Parent-only variables: a cause candidate and a measurement warning. The server's own parent
    # first: it is the headline ("the parent shows it, the TP workers never saw it").
    server_warnings: List[str] = []
    for name in sorted({subject.entity for v in (va, vb) for k in v.values["workers"]
                        for subject in [v.subject_of(k)] if subject is not None and keys.is_parent_only(subject)}):
        key = keys.parent_only_key(name)
        sides = [s for s, v in (("good", va), ("bad", vb)) if key in v.values["workers"]]
        view = vb if "bad" in sides else va
        value = view.values["workers"][key]
        seen = "unset" if value["workers"] is None else value["workers"]
        where = "both snapshots" if len(sides) == 2 else sides[0]
        if value.get("in") == "server":
            info = view.parent_only_info.get(name) or {}
            when = ("set it after its TP workers started" if info.get("late")
                    else "has it, yet its TP workers were started without it")
            server_warnings.append(
                f"{name}={value['parent']}: the server's parent process ({info.get('process', '?')}) {when} "
                f"({where}); the TP workers see {seen}: measurements of that server ran without it")
            continue
        trap = ShellTrap(name, str(value["parent"]), where, str(seen), "bad" if "bad" in sides else "good")
        out.append(trap.warning())
        if traps is not None:
            traps.append(trap)
    out[:0] = server_warnings
    for name in va.partly_observed:
        side = "bad" if name in vb.command_seen else "good"
        out.append(partly_observed_warning(name, f"on {side.upper()} only"))
    unread = [side for side, view in (("good", va), ("bad", vb)) if view.environment_unread]
    if unread:
        read = "BAD" if unread == ["good"] else "GOOD"
        out.append(environment_unread_warning(f"on {read} only"))
    for side, view in (("good", va), ("bad", vb)):
        if (view.workers and view.worker_env_source == "proc"
                and not (view.workers_are_command and (view.partly_observed or unread))):
            out.append(f"{side}: workers' environments come from /proc/PID/environ (as at exec); changes made "
                       "in-process (engine.py, sitecustomize.py) are invisible without the probe (--probe-dir)")
    if compare_hosts and good.get("host") and bad.get("host") and good.get("host") != bad.get("host"):
        out.append(f"good and bad come from different hosts ({good.get('host')} vs {bad.get('host')})")
    return out


def partly_observed_warning(name: str, where: str) -> str:
    """The warning for a run command's process read on some sides only (views.drop_unobserved)."""
    return (f"the benchmark command's process {name} was read {where} (a process shorter than the sampling interval "
            "can end unread): its environment, command line and mapped objects are not compared")


def environment_unread_warning(where: str) -> str:
    """The warning for the benchmark command's environment read on some sides only (views.drop_unobserved)."""
    return (f"the benchmark command's environment was read {where} (a short process can end before its environment "
            "is read): the variables its processes saw are not compared; the shell's are")


def node_warnings(per_node: Sequence[Tuple[Optional[str], Sequence[str]]], everyone: List[str]) -> List[str]:
    """Each node's warnings (node, its warnings), named by node; one line for a warning every node compared has."""
    found: Dict[str, List[str]] = {}
    for node, warnings in per_node:
        for warning in warnings:
            found.setdefault(warning, []).append(str(node))
    out = []
    for warning, names in found.items():
        label = nodes_mod.label(names, everyone)
        where = ("every node" if label == nodes_mod.EVERY_NODE
                 else f"node{'s' if len(names) > 1 else ''} {label}")
        out.append(f"{where}: {warning}")
    return out
