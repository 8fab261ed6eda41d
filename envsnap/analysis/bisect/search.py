"""Delta debugging over the environment differences between a GOOD and a BAD snapshot.

What a person does by hand — revert everything, re-apply one change at a time, re-run the
benchmark — done in O(log n) configurations: deltas (deltas.py) searched with ddmin (ddmin.py),
every run journaled (journal.py). Noise: each configuration runs --repeat times; its median is
placed on the line from the GOOD median (0) to the BAD median (1), both measured first in the same
bisect. Within --margin of an end it is good/bad; in between it is re-measured (at most twice
more), and if still in between it stays "ambiguous". When GOOD and BAD themselves do not separate
beyond their spread, bisect stops (exit 1). Watched files and git working-tree files are recorded
as hashes, without content: they cannot be switched, and the result says so.
"""
from __future__ import annotations

import math
import os
import statistics
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.bisect.ddmin import AMBIGUOUS, BAD, FAILED, GOOD, Key, ddmin
from envsnap.analysis.bisect.deltas import Delta, collect_deltas, config_env
from envsnap.analysis.bisect.journal import (
    JOURNAL_VERSION,
    Journal,
    _sha,
    default_journal_path,
)
from envsnap.errors import EnvsnapError
from envsnap.measure import metrics as metrics_mod
from envsnap.measure.parsers import MetricSpec
from envsnap.measure.runs import RunOptions, main_metric, run_once
from envsnap.model import store
from envsnap.redact import redact_argv

RESULT_SCHEMA_VERSION = 1
DEFAULT_MARGIN = 0.25
DEFAULT_MAX_RUNS = 200
MAX_EXTRA_ROUNDS = 2  # an ambiguous configuration is measured at most 1 + 2 times


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
    good = store.load(good_path)
    bad = store.load(bad_path)
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
            overrides.update({k: v for k, v in stored.items() if v in metrics_mod.DIRECTIONS})
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
    from envsnap.model.snapshot import utc_now

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
