"""Command lines as flags: each measured process's argv, and the benchmark command `envsnap run` ran, itemised
(model/argv.py) into one view key per item, so a changed flag is a difference of its own and not a whole
command line or process title that changed.

Keys (built here, and only here):

  workers.<process>.program        command.<name>.program        run.program
  workers.<process>.flag.<flag>    command.<name>.flag.<flag>    run.flag.<flag>
  workers.<process>.arg.<n>        command.<name>.arg.<n>        run.arg.<n>   (positionals, from 1)

with Subject(where="process", entity=<process key>, aspect="flag.<flag>", item=<flag>) for a process's and
Subject(where="command", entity="run", ...) for the benchmark command's. A process's argv is the probe's
(read from /proc/self/cmdline at its start, before any setproctitle) where it was probed, else the walk's
/proc/PID/cmdline; both were redacted at capture (envsnap/redact.py redact_argv), so are these items. A
multiprocessing child's argv (fd numbers of its parent's pipes) is itemised as nothing: its process title stays
its key. The `envsnap run` command's own root process, whose argv is the benchmark command itself, is shown
once, as `run.*`.

Flat keys name the itemised command line beside the list it came from ("processes.processes.K.command_line.
flag.--threads", "run_session.command_line.flag.--threads"): the whole cmdline/argv lists stay volatile (their
multiprocessing fd numbers), the items are not.
"""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Tuple

from envsnap.analysis.compare.view_model import View
from envsnap.model import keys
from envsnap.model.argv import CommandLine, Hints, itemise
from envsnap.model.keys import Subject
from envsnap.model.snapshot import as_dict, section_data

__all__ = ["CommandLine", "Hints", "bookkeeping_only", "changed_items", "command_lines", "from_probe", "hints",
           "item_text", "items", "process_line", "process_lines", "put_process", "put_run", "run_argv", "same_as_run"]

PROGRAM, FLAG, ARG = keys.PROGRAM, keys.FLAG, keys.ARG
RUN = "run"  # the benchmark command's entity, key prefix and category
PROCESS, COMMAND = "process", "command"  # Subject.where of a process's items, of the benchmark command's
ITEM_FIELD = "command_line"  # the flat keys' part that names an itemised command line


def _argv(value: Any) -> Optional[List[str]]:
    if isinstance(value, list) and value and all(isinstance(a, str) for a in value):
        return list(value)
    return None


def run_argv(snap: Mapping[str, Any]) -> Optional[List[str]]:
    """The benchmark command `envsnap run` ran (run_session.command, redacted at capture), or None."""
    return _argv(as_dict(snap.get("run_session")).get("command"))


def command_lines(snap: Mapping[str, Any]) -> List[List[str]]:
    """Every command line a snapshot holds: walked processes, probe records, the run command."""
    found: List[List[str]] = []
    for proc in as_dict(section_data(snap, "processes").get("processes")).values():
        argv = _argv(as_dict(proc).get("cmdline"))
        if argv:
            found.append(argv)
    probe = section_data(snap, "probe")
    for field in ("records", "command_records", "run_records"):
        for record in as_dict(probe.get(field)).values():
            argv = _argv(as_dict(record).get("argv"))
            if argv:
                found.append(argv)
    argv = run_argv(snap)
    if argv:
        found.append(argv)
    return found


def hints(*snaps: Mapping[str, Any]) -> Hints:
    """What the command lines of every snapshot compared say about their flags (model/argv.py Hints)."""
    return Hints(argv for snap in snaps for argv in command_lines(snap))


def process_line(proc: Mapping[str, Any], record: Mapping[str, Any], hint: Hints) -> Optional[CommandLine]:
    """One process's itemised command line: the probe's argv (at its start) over the walk's (now; a multiprocessing
    child retitled since, like SGLang's schedulers, shows its title there); None when neither says anything."""
    for argv in (_argv(record.get("argv")), _argv(proc.get("cmdline"))):
        line = itemise(argv, hint) if argv else None
        if line is not None:
            return line
    return None


def from_probe(record: Mapping[str, Any]) -> bool:
    """Does process_line take this process's command line from its probe record (else from the walk)?"""
    argv = _argv(record.get("argv"))
    return bool(argv) and itemise(argv or []) is not None


def bookkeeping_only(proc: Mapping[str, Any], record: Mapping[str, Any]) -> bool:
    """Is every command line known of this process a multiprocessing child's (its title then is that bookkeeping:
    the parent's pipe fds, different at every launch)?"""
    argvs = [a for a in (_argv(record.get("argv")), _argv(proc.get("cmdline"))) if a]
    return bool(argvs) and all(itemise(a) is None for a in argvs)


def process_lines(snap: Mapping[str, Any], hint: Hints) -> Dict[str, CommandLine]:
    """{process key (model/workers.py seen_processes): its itemised command line} of one snapshot (or node), the
    processes with none (multiprocessing children, nothing recorded) and the benchmark command's root left out."""
    from envsnap.model.workers import COMMAND as COMMAND_GROUP, command_records, seen_processes

    processes, probe = section_data(snap, "processes"), section_data(snap, "probe")
    procs = as_dict(processes.get("processes"))
    records, commands = as_dict(probe.get("records")), command_records(probe)
    argv = run_argv(snap)
    run = itemise(argv, hint) if argv else None
    out: Dict[str, CommandLine] = {}
    for key, process in seen_processes(processes, probe).items():
        if process.group == COMMAND_GROUP:
            record = as_dict(commands.get(keys.command_process_name(key) or ""))
        else:
            record = as_dict(records.get(process.probe_key)) if process.probe_key else {}
        line = process_line(as_dict(procs.get(process.walk_key)), record, hint)
        if line is not None and not (process.group == COMMAND_GROUP and same_as_run(line, run)):
            out[key] = line
    return out


def _put(view: "View", category: str, line: CommandLine, flat: str, subject: "Subject") -> None:
    view.put(category, line.program, (keys.flat_key(flat, ITEM_FIELD, PROGRAM),), subject._replace(aspect=PROGRAM))
    for name, value in line.flags.items():
        view.put(category, value, (keys.flat_key(flat, ITEM_FIELD, FLAG, name),),
                 subject._replace(aspect=keys.aspect(FLAG, name), item=name))
    for index, value in enumerate(line.positionals, 1):
        view.put(category, value, (keys.flat_key(flat, ITEM_FIELD, ARG, str(index)),),
                 subject._replace(aspect=keys.aspect(ARG, str(index)), item=str(index)))


def put_process(view: "View", subject: "Subject", line: Optional[CommandLine], flat: str) -> bool:
    """A process's items ("workers.<key>.flag.--x", "command.<name>.flag.--x"); False when it has none."""
    if line is None:
        return False
    _put(view, "workers", line, flat, subject)
    return True


def put_run(view: "View", snap: Mapping[str, Any], hint: Hints, subject: "Subject") -> Optional[CommandLine]:
    """The benchmark command's items (`run.*`, a presence key `run` standing for the whole command), and the
    itemised line (None without runs)."""
    argv = run_argv(snap)
    line = itemise(argv, hint) if argv else None
    if line is None:
        return None
    view.put(RUN, " ".join(argv or []), (keys.flat_key("run_session", "command"),), subject, presence=True)
    _put(view, RUN, line, "run_session", subject)
    return line


def same_as_run(line: Optional[CommandLine], run: Optional[CommandLine]) -> bool:
    """Is this command process the benchmark command itself (shown once, as run.*)?"""
    return line is not None and run is not None and line == run


NOT_GIVEN = "not given"


def item_text(line: Optional[CommandLine], kind: str, name: str) -> Optional[str]:
    """One item of a command line as text ("not given" where it lacks it; None without a command line)."""
    if line is None:
        return None
    if kind == PROGRAM:
        return line.program
    if kind == ARG:
        index = int(name) - 1
        return line.positionals[index] if 0 <= index < len(line.positionals) else NOT_GIVEN
    if name not in line.flags:
        return NOT_GIVEN
    value = line.flags[name]
    if value is True:
        return "given"
    if value is False:
        return "negated (--no-)"
    if isinstance(value, list):
        return " | ".join(str(v) for v in value)
    return str(value)


def items(good: Optional[CommandLine], bad: Optional[CommandLine]) -> List[Tuple[str, str]]:
    """(kind, name) of every item of either command line, in order: program, flags, positionals (from "1")."""
    out: List[Tuple[str, str]] = [(PROGRAM, "")]
    for line in (good, bad):
        if line is not None:
            out += [(FLAG, n) for n in line.flags if (FLAG, n) not in out]
    longest = max([len(line.positionals) for line in (good, bad) if line is not None] or [0])
    return out + [(ARG, str(i)) for i in range(1, longest + 1)]


def changed_items(good: Optional[CommandLine], bad: Optional[CommandLine]) -> List[str]:
    """The items that differ between two command lines, with both values ("--threads 2 \u2192 1")."""
    if good is None or bad is None:
        return []
    out = []
    for kind, name in items(good, bad):
        g, b = item_text(good, kind, name), item_text(bad, kind, name)
        if g != b:
            label = {PROGRAM: "program", ARG: f"argument {name}"}.get(kind, name)
            out.append(f"{label} {g} \u2192 {b}")
    return out
