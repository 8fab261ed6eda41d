"""Delta debugging over the environment differences between a GOOD and a BAD snapshot.

What a person does by hand — revert everything, re-apply one change at a time, re-run the
benchmark — done in O(log n) configurations with Zeller & Hildebrandt's ddmin
("Simplifying and Isolating Failure-Inducing Input", IEEE TSE 2002):

* Deltas: every environment variable that differs (set, unset, changed) in the parent's
  environment (section env) or in what the workers saw (processes.*.environ,
  probe.records.*.env_at_start / env_at_init): CMD's environment reaches its workers, so
  setting a variable for CMD re-applies it. A value the snapshot holds only redacted
  (`redacted:xxxxxxxx`) is re-applied only when this machine's current value has that
  fingerprint; otherwise the delta is listed as not applicable. Watched files and git
  working-tree files are recorded as hashes, without content: they cannot be switched,
  and the result says so.
* A configuration is a subset of deltas switched to BAD: CMD runs with os.environ overlaid
  by the GOOD value of every applicable delta, then the subset's BAD values (unset where
  BAD lacks the variable).
* Noise: each configuration runs --repeat times; its median is placed on the line from the
  GOOD median (0) to the BAD median (1), both measured first in the same bisect. Within
  --margin of an end it is good/bad; in between it is re-measured (at most twice more),
  and if still in between it stays "ambiguous" — ddmin's "unresolved", never a guess.
  When GOOD and BAD themselves do not separate beyond their spread, bisect stops (exit 1).
* Journal: every run is appended (flush + fsync) to a JSONL file as it finishes. Restarted
  with the same journal (same deltas and command, checked), bisect replays the journaled
  runs instead of repeating them; a truncated last line (a kill mid-write) is dropped.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import re
import statistics
import time
from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from envsnap import metrics as metrics_mod
from envsnap import snapshot as snapshot_mod
from envsnap.errors import EnvsnapError
from envsnap.knowledge import is_volatile
from envsnap.parsers import MetricSpec
from envsnap.redact import redact_argv, redact_text, redact_value
from envsnap.runs import RunOptions, main_metric, run_once

JOURNAL_VERSION = 1
RESULT_SCHEMA_VERSION = 1
DEFAULT_MARGIN = 0.25
DEFAULT_MAX_RUNS = 200
MAX_EXTRA_ROUNDS = 2  # an ambiguous configuration is measured at most 1 + 2 times

GOOD, BAD, AMBIGUOUS, FAILED = "good", "bad", "ambiguous", "failed"
_REDACTED = re.compile(r"redacted:[0-9a-f]{8}")

Key = Tuple[str, ...]  # the names of the deltas switched to BAD, sorted


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

    def public(self) -> Dict:
        out = {"name": self.name, "change": self.change, "good": self.good, "bad": self.bad,
               "sources": list(self.sources)}
        if self.note:
            out["note"] = self.note
        return out


@dataclass
class DeltaSet:
    applicable: List[Delta]
    not_applicable: List[Delta]
    skipped: List[Dict]  # parts of the difference bisect cannot switch, with why
    notes: List[str]


def _env_views(snap: Mapping) -> Dict[str, Dict[str, str]]:
    """Every environment a snapshot recorded: the parent's, each worker's, each probe's."""
    views: Dict[str, Dict[str, str]] = {}
    env = snapshot_mod.section_data(snap, "env").get("vars")
    if isinstance(env, dict):
        views["env"] = env
    processes = snapshot_mod.section_data(snap, "processes").get("processes")
    if isinstance(processes, dict):
        for key, proc in processes.items():
            if isinstance(proc, dict) and isinstance(proc.get("environ"), dict):
                views[f"workers.{key}"] = proc["environ"]
    records = snapshot_mod.section_data(snap, "probe").get("records")
    if isinstance(records, dict):
        for key, record in records.items():
            if not isinstance(record, dict):
                continue
            for name in ("env_at_start", "env_at_init"):
                if isinstance(record.get(name), dict):
                    views[f"probe.{key}.{name}"] = record[name]
    return {src: {str(k): (None if v is None else str(v)) for k, v in view.items()} for src, view in views.items()}


def _volatile(source: str, name: str) -> bool:
    if source == "env":
        return is_volatile(f"env.vars.{name}")
    if source.startswith("workers."):
        return is_volatile(f"processes.processes.{source[8:]}.environ.{name}")
    return is_volatile(f"probe.records.{source[6:]}.{name}")


def _resolve(name: str, value: Optional[str], environ: Mapping[str, str]) -> Tuple[bool, Optional[str]]:
    """(usable, value to apply). A redacted value is usable only when this machine's value matches it."""
    if value is None or not _REDACTED.search(value):
        return True, value
    current = environ.get(name)
    if current is not None and redact_value(name, current) == value:
        return True, current
    return False, None


def _file_differences(good: Mapping, bad: Mapping) -> List[Dict]:
    skipped = []
    g_files = snapshot_mod.section_data(good, "files").get("entries") or {}
    b_files = snapshot_mod.section_data(bad, "files").get("entries") or {}
    if isinstance(g_files, dict) and isinstance(b_files, dict):
        changed = sorted(p for p in set(g_files) | set(b_files) if g_files.get(p) != b_files.get(p))
        if changed:
            skipped.append({
                "kind": "files", "count": len(changed), "examples": changed[:5],
                "note": "watched files differ, but the snapshots hold only their hashes, not their content: "
                        "bisect cannot re-create either version, so they are not part of the search",
            })
    g_repos = snapshot_mod.section_data(good, "git").get("repos") or {}
    b_repos = snapshot_mod.section_data(bad, "git").get("repos") or {}
    if isinstance(g_repos, dict) and isinstance(b_repos, dict):
        changed = []
        for repo in sorted(set(g_repos) | set(b_repos)):
            g, b = g_repos.get(repo) or {}, b_repos.get(repo) or {}
            for part in ("dirty", "untracked"):
                gp, bp = g.get(part) or {}, b.get(part) or {}
                if isinstance(gp, dict) and isinstance(bp, dict):
                    changed.extend(f"{repo}/{f}" for f in sorted(set(gp) | set(bp)) if gp.get(f) != bp.get(f))
        if changed:
            skipped.append({
                "kind": "git", "count": len(changed), "examples": changed[:5],
                "note": "git working-tree files differ, but the snapshots hold only their hashes, not their "
                        "content: bisect cannot apply them (in a worktree or anywhere), so they are not part "
                        "of the search",
            })
    return skipped


def _settable(name: str, *values: Optional[str]) -> bool:
    if not name or "=" in name or "\x00" in name:
        return False
    return not any(v is not None and "\x00" in v for v in values)


def collect_deltas(good: Mapping, bad: Mapping, environ: Optional[Mapping[str, str]] = None) -> DeltaSet:
    """The environment deltas between two snapshots, sorted by name."""
    environ = os.environ if environ is None else environ
    g_views, b_views = _env_views(good), _env_views(bad)
    notes: List[str] = []
    one_sided = sorted(set(g_views) ^ set(b_views))
    if one_sided:
        notes.append("recorded in only one snapshot, not compared: " + ", ".join(one_sided[:6])
                     + (f" (+{len(one_sided) - 6} more)" if len(one_sided) > 6 else ""))
    candidates: Dict[str, List[Tuple[str, Optional[str], Optional[str]]]] = {}
    volatile: set = set()
    for source in sorted(set(g_views) & set(b_views)):
        g, b = g_views[source], b_views[source]
        for name in set(g) | set(b):
            if g.get(name) != b.get(name):
                if _volatile(source, name):
                    volatile.add(name)
                    continue
                candidates.setdefault(name, []).append((source, g.get(name), b.get(name)))
    if volatile:
        notes.append("volatile variables ignored: " + ", ".join(sorted(volatile)))

    applicable: List[Delta] = []
    not_applicable: List[Delta] = []
    for name in sorted(candidates):
        cands = candidates[name]
        parent = [c for c in cands if c[0] == "env"]
        if parent:
            pair = (parent[0][1], parent[0][2])
        else:
            # Seen only in workers: take the pair most of them agree on (ties: first by source name).
            counts: Dict[Tuple, int] = {}
            for _, gv, bv in cands:
                counts[(gv, bv)] = counts.get((gv, bv), 0) + 1
            pair = max(counts, key=lambda p: (counts[p], -min(i for i, c in enumerate(cands) if (c[1], c[2]) == p)))
        delta = Delta(name=name, good=pair[0], bad=pair[1],
                      sources=[src for src, gv, bv in cands if (gv, bv) == pair])
        notes_here = []
        if not parent:
            notes_here.append("differs only in what the workers saw; re-applied through the benchmark's "
                              "environment, which its workers inherit")
        others = [src for src, gv, bv in cands if (gv, bv) != pair]
        if others:
            notes_here.append("other values in " + ", ".join(others[:4]))
        ok_good, good_value = _resolve(name, delta.good, environ)
        ok_bad, bad_value = _resolve(name, delta.bad, environ)
        if not _settable(name, delta.good, delta.bad):
            delta.applicable = False
            delta.note = "; ".join(["a name or value no process environment can hold (empty, '=' or NUL)"]
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
    return DeltaSet(applicable, not_applicable, _file_differences(good, bad), notes)


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


# ---------------------------------------------------------------------------------------
# ddmin
# ---------------------------------------------------------------------------------------

def _split(items: Sequence[str], n: int) -> List[List[str]]:
    chunks, start = [], 0
    for i in range(n):
        stop = start + (len(items) - start) // (n - i)
        chunks.append(list(items[start:stop]))
        start = stop
    return [c for c in chunks if c]


def ddmin(items: Sequence[str], test: Callable[[Key], str]) -> List[str]:
    """Zeller's ddmin: a 1-minimal subset of `items` for which test() is BAD.

    `test(all items)` is taken to be BAD (the caller measured it). Outcomes other than BAD
    (good, ambiguous, failed) all mean "does not reproduce", as in the paper.
    """
    current = list(items)
    n = 2
    while len(current) >= 2:
        chunks = _split(current, min(n, len(current)))
        reduced = False
        for chunk in chunks:
            if test(tuple(sorted(chunk))) == BAD:
                current, n, reduced = chunk, 2, True
                break
        if not reduced and len(chunks) > 2:  # with two chunks the complements are the chunks
            for chunk in chunks:
                complement = [x for x in current if x not in chunk]
                if test(tuple(sorted(complement))) == BAD:
                    current, n, reduced = complement, max(n - 1, 2), True
                    break
        if not reduced:
            if n >= len(current):
                break
            n = min(len(current), 2 * n)
    return current


# ---------------------------------------------------------------------------------------
# Journal
# ---------------------------------------------------------------------------------------

def default_journal_path(bad_path: str) -> str:
    """`<BAD without .json>.bisect.jsonl` next to BAD; in the current directory when that is not writable."""
    base = os.path.basename(bad_path)
    stem = base[:-5] if base.endswith(".json") else base
    name = f"{stem}.bisect.jsonl"
    directory = os.path.dirname(os.path.abspath(bad_path))
    if os.access(directory, os.W_OK):
        return os.path.join(directory, name)
    return os.path.join(os.getcwd(), name)


def _sha(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode("utf-8", "surrogateescape")).hexdigest()


# Header lines are written with sorted keys, so a header cut short still starts like this.
_HEADER_START = b'{"bad_file": '


def _usable_run(entry: object) -> bool:
    """A journaled run the bisector can replay: anything else (a hand-edited or damaged line)
    is a run to repeat, like a cut one."""
    if not isinstance(entry, dict) or entry.get("type") != "run":
        return False
    config, metrics = entry.get("config"), entry.get("metrics", {})
    if not isinstance(config, list) or not all(isinstance(k, str) for k in config):
        return False
    if not isinstance(entry.get("ok"), bool) or not isinstance(metrics, dict):
        return False
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in metrics.values())


class Journal:
    """Append-only JSONL: a header line, then one line per finished run."""

    def __init__(self, path: str, header: Dict):
        self.path = os.path.abspath(path)
        self.header = header
        self.runs: List[Dict] = []
        self.dropped_partial = False
        self._handle = None

    def open(self) -> "Journal":
        directory = os.path.dirname(self.path)
        if not os.path.isdir(directory):
            raise EnvsnapError(f"journal directory {directory} does not exist")
        if os.path.isdir(self.path):
            raise EnvsnapError(f"journal {self.path} is a directory")
        try:
            handle = open(self.path, "a+b")
        except OSError as exc:
            raise EnvsnapError(f"cannot open journal {self.path}: {exc.strerror or exc}") from None
        try:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover - not POSIX
            pass
        except OSError as exc:
            handle.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise EnvsnapError(f"journal {self.path} is in use by another envsnap bisect") from None
            raise EnvsnapError(f"cannot lock journal {self.path}: {exc.strerror or exc}") from None
        self._handle = handle
        handle.seek(0)
        data = handle.read()
        complete_end = data.rfind(b"\n") + 1
        # Check the file is ours before changing a byte of it (a mistyped --journal).
        if complete_end == 0:
            if data.strip() and not data.startswith(_HEADER_START):
                self.close()
                raise EnvsnapError(f"{self.path} is not an envsnap bisect journal (first line is not its header)")
        else:
            try:
                header = json.loads(data[:data.index(b"\n")].decode("utf-8", "replace"))
            except ValueError:
                header = None
            if not isinstance(header, dict) or header.get("type") != "header":
                self.close()
                raise EnvsnapError(f"{self.path} is not an envsnap bisect journal (first line is not its header)")
            self._verify(header)
        if complete_end < len(data):
            # A run killed mid-write leaves a partial last line: drop it, keep the rest.
            self.dropped_partial = complete_end > 0
            handle.truncate(complete_end)
            data = data[:complete_end]
        lines = [line for line in data.decode("utf-8", "replace").splitlines() if line.strip()]
        if not lines:
            self._write(dict(self.header, type="header"))
            return self
        for line in lines[1:]:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a damaged line is a run to repeat, not a reason to stop
            if _usable_run(entry):
                self.runs.append(entry)
        return self

    def _verify(self, found: Dict) -> None:
        if found.get("version") != JOURNAL_VERSION:
            self.close()
            raise EnvsnapError(f"journal {self.path} has version {found.get('version')!r}; this envsnap writes "
                               f"{JOURNAL_VERSION}: use another --journal")
        checks = [("deltas_sha256", "the GOOD/BAD differences are not the same"),
                  ("command_sha256", "the command is not the same"), ("metric", "the --metric is not the same")]
        for key, what in checks:
            if found.get(key) != self.header.get(key):
                self.close()
                detail = ""
                if key == "command_sha256":
                    detail = f" (journal: {' '.join(map(str, found.get('command') or []))})"
                elif key == "deltas_sha256":
                    detail = f" (journal: {found.get('good_file')} vs {found.get('bad_file')})"
                raise EnvsnapError(f"journal {self.path} belongs to a different bisect: {what}{detail}; "
                                   "use another --journal or delete it")

    def _write(self, entry: Dict) -> None:
        assert self._handle is not None
        self._handle.seek(0, os.SEEK_END)
        self._handle.write((json.dumps(entry, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8", "replace"))
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def append_run(self, entry: Dict) -> None:
        self._write(dict(entry, type="run"))

    def close(self) -> None:
        if self._handle is not None:
            try:
                self._handle.close()
            finally:
                self._handle = None


# ---------------------------------------------------------------------------------------
# Measuring configurations
# ---------------------------------------------------------------------------------------

class BudgetExhausted(Exception):
    pass


class NotDistinguishable(Exception):
    pass


def _median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


@dataclass
class Config:
    key: Key
    label: str
    runs: List[Dict] = field(default_factory=list)
    outcome: Optional[str] = None
    position: Optional[float] = None


class Bisector:
    def __init__(
        self,
        deltas: Sequence[Delta],
        command: Sequence[str],
        journal: Journal,
        *,
        metric: Optional[str] = None,
        custom: Sequence[MetricSpec] = (),
        repeat: int = 3,
        margin: float = DEFAULT_MARGIN,
        max_runs: int = DEFAULT_MAX_RUNS,
        timeout: float = 3600.0,
        environ: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        progress: Optional[Callable[[str], None]] = None,
    ):
        self.deltas = sorted(deltas, key=lambda d: d.name)
        self.names = [d.name for d in self.deltas]
        self.command = list(command)
        self.journal = journal
        self.metric = metric
        self.custom = list(custom)
        self.repeat = repeat
        self.margin = margin
        self.max_runs = max_runs
        self.timeout = timeout
        self.environ = dict(os.environ if environ is None else environ)
        self.cwd = cwd or os.getcwd()
        self.progress = progress or (lambda line: None)
        self.configs: Dict[Key, Config] = {}
        self.order: List[Key] = []
        self.new_runs = 0
        self.journal_runs = 0
        self.run_seconds: List[float] = []
        self.good_key: Key = ()
        self.bad_key: Key = tuple(self.names)
        self.current: List[str] = list(self.names)
        self._pending = {}
        for entry in journal.runs:
            key = tuple(sorted(entry["config"]))
            if set(key) <= set(self.names):
                self._pending.setdefault(key, []).append(entry)

    # -- runs ------------------------------------------------------------------------
    @property
    def total_runs(self) -> int:
        return self.new_runs + self.journal_runs

    def _config(self, key: Key) -> Config:
        if key not in self.configs:
            if key == self.good_key:
                label = "GOOD (no delta)"
            elif key == self.bad_key:
                label = f"BAD (all {len(key)})"
            else:
                label = ", ".join(key)
            config = Config(key, label)
            journaled = self._pending.pop(key, [])
            config.runs.extend(journaled)
            self.journal_runs += len(journaled)
            self.configs[key] = config
            self.order.append(key)
        return self.configs[key]

    def _run(self, config: Config) -> None:
        if self.total_runs >= self.max_runs:
            raise BudgetExhausted()
        env = config_env(self.environ, self.deltas, config.key)
        record = run_once(RunOptions(command=self.command, custom=self.custom, timeout=self.timeout,
                                     env=env, cwd=self.cwd, require_metric=self.metric))
        entry = {
            "config": list(config.key),
            "ok": bool(record["ok"]),
            "metrics": record.get("metrics", {}),
            "exit_code": record.get("exit_code"),
            "duration_s": record.get("duration_s"),
            "started": record.get("started"),
        }
        if not record["ok"]:
            entry["error"] = record.get("error", "failed")
            entry["output_tail"] = "\n".join(record.get("output_tail", "").splitlines()[-5:])
        self.journal.append_run(entry)
        config.runs.append(entry)
        self.new_runs += 1
        self.run_seconds.append(float(record.get("duration_s") or 0.0))

    def values(self, config: Config) -> List[float]:
        if self.metric is None:
            return []
        return [float(r["metrics"][self.metric]) for r in config.runs
                if r.get("ok") and isinstance(r.get("metrics"), dict) and self.metric in r["metrics"]]

    def _ensure_metric(self, config: Config) -> None:
        if self.metric is None:
            for run in config.runs:
                if run.get("ok") and run.get("metrics"):
                    self.metric = main_metric(run["metrics"], [name for name, _ in self.custom])
                    return

    def measure(self, config: Config, rounds: int) -> None:
        """Run until the configuration has rounds × repeat attempts (journaled ones count)."""
        while len(config.runs) < rounds * self.repeat:
            self._run(config)
            self._ensure_metric(config)
        self._ensure_metric(config)

    # -- classification --------------------------------------------------------------
    def _baseline(self) -> Tuple[float, float]:
        good = _median(self.values(self.configs[self.good_key]))
        bad = _median(self.values(self.configs[self.bad_key]))
        return good, bad

    def classify(self, config: Config) -> str:
        values = self.values(config)
        if not values:
            config.outcome, config.position = FAILED, None
            return FAILED
        good, bad = self._baseline()
        position = (_median(values) - good) / (bad - good) + 0.0  # + 0.0: no "-0%"
        config.position = position
        if position <= self.margin:
            config.outcome = GOOD
        elif position >= 1 - self.margin:
            config.outcome = BAD
        else:
            config.outcome = AMBIGUOUS
        return config.outcome

    def test(self, key: Key) -> str:
        config = self._config(key)
        if config.outcome is not None:  # the same subset is never measured twice
            return config.outcome
        rounds = max(1, math.ceil(len(config.runs) / self.repeat))
        self.measure(config, rounds)
        outcome = self.classify(config)
        while outcome == AMBIGUOUS and rounds < 1 + MAX_EXTRA_ROUNDS:
            rounds += 1
            self.measure(config, rounds)
            outcome = self.classify(config)
        self._report(config)
        return outcome

    def _report(self, config: Config) -> None:
        values = self.values(config)
        shown = f"median {_median(values):.6g}" if values else "no measurement"
        where = f" ({config.position:.0%} of the way to BAD)" if config.position is not None else ""
        eta = self._eta()
        label = config.label if len(config.label) <= 60 else config.label[:57] + "..."
        size = "" if config.key in (self.good_key, self.bad_key) else f"{len(config.key)} BAD: "
        self.progress(f"[{self.order.index(config.key) + 1}] {size}{label} -> {shown}{where}: {config.outcome or 'measured'} | "
                      f"{self.total_runs} runs ({self.journal_runs} journaled){eta}")

    def _eta(self) -> str:
        if not self.run_seconds:
            return ""
        per_run = sum(self.run_seconds) / len(self.run_seconds)
        # ddmin needs about 2·log2(k) more configurations for one cause among k deltas.
        remaining = 2 * math.ceil(math.log2(len(self.current))) if len(self.current) > 1 else 0
        return f", ~{per_run:.2g} s/run, ETA ~{remaining * self.repeat * per_run:.0f} s"

    def distinguishable(self) -> bool:
        g = self.values(self.configs[self.good_key])
        b = self.values(self.configs[self.bad_key])
        if not g or not b:
            return False
        gm, bm = _median(g), _median(b)
        if gm == bm:
            return False
        separated = max(g) < min(b) if bm > gm else min(g) > max(b)
        spread = max(max(g) - min(g), max(b) - min(b))
        return separated and abs(bm - gm) > spread

    # -- the whole search --------------------------------------------------------------
    def baselines(self) -> None:
        good, bad = self._config(self.good_key), self._config(self.bad_key)
        rounds = 1
        while True:
            self.measure(good, rounds)
            self.measure(bad, rounds)
            for config in (good, bad):
                if not self.values(config) and len(config.runs) >= self.repeat:
                    errors = [r.get("error", "failed") for r in config.runs if not r.get("ok")]
                    what = "GOOD" if config is good else "BAD"
                    raise EnvsnapError(f"every run of the {what} configuration failed, so there is nothing to "
                                       f"compare: {errors[-1] if errors else 'no metric'}")
            if self.distinguishable() or rounds >= 1 + MAX_EXTRA_ROUNDS:
                break
            rounds += 1
        if not self.distinguishable():
            self._report(good)
            self._report(bad)
            raise NotDistinguishable()
        good.outcome, good.position = GOOD, 0.0
        bad.outcome, bad.position = BAD, 1.0
        self._report(good)
        self._report(bad)

    def search(self) -> List[str]:
        def test(key: Key) -> str:
            return self.test(key)

        def tracked(key: Key) -> str:
            outcome = test(key)
            if outcome == BAD and len(key) < len(self.current):
                self.current = list(key)
            return outcome

        return ddmin(self.names, tracked)


# ---------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------

def _side(snap: Mapping, path: str) -> Dict:
    return {"file": path, "label": snap.get("label", ""), "created": snap.get("created")}


def _summary_values(values: Sequence[float]) -> Dict:
    if not values:
        return {"median": None, "n": 0, "min": None, "max": None, "values": []}
    return {"median": _median(values), "n": len(values), "min": min(values), "max": max(values),
            "values": list(values)}


def run_bisect(
    good_path: str,
    bad_path: str,
    command: Sequence[str],
    *,
    metric: Optional[str] = None,
    custom: Sequence[MetricSpec] = (),
    repeat: int = 3,
    margin: float = DEFAULT_MARGIN,
    max_runs: int = DEFAULT_MAX_RUNS,
    journal_path: Optional[str] = None,
    timeout: float = 3600.0,
    directions: Optional[Mapping[str, str]] = None,
    environ: Optional[Mapping[str, str]] = None,
    progress: Optional[Callable[[str], None]] = None,
    on_journal: Optional[Callable[[Journal], None]] = None,
) -> Dict:
    """Load both snapshots, search, and return the result (see README: `envsnap bisect`)."""
    if not command:
        raise EnvsnapError("bisect needs the benchmark command after --")
    if not 0 < margin < 0.5:
        raise EnvsnapError(f"--margin {margin}: must be between 0 and 0.5 (a fraction of the GOOD-BAD gap)")
    if "-" in (good_path, bad_path):
        raise EnvsnapError("bisect reads two snapshot files; '-' (stdin) is not supported here")
    good = snapshot_mod.load(good_path)
    bad = snapshot_mod.load(bad_path)
    environ = dict(os.environ if environ is None else environ)
    delta_set = collect_deltas(good, bad, environ)
    journal_path = os.path.abspath(journal_path or default_journal_path(bad_path))
    # The journal is only valid for the same metric definition (a regex too, when given).
    spec = ";".join(f"{name}={regex.pattern}" for name, regex in custom) if custom else (metric or "")
    header = {
        "version": JOURNAL_VERSION,
        "good_file": os.path.abspath(good_path),
        "bad_file": os.path.abspath(bad_path),
        "deltas": [d.name for d in delta_set.applicable],
        "deltas_sha256": _sha([[d.name, d.good, d.bad] for d in delta_set.applicable]),
        "command": redact_argv(command),
        "command_sha256": _sha(list(command)),
        "metric": spec,
        "created": _now(),
    }
    overrides: Dict[str, str] = {}
    for snap in (good, bad):
        stored = snap.get("metric_directions")
        if isinstance(stored, dict):
            overrides.update({k: v for k, v in stored.items() if v in (metrics_mod.HIGHER, metrics_mod.LOWER)})
    overrides.update(directions or {})

    result: Dict = {
        "schema_version": RESULT_SCHEMA_VERSION,
        "good": _side(good, good_path),
        "bad": _side(bad, bad_path),
        "command": redact_argv(command),
        "repeat": repeat,
        "margin": margin,
        "journal": journal_path,
        "deltas": {
            "total": len(delta_set.applicable) + len(delta_set.not_applicable),
            "applied": [d.public() for d in delta_set.applicable],
            "not_applicable": [d.public() for d in delta_set.not_applicable],
        },
        "skipped": delta_set.skipped,
        "notes": list(delta_set.notes) + [
            "bisect switches environment variables only; packages, drivers, GPU settings, files and git "
            "changes cannot be switched per run (see `envsnap diff` for all differences)"],
        "minimal": [],
        "one_minimal": False,
        "configurations": [],
    }
    if not delta_set.applicable:
        why = "no environment variable differs between GOOD and BAD" if not delta_set.not_applicable else \
            "no differing environment variable can be re-applied (see 'not applicable')"
        return _finish(result, "no_deltas", 1, why, None, overrides)

    journal = Journal(journal_path, header).open()
    if on_journal:
        on_journal(journal)
    bisector = Bisector(delta_set.applicable, command, journal, metric=metric, custom=custom, repeat=repeat,
                        margin=margin, max_runs=max_runs, timeout=timeout, environ=environ, progress=progress)
    if journal.runs and progress:
        progress(f"resuming from {journal_path}: {len(journal.runs)} journaled runs will not be repeated")
    if journal.dropped_partial:
        result["notes"].append("the journal's last line was incomplete (an interrupted write) and was dropped")
    try:
        try:
            bisector.baselines()
        except NotDistinguishable:
            unswitched = []
            if delta_set.not_applicable:
                unswitched.append(f"{len(delta_set.not_applicable)} variables that could not be re-applied")
            for part in delta_set.skipped:
                unswitched.append(f"{part['count']} {part['kind']} differences")
            tail = f"; the cause may be among what bisect cannot switch: {', '.join(unswitched)}" if unswitched else ""
            return _finish(result, "not_distinguishable", 1,
                           "GOOD and BAD are not distinguishable beyond noise on this machine: the slowdown "
                           "does not reproduce through the environment variables (or needs more --repeat)" + tail,
                           bisector, overrides)
        except BudgetExhausted:
            return _finish(result, "budget_exhausted", 1,
                           f"stopped after --max-runs {max_runs} runs while measuring GOOD and BAD",
                           bisector, overrides)
        try:
            minimal = bisector.search()
        except BudgetExhausted:
            return _finish(result, "budget_exhausted", 1,
                           f"stopped after --max-runs {max_runs} runs before the set was minimal; the "
                           f"smallest BAD set found so far has {len(bisector.current)} deltas",
                           bisector, overrides, minimal=bisector.current)
        return _finish(result, "isolated", 0, "", bisector, overrides, minimal=minimal)
    finally:
        journal.close()


def _now() -> str:
    from envsnap.capture import utc_now

    return utc_now()


def _finish(result: Dict, status: str, exit_code: int, message: str, bisector: Optional[Bisector],
            overrides: Mapping[str, str], minimal: Optional[List[str]] = None) -> Dict:
    result["status"] = status
    result["exit_code"] = exit_code
    if bisector is None:
        result["message"] = message
        result.update({"metric": None, "direction": None, "runs": {"total": 0, "new": 0, "from_journal": 0,
                                                                    "failed": 0}, "configurations_run": 0})
        return result
    metric = bisector.metric
    result["metric"] = metric
    result["direction"] = metrics_mod.direction(metric, dict(overrides)) if metric else None
    good_values = bisector.values(bisector.configs[bisector.good_key]) if bisector.good_key in bisector.configs else []
    bad_values = bisector.values(bisector.configs[bisector.bad_key]) if bisector.bad_key in bisector.configs else []
    result["good"].update(_summary_values(good_values))
    result["bad"].update(_summary_values(bad_values))
    if good_values and bad_values and _median(good_values):
        result["change_pct"] = round((_median(bad_values) / _median(good_values) - 1) * 100, 3)
    else:
        result["change_pct"] = None
    by_name = {d.name: d for d in bisector.deltas}
    configs = []
    for i, key in enumerate(bisector.order, 1):
        config = bisector.configs[key]
        values = bisector.values(config)
        configs.append({
            "id": i,
            "label": "GOOD" if key == bisector.good_key else ("BAD" if key == bisector.bad_key else None),
            "bad_deltas": list(key),
            "size": len(key),
            "n": len(values),
            "failed_runs": sum(1 for r in config.runs if not r.get("ok")),
            "median": _median(values) if values else None,
            "values": values,
            "position": None if config.position is None else round(config.position, 4),
            "outcome": config.outcome,
        })
    result["configurations"] = configs
    result["configurations_run"] = len(configs)
    all_runs = [r for c in bisector.configs.values() for r in c.runs]
    result["runs"] = {"total": len(all_runs), "new": bisector.new_runs, "from_journal": bisector.journal_runs,
                      "failed": sum(1 for r in all_runs if not r.get("ok"))}
    ambiguous = [c for c in configs if c["outcome"] in (AMBIGUOUS, FAILED)]
    if minimal is not None:
        result["minimal"] = [by_name[name].public() for name in minimal]
        result["one_minimal"] = status == "isolated" and _one_minimal(bisector, minimal)
        if status == "isolated":
            names = ", ".join(minimal)
            total = len(bisector.names)
            if len(minimal) == 1:
                message = f"{names} (1 of {total} deltas) causes the change alone"
            else:
                message = f"{names} ({len(minimal)} of {total} deltas) cause the change together"
                if result["one_minimal"]:
                    message += "; removing any one of them undoes it"
            if not result["one_minimal"]:
                message += " (not proven 1-minimal: some smaller configurations were ambiguous or failed)"
    if ambiguous:
        result["notes"].append(
            f"{len(ambiguous)} configurations stayed between GOOD and BAD (ambiguous) or failed after "
            "re-measuring; ddmin treats them as not reproducing the slowdown. Several deltas may each "
            "cause part of it")
    if bisector.repeat == 1:
        result["notes"].append("--repeat 1: noise cannot be judged from one run per configuration")
    result["message"] = message
    return result


def _one_minimal(bisector: Bisector, minimal: Sequence[str]) -> bool:
    """Removing any one delta of the set was measured and found GOOD."""
    for name in minimal:
        smaller = tuple(sorted(x for x in minimal if x != name))
        config = bisector.configs.get(smaller)
        if config is None or config.outcome != GOOD:
            return False
    return True


# ---------------------------------------------------------------------------------------
# Text rendering
# ---------------------------------------------------------------------------------------

def _fmt(value: Optional[float]) -> str:
    return "-" if value is None else f"{value:.6g}"


def _show_value(value: Optional[str]) -> str:
    if value is None:
        return "(unset)"
    text = redact_text(value)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def render_text(result: Mapping) -> str:
    lines = []
    status = result["status"]
    head = {"isolated": "ISOLATED", "not_distinguishable": "NOT ISOLATABLE", "no_deltas": "NOTHING TO BISECT",
            "budget_exhausted": "NOT ISOLATED"}.get(status, status)
    lines.append(f"envsnap bisect: {head}: {result.get('message', '')}")
    metric = result.get("metric")
    if metric:
        g, b = result["good"], result["bad"]
        change = result.get("change_pct")
        lines.append(f"metric {metric} ({result.get('direction')} is better): GOOD median {_fmt(g.get('median'))} "
                     f"(n={g.get('n')}), BAD median {_fmt(b.get('median'))} (n={b.get('n')})"
                     + (f", {change:+.1f}%" if change is not None else ""))
    runs = result.get("runs", {})
    lines.append(f"{result.get('configurations_run', 0)} configurations, {runs.get('total', 0)} runs "
                 f"({runs.get('from_journal', 0)} from the journal, {runs.get('failed', 0)} failed); "
                 f"{len(result['deltas']['applied'])} deltas searched")
    if result.get("minimal"):
        title = "minimal failure-inducing set" + (" (1-minimal)" if result.get("one_minimal") else "")
        lines.append(f"{title}:")
        for d in result["minimal"]:
            lines.append(f"  {d['name']}: GOOD {_show_value(d['good'])} -> BAD {_show_value(d['bad'])}"
                         f"  [{', '.join(d['sources'])}]")
            if d.get("note"):
                lines.append(f"      {d['note']}")
    na = result["deltas"]["not_applicable"]
    if na:
        lines.append(f"not applicable ({len(na)}):")
        for d in na:
            lines.append(f"  {d['name']}: {d.get('note', '')}")
    for skipped in result.get("skipped", []):
        examples = ", ".join(skipped.get("examples", [])[:3])
        lines.append(f"not searched: {skipped['count']} {skipped['kind']} differences (e.g. {examples}): "
                     f"{skipped['note']}")
    if result.get("configurations"):
        lines.append("configurations (BAD deltas switched on over GOOD):")
        lines.append(f"  {'#':>3}  {'outcome':<9} {'pos':>5} {'median':>12} {'n':>3}  deltas")
        for c in result["configurations"]:
            if c["label"] == "GOOD":
                which = "none (GOOD)"
            elif c["label"] == "BAD":
                which = f"all {c['size']} (BAD)"
            else:
                names = ", ".join(c["bad_deltas"])
                which = f"{c['size']}: {names}" if len(names) <= 70 else f"{c['size']}: {names[:67]}..."
            pos = "-" if c["position"] is None else f"{c['position']:.2f}"
            fails = f" ({c['failed_runs']} failed)" if c["failed_runs"] else ""
            lines.append(f"  {c['id']:>3}  {c['outcome'] or '-':<9} {pos:>5} {_fmt(c['median']):>12} "
                         f"{c['n']:>3}  {which}{fails}")
    for note in result.get("notes", []):
        lines.append(f"note: {note}")
    lines.append(f"journal: {result['journal']}")
    return "\n".join(lines)
