"""Bisect's environment deltas: every environment variable that differs between GOOD and BAD.

Sources are the parent's environment (section env) and what the workers saw
(processes.*.environ, probe.records.*.env_at_start / env_at_init): CMD's environment reaches its
workers, so setting a variable for CMD re-applies it. A value the snapshot holds only redacted
(`redacted:xxxxxxxx`) is re-applied only when this machine's current value has that fingerprint;
otherwise the delta is listed as not applicable. A configuration is a subset of deltas switched
to BAD: CMD runs with os.environ overlaid by the GOOD value of every applicable delta, then the
subset's BAD values (unset where BAD lacks the variable). Files are files.py's.

NCCL's own config files (section nccl_conf) are a source too: a setting NCCL took from
NCCL_CONF_FILE, ~/.nccl.conf or /etc/nccl.conf is re-applied as the variable it sets, since NCCL
lets the environment override a file (NVIDIA/nccl src/misc/param.cc: setenv(name, value, 0)). The
reverse cannot be done through the environment: where a side had a variable unset but this
machine's config files set it, unsetting it brings the file's value back, so such a delta is not
applicable (unless that side's own files set the same value).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.knowledge import is_volatile
from envsnap.model import snapshot as snapshot_mod
from envsnap.model.keys import EnvSource
from envsnap.redact import redact_value

_REDACTED = re.compile(r"redacted:[0-9a-f]{8}")


# ---------------------------------------------------------------------------------------
# Deltas
# ---------------------------------------------------------------------------------------

@dataclass
class Delta:
    """One environment variable that differs between GOOD and BAD."""

    name: str
    good: Optional[str]  # as recorded (possibly redacted); None = not set
    bad: Optional[str]
    sources: List[str] = field(default_factory=list)
    applicable: bool = True
    note: str = ""
    # The values to apply (a redacted one resolved from this machine's environment).
    good_value: Optional[str] = None
    bad_value: Optional[str] = None

    @property
    def change(self) -> str:
        if self.good is None:
            return "set"
        if self.bad is None:
            return "unset"
        return "changed"

    def public(self) -> Dict[str, Any]:
        # A snapshot may hold a secret in clear (--no-redact, or a name redaction did not know then): the
        # result shows what redaction makes of it, like every other output.
        good = None if self.good is None else redact_value(self.name, self.good)
        bad = None if self.bad is None else redact_value(self.name, self.bad)
        out = {"name": self.name, "kind": "env", "change": self.change, "good": good, "bad": bad,
               "sources": list(self.sources)}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class DeltaSet:
    applicable: List[Delta]
    not_applicable: List[Delta]
    notes: List[str]


def _env_views(snap: Mapping[str, Any]) -> Dict[EnvSource, Dict[str, str]]:
    """Every environment a snapshot recorded: the parent's, each worker's, each probe's."""
    views: Dict[EnvSource, Dict[str, str]] = {}
    env = snapshot_mod.section_data(snap, "env").get("vars")
    if isinstance(env, dict):
        views[EnvSource("env")] = env
    processes = snapshot_mod.section_data(snap, "processes").get("processes")
    if isinstance(processes, dict):
        for key, proc in processes.items():
            if isinstance(proc, dict) and isinstance(proc.get("environ"), dict):
                views[EnvSource("process", str(key))] = proc["environ"]
    conf = snapshot_mod.section_data(snap, "nccl_conf")
    if isinstance(conf.get("settings"), dict):
        overridden = snapshot_mod.as_dict(conf.get("overridden"))
        views[EnvSource("nccl_conf")] = {name: str(setting.get("value")) for name, setting in conf["settings"].items()
                                         if isinstance(setting, dict) and name not in overridden}
    records = snapshot_mod.section_data(snap, "probe").get("records")
    if isinstance(records, dict):
        for key, record in records.items():
            if not isinstance(record, dict):
                continue
            for name in ("env_at_start", "env_at_init"):
                if isinstance(record.get(name), dict):
                    views[EnvSource("probe", str(key), name)] = record[name]
    return {src: {str(k): (None if v is None else str(v)) for k, v in view.items()} for src, view in views.items()}


def _resolve(name: str, value: Optional[str], environ: Mapping[str, str]) -> Tuple[bool, Optional[str]]:
    """(usable, value to apply). A redacted value is usable only when this machine's value matches it."""
    if value is None or not _REDACTED.search(value):
        return True, value
    current = environ.get(name)
    if current is not None and redact_value(name, current) == value:
        return True, current
    return False, None


def _settable(name: str, *values: Optional[str]) -> bool:
    # A leading "/" is refused too: file deltas are named by their absolute paths.
    if not name or "=" in name or "\x00" in name or name.startswith("/"):
        return False
    return not any(v is not None and "\x00" in v for v in values)


def _conf_values(snap: Mapping[str, Any]) -> Dict[str, Any]:
    """{name: value} of every setting a snapshot's NCCL config files gave (overridden or not)."""
    settings = snapshot_mod.section_data(snap, "nccl_conf").get("settings")
    return {name: s.get("value") for name, s in settings.items() if isinstance(s, dict)} \
        if isinstance(settings, dict) else {}


def machine_conf(environ: Mapping[str, str]) -> Dict[str, Dict[str, Any]]:
    """{name: {"value", "file"}}: what NCCL's config files on this machine set for a benchmark started
    with this environment by this user in this directory (unredacted: compared, never stored)."""
    from envsnap.capture.collectors import nccl_conf

    settings: Dict[str, Dict[str, Any]] = nccl_conf.describe(dict(environ), os.getuid(), os.getcwd(),
                                                             redact=False)["settings"]
    return settings


def _unset_problem(name: str, snaps: Mapping[str, Mapping[str, Any]], delta: "Delta",
                   conf: Mapping[str, Dict[str, Any]]) -> Optional[str]:
    """Why a side's "unset" cannot be applied on this machine (its config files set the name), or None."""
    found = conf.get(name)
    if found is None:
        return None
    for side, value in (("GOOD", delta.good), ("BAD", delta.bad)):
        if value is None and _conf_values(snaps[side]).get(name) != found.get("value"):
            return (f"{side} has {name} unset, but this machine's {found.get('file')} sets {name}="
                    f"{found.get('value')}: unsetting the variable brings the file's value back (NCCL applies a "
                    "config file's setting unless the environment sets it); edit the file to test this change")
    return None


def collect_deltas(good: Mapping[str, Any], bad: Mapping[str, Any], environ: Optional[Mapping[str, str]] = None,
                   conf: Optional[Mapping[str, Dict[str, Any]]] = None) -> DeltaSet:
    """The environment deltas between two snapshots, sorted by name. `conf`: this machine's NCCL config
    file settings (machine_conf(environ) when not given)."""
    environ = os.environ if environ is None else environ
    conf = machine_conf(environ) if conf is None else conf
    g_views, b_views = _env_views(good), _env_views(bad)
    notes: List[str] = []
    one_sided = sorted(src.label for src in set(g_views) ^ set(b_views))
    if one_sided:
        notes.append("recorded in only one snapshot, not compared: " + ", ".join(one_sided[:6])
                     + (f" (+{len(one_sided) - 6} more)" if len(one_sided) > 6 else ""))
    candidates: Dict[str, List[Tuple[EnvSource, Optional[str], Optional[str]]]] = {}
    volatile: set[Any] = set[Any]()
    for source in sorted(set(g_views) & set(b_views), key=lambda src: src.label):
        g, b = g_views[source], b_views[source]
        for name in set(g) | set(b):
            if g.get(name) != b.get(name):
                if is_volatile(source.flat(name)):
                    volatile.add(name)
                    continue
                candidates.setdefault(name, []).append((source, g.get(name), b.get(name)))
    if volatile:
        notes.append("volatile variables ignored: " + ", ".join(sorted(volatile)))

    applicable: List[Delta] = []
    not_applicable: List[Delta] = []
    for name in sorted(candidates):
        cands = candidates[name]
        parent = [c for c in cands if c[0].kind == "env"]
        if parent:
            pair = (parent[0][1], parent[0][2])
        else:
            # Seen only in workers: take the pair most of them agree on (ties: first by source name).
            counts: Dict[Tuple[Any, ...], int] = {}
            for _, gv, bv in cands:
                counts[(gv, bv)] = counts.get((gv, bv), 0) + 1
            pair = max(counts, key=lambda p: (counts[p], -min(i for i, c in enumerate(cands) if (c[1], c[2]) == p)))
        delta = Delta(name=name, good=pair[0], bad=pair[1],
                      sources=[src.label for src, gv, bv in cands if (gv, bv) == pair])
        notes_here = []
        if delta.sources == ["nccl_conf"]:
            notes_here.append("set by NCCL's config files, in no environment; re-applied through the benchmark's "
                              "environment, which NCCL lets override a file")
        elif not parent:
            notes_here.append("differs only in what the workers saw; re-applied through the benchmark's "
                              "environment, which its workers inherit")
        others = [src.label for src, gv, bv in cands if (gv, bv) != pair]
        if others:
            notes_here.append("other values in " + ", ".join(others[:4]))
        ok_good, good_value = _resolve(name, delta.good, environ)
        ok_bad, bad_value = _resolve(name, delta.bad, environ)
        unset_problem = _unset_problem(name, {"GOOD": good, "BAD": bad}, delta, conf)
        if unset_problem is not None:
            delta.applicable = False
            delta.note = "; ".join([unset_problem] + notes_here)
            not_applicable.append(delta)
        elif not _settable(name, delta.good, delta.bad):
            delta.applicable = False
            delta.note = "; ".join(["a name or value no process environment can hold (empty, '=' or NUL), "
                                    "or a name starting with '/'"]
                                   + notes_here)
            not_applicable.append(delta)
        elif ok_good and ok_bad:
            delta.good_value, delta.bad_value = good_value, bad_value
            delta.note = "; ".join(notes_here)
            applicable.append(delta)
        else:
            side = "GOOD and BAD" if not (ok_good or ok_bad) else ("GOOD" if not ok_good else "BAD")
            notes_here.insert(0, f"{side} value is redacted in the snapshot and this machine's {name} does not "
                                 "match it: it cannot be re-applied; runs keep this machine's value")
            delta.applicable = False
            delta.note = "; ".join(notes_here)
            not_applicable.append(delta)
    return DeltaSet(applicable, not_applicable, notes)


def config_env(base: Mapping[str, str], deltas: Sequence[Delta], switched: Iterable[str]) -> Dict[str, str]:
    """base overlaid by every delta's GOOD value, then the switched deltas' BAD values."""
    env = dict(base)
    by_name = {d.name: d for d in deltas}
    for delta in deltas:
        _assign(env, delta.name, delta.good_value)
    for name in switched:
        _assign(env, name, by_name[name].bad_value)
    return env


def _assign(env: Dict[str, str], name: str, value: Optional[str]) -> None:
    if value is None:
        env.pop(name, None)
    else:
        env[name] = value
