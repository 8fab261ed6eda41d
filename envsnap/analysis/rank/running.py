"""Where the measured processes ran from: whether a checkout is code that runs.

A checkout's code runs when a measured process ran it: the checkout holds the process's main script, a module
it imported or the run command's program, or it is on the described interpreter's sys.path. A checkout that is
only a process's working directory is where it ran, never "not what runs", but that alone does not show its
code running: `python /elsewhere/bench.py` run from a checkout has the script's directory on sys.path, not the
checkout (Python docs, sys.path: "python script.py" prepends the script's directory; only -m and -c the
working directory). What each snapshot shows:

  probe records    (server and `envsnap run` command alike) each process's cwd, its main script and every
                   module it loaded from outside the standard library and site-packages (probe_modules.py),
                   and its command line;
  process walk     (`--pid`) each process's cwd and command line;
  run session      (`envsnap run`) the command's working directory (an older envsnap did not record it: the
                   capture's own working directory, where `run` starts its command) and command line;
  python section   the sys.path of the interpreter envsnap described (`--python`).

Without any of these nothing says what ran (`known` is False), and a checkout is neither called running nor
"not what runs". Paths are compared as recorded (redacted like every path of a snapshot).
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Sequence, Tuple

from envsnap.analysis.compare.nodes import is_cluster
from envsnap.model.merge import node_snapshots
from envsnap.model.snapshot import as_dict, section_data

# Places named per kind, in the order evidence lines name them: the strongest evidence first (the checkout's
# code was imported, or run as the program), then where the processes ran.
KINDS = ("module", "main script", "command", "cwd", "sys.path")
CODE_KINDS = ("module", "main script", "command", "sys.path")  # places that show the checkout's code running
RAN_KINDS = ("module", "main script", "command")  # the code the processes ran (sys.path is only where it may come from)
_SHOWN = 3  # places named in one evidence line before "and N more"
# What a kind of place that was recorded says about a checkout none of them is in ("not what runs" lines).
_CHECKED = {"main script": "their main scripts", "module": "the modules they loaded from outside site-packages",
            "command": "the run command's program", "sys.path": "the described interpreter's sys.path entries"}


class Place(NamedTuple):
    path: str
    kind: str  # a KINDS entry
    who: str  # the process (or "the run command", "the described interpreter")
    detail: str = ""  # the module's name, the script's


class Running(NamedTuple):
    """Every place the measured processes of both sides ran from, and whether any process was recorded."""
    places: Tuple[Place, ...] = ()
    known: bool = False
    cwds: Tuple[str, ...] = ()  # the measured processes' working directories, for "not what runs" lines

    def runs_from(self, top: str) -> List[Place]:
        """The places inside the directory `top` (a checkout's top level)."""
        return [p for p in self.places if _under(p.path, top)]

    def code_outside(self, top: str) -> List[Place]:
        """The code the measured processes ran (main scripts, modules, the run command's program) from outside
        the directory `top`."""
        return [p for p in self.places if p.kind in RAN_KINDS and not _under(p.path, top)]

    def elsewhere(self) -> Optional[str]:
        """What places the measured processes outside a checkout none of whose places are in it: where they ran
        and the kinds of place that were recorded (only those); None when nothing was recorded to place them."""
        checked = [_CHECKED[kind] for kind in KINDS if kind != "cwd" and any(p.kind == kind for p in self.places)]
        parts = []
        if self.cwds:
            more = f" and {len(self.cwds) - _SHOWN} more" if len(self.cwds) > _SHOWN else ""
            parts.append(f"the measured processes ran in {', '.join(self.cwds[:_SHOWN])}{more}")
        if checked:
            listed = checked[0] if len(checked) == 1 else f"{', '.join(checked[:-1])} or {checked[-1]}"
            parts.append(f"none of {listed} lies in it")
        return ", and ".join(parts) or None


def _under(path: str, top: str) -> bool:
    top = top.rstrip("/")
    return bool(top) and (path == top or path.startswith(top + "/"))


def _absolute(path: str, cwd: Optional[str]) -> str:
    if os.path.isabs(path) or not cwd:
        return os.path.normpath(path) if os.path.isabs(path) else path
    return os.path.normpath(os.path.join(cwd, path))


def script_of(argv: Sequence[Any], cwd: Optional[str]) -> Optional[str]:
    """The program file a command line runs: a Python interpreter's script argument (never `-m`/`-c`), or
    the program itself when it is a path (`./bench.sh`); None when neither shows."""
    args = [str(a) for a in argv if isinstance(a, str) and a]
    if not args:
        return None
    if not os.path.basename(args[0]).startswith("python"):
        return _absolute(args[0], cwd) if "/" in args[0] else None
    for arg in args[1:]:
        if arg in ("-m", "-c"):
            return None
        if arg.startswith("-"):
            continue  # an interpreter option (-u, -B, -X dev's value is rare enough to misread as harmless)
        return _absolute(arg, cwd)
    return None


def _process_places(who: str, entry: Mapping[str, Any], argv_field: str) -> Tuple[List[Place], Optional[str]]:
    cwd = entry.get("cwd") if isinstance(entry.get("cwd"), str) else None
    places: List[Place] = [Place(cwd, "cwd", who)] if cwd else []
    modules = as_dict(entry.get("modules"))
    main = modules.get("main")
    if isinstance(main, str) and main:
        places.append(Place(_absolute(main, cwd), "main script", who, os.path.basename(main)))
    else:
        argv = entry.get(argv_field)
        script = script_of(argv, cwd) if isinstance(argv, list) else None
        if script:
            places.append(Place(script, "main script", who, os.path.basename(script)))
    for name, path in sorted(as_dict(modules.get("elsewhere")).items()):
        if isinstance(path, str) and path and name not in ("__main__", "__mp_main__"):
            places.append(Place(_absolute(path, cwd), "module", who, str(name)))
    return places, cwd


def _snapshot_places(snap: Mapping[str, Any]) -> Tuple[List[Place], bool, List[str]]:
    places: List[Place] = []
    cwds: List[str] = []
    known = False
    probe = section_data(snap, "probe") or {}
    for group in ("records", "command_records", "run_records"):
        for key, record in sorted(as_dict(probe.get(group)).items()):
            if isinstance(record, dict):
                # The command's processes repeat per run ("1/python-0", "2/python-0"): one name for them all.
                who = str(key) if group == "records" else "the run command"
                found, cwd = _process_places(who, record, "argv")
                places.extend(found)
                cwds.extend([cwd] if cwd else [])
                known = True
    processes = as_dict((section_data(snap, "processes") or {}).get("processes"))
    for key, proc in sorted(processes.items()):
        if isinstance(proc, dict):
            found, cwd = _process_places(str(key), proc, "cmdline")
            places.extend(found)
            cwds.extend([cwd] if cwd else [])
            known = True
    session = snap.get("run_session")
    if isinstance(session, dict):
        known = True
        cwd = session.get("cwd") if isinstance(session.get("cwd"), str) else _capture_cwd(snap)
        if cwd:
            places.append(Place(cwd, "cwd", "the run command"))
            cwds.append(cwd)
        command = session.get("command")
        script = script_of(command, cwd) if isinstance(command, list) else None
        if script:
            places.append(Place(script, "command", "the run command", os.path.basename(script)))
    if known:  # the interpreter's sys.path matters for the processes it ran, when any was recorded
        for entry in as_dict(section_data(snap, "python")).get("sys_path") or []:
            if isinstance(entry, str) and entry:
                places.append(Place(entry, "sys.path", "the described interpreter"))
    return places, known, cwds


def _capture_cwd(snap: Mapping[str, Any]) -> Optional[str]:
    """The capture's working directory as the git section shows it (the checkout reached through "cwd"): an
    older `envsnap run` recorded no cwd of its command, which it started there."""
    repos = as_dict((section_data(snap, "git") or {}).get("repos"))
    found = sorted(path for path, repo in repos.items() if "cwd" in (as_dict(repo).get("roles") or []))
    return str(found[0]) if found else None


def running(good: Dict[str, Any], bad: Dict[str, Any]) -> Running:
    """Where the measured processes of both snapshots ran from (every node of a merged snapshot)."""
    places: List[Place] = []
    cwds: List[str] = []
    known = False
    for snap in (good, bad):
        for node in (node_snapshots(snap).values() if is_cluster(snap) else [snap]):
            found, seen, dirs = _snapshot_places(node)
            places.extend(found)
            cwds.extend(dirs)
            known = known or seen
    return Running(tuple(dict.fromkeys(places)), known, tuple(sorted(set(cwds))))


def describe(places: Sequence[Place]) -> str:
    """'rank0's and rank1's working directory; python-0's main script launch.py; module engine (rank0, rank1)'."""
    grouped: Dict[Tuple[str, str], List[str]] = {}
    for place in places:
        grouped.setdefault((place.kind, place.detail), [])
        if place.who not in grouped[(place.kind, place.detail)]:
            grouped[(place.kind, place.detail)].append(place.who)
    parts = []
    for (kind, detail), who in sorted(grouped.items(), key=lambda kv: (KINDS.index(kv[0][0]), kv[0][1])):
        names = ", ".join(who[:_SHOWN]) + (f" and {len(who) - _SHOWN} more" if len(who) > _SHOWN else "")
        if kind == "cwd":
            parts.append(f"the working directory of {names}")
        elif kind == "main script":
            parts.append(f"the main script {detail} of {names}")
        elif kind == "module":
            parts.append(f"module {detail}, imported by {names}")
        elif kind == "command":
            parts.append(f"the run command's program {detail}")
        else:
            parts.append("a directory on the described interpreter's sys.path")
    shown = parts[:_SHOWN]
    return "; ".join(shown) + (f"; and {len(parts) - _SHOWN} more" if len(parts) > _SHOWN else "")
