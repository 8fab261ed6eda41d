"""Delta debugging over the differences between a GOOD and a BAD snapshot: the search.

What a person does by hand — revert everything, re-apply one change at a time, re-run the
benchmark — done in O(log n) configurations: deltas (environment variables: deltas.py; files:
files.py, switched by applier.py) searched with ddmin (ddmin.py), every run journaled
(journal.py). Noise: each configuration runs --repeat times; its median is placed on the line
from the GOOD median (0) to the BAD median (1), both measured first in the same bisect. Within
--margin of an end it is good/bad; in between it is re-measured (at most twice more), and if
still in between it stays "ambiguous". When GOOD and BAD themselves do not separate beyond their
spread, bisect stops (exit 1). The command around it (loading, journal, files, result) is
command.py; the result's assembly is outcome.py.

Drift: the machine under a long bisect changes (its load falls, clocks ramp), and GOOD and BAD measured
once at the start stop being the ends of the line. So they are measured again after every CHECK_EVERY
configurations that ran, and before a result is given. When either no longer falls on its own side of
the margin, the baseline has drifted: it is said, GOOD and BAD measured then become the new baseline (an
"epoch"), and the configurations measured since the last check that held are measured again and classed
against it (ddmin replays its other answers from the cache); if the new GOOD and BAD do not separate, or
the baseline drifted MAX_DRIFTS times, bisect stops with status "drifted" and says why. A run records
its epoch in the journal.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.analysis.runs import noise
from envsnap.analysis.runs.stats import median
from envsnap.bisect import DEFAULT_MARGIN, DEFAULT_MAX_RUNS, DEFAULT_REPEAT
from envsnap.bisect.applier import counted
from envsnap.bisect.ddmin import AMBIGUOUS, BAD, FAILED, GOOD, Key, ddmin
from envsnap.bisect.deltas import Delta, config_env
from envsnap.bisect.journal import Journal
from envsnap.errors import EnvsnapError
from envsnap.measure.parsers import MetricSpec
from envsnap.measure.runs import RunOptions, main_metric, run_once
from envsnap.redact import redact_text

MAX_EXTRA_ROUNDS = 2  # an ambiguous configuration is measured at most 1 + 2 times
# GOOD and BAD are measured at least twice each, whatever --repeat says: from one run per side any two numbers
# "separate", and the whole search then follows noise (on an H200, --repeat 1 "isolated" CLICOLOR in a pair whose
# metric did not move).
BASELINE_MIN_RUNS = 2
CHECK_EVERY = 4  # configurations measured between two re-measurements of GOOD and BAD
MAX_DRIFTS = 3  # baselines drifted this often: the machine is too unsteady for a result
ETA_RECENT_RUNS = 5  # the ETA's time per run: the median of the latest runs (a machine's speed moves)


# ---------------------------------------------------------------------------------------
# Measuring configurations
# ---------------------------------------------------------------------------------------

class BudgetExhausted(Exception):
    pass


class NotDistinguishable(Exception):
    pass


class Drifted(Exception):
    """GOOD and BAD re-measured no longer separate, or drifted MAX_DRIFTS times: no trustworthy result."""

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class _Restart(Exception):
    """The baseline drifted and some answers were dropped: the search replays from the cache."""


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _epoch_of(run: Mapping[str, Any]) -> int:
    epoch = run.get("epoch", 0)
    return epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 0


def _metric_values(runs: Sequence[Mapping[str, Any]], metric: Optional[str]) -> List[float]:
    if metric is None:
        return []
    return [float(r["metrics"][metric]) for r in runs
            if r.get("ok") and isinstance(r.get("metrics"), dict) and metric in r["metrics"]]


def _num(value: Optional[float]) -> str:
    return "no measurement" if value is None else f"{value:.6g}"


def short_name(name: str) -> str:
    """A delta as progress lines show it: a variable's name, a file's last two path parts."""
    if not name.startswith(os.sep):
        return name
    parts = name.rstrip(os.sep).split(os.sep)
    return os.sep.join(parts[-2:])


@dataclass
class Config:
    key: Key
    label: str
    runs: List[Dict[str, Any]] = field(default_factory=list)
    outcome: Optional[str] = None
    position: Optional[float] = None
    epoch: Optional[int] = None  # the baseline it was classed against (None: not classed yet)


class Bisector:
    def __init__(
        self,
        deltas: Sequence[Delta],
        command: Sequence[str],
        journal: Journal,
        *,
        file_deltas: Sequence[Any] = (),
        apply_files: Optional[Callable[[Sequence[str]], None]] = None,
        metric: Optional[str] = None,
        custom: Sequence[MetricSpec] = (),
        repeat: int = DEFAULT_REPEAT,
        margin: float = DEFAULT_MARGIN,
        max_runs: int = DEFAULT_MAX_RUNS,
        timeout: float = 3600.0,
        environ: Optional[Mapping[str, str]] = None,
        cwd: Optional[str] = None,
        progress: Optional[Callable[[str], None]] = None,
    ):
        self.deltas = sorted(deltas, key=lambda d: d.name)
        self.file_deltas = sorted(file_deltas, key=lambda d: d.name)
        # Files and variables are searched together (a file's name is its absolute path).
        self.names = sorted([d.name for d in self.deltas] + [d.name for d in self.file_deltas])
        self._env_names = {d.name for d in self.deltas}
        self.apply_files = apply_files
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
        self._pending: Dict[Key, List[Dict[str, Any]]] = {}
        # How the search went (search/guided_search): guided or not, the guess and its tests.
        self.path: Dict[str, Any] = {"guided": False, "steps": []}
        # Drift (see the module docstring): the baseline's epoch, the configurations measured since the last
        # check of GOOD and BAD, and every check made (for the result).
        self.epoch = 0
        self.since_check: List[Key] = []
        self.checks: List[Dict[str, Any]] = []
        self.drifts = 0
        for entry in journal.runs:
            key = tuple(sorted(entry["config"]))
            if set(key) <= set(self.names):
                self._pending.setdefault(key, []).append(entry)
                self.epoch = max(self.epoch, _epoch_of(entry))  # a resumed bisect goes on in the latest one

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
                label = ", ".join(short_name(k) for k in key)
            config = Config(key, label)
            journaled = self._pending.pop(key, [])
            config.runs.extend(journaled)
            self.journal_runs += len(journaled)
            self.configs[key] = config
            self.order.append(key)
        return self.configs[key]

    def _now_runs(self, config: Config) -> List[Dict[str, Any]]:
        """The configuration's runs measured against the current baseline."""
        return [r for r in config.runs if _epoch_of(r) == self.epoch]

    def _run(self, config: Config, epoch: Optional[int] = None) -> None:
        if self.total_runs >= self.max_runs:
            raise BudgetExhausted()
        env = config_env(self.environ, self.deltas, [k for k in config.key if k in self._env_names])
        if self.apply_files is not None:
            self.apply_files([k for k in config.key if k not in self._env_names])
        record = run_once(RunOptions(command=self.command, custom=self.custom, timeout=self.timeout,
                                     env=env, cwd=self.cwd, require_metric=self.metric))
        entry = {
            "config": list(config.key),
            "ok": bool(record["ok"]),
            "metrics": record.get("metrics", {}),
            "exit_code": record.get("exit_code"),
            "duration_s": record.get("duration_s"),
            "started": record.get("started"),
            "epoch": self.epoch if epoch is None else epoch,
        }
        if not record["ok"]:
            # The benchmark's own words can quote a credential: the journal keeps what redaction makes of them.
            entry["error"] = redact_text(str(record.get("error", "failed")))
            entry["output_tail"] = redact_text("\n".join(record.get("output_tail", "").splitlines()[-5:]))
        self.journal.append_run(entry)
        config.runs.append(entry)
        self.new_runs += 1
        self.run_seconds.append(float(record.get("duration_s") or 0.0))

    def values(self, config: Config) -> List[float]:
        """The metric of the runs that class the configuration: those of the baseline it was classed against,
        or, not classed yet, of the current one."""
        if self.metric is None:
            return []
        epoch = self.epoch if config.epoch is None or config.key in (self.good_key, self.bad_key) else config.epoch
        return _metric_values([r for r in config.runs if _epoch_of(r) == epoch], self.metric)

    def _ensure_metric(self, config: Config) -> None:
        if self.metric is None:
            for run in config.runs:
                if run.get("ok") and run.get("metrics"):
                    self.metric = main_metric(run["metrics"], [name for name, _ in self.custom])
                    return

    def measure(self, config: Config, rounds: int, at_least: int = 1) -> None:
        """Run until the configuration has rounds × repeat attempts, and at least `at_least` (journaled ones
        count)."""
        target = max(rounds * self.repeat, at_least)
        while len(self._now_runs(config)) < target:
            # Said before each run, from the first: a run can take minutes, GOOD's first ones included.
            self.progress(f"[{self.order.index(config.key) + 1}] {self._label(config)}: run "
                          f"{len(self._now_runs(config)) + 1} of {target}{self._eta(config, target)}")
            self._run(config)
            self._ensure_metric(config)
        self._ensure_metric(config)

    # -- classification --------------------------------------------------------------
    def _baseline(self) -> Tuple[float, float]:
        good = median(self.values(self.configs[self.good_key]))
        bad = median(self.values(self.configs[self.bad_key]))
        return good, bad

    def classify(self, config: Config) -> str:
        values = self.values(config)
        if not values:
            config.outcome, config.position = FAILED, None
            return FAILED
        good, bad = self._baseline()
        position = (median(values) - good) / (bad - good) + 0.0  # + 0.0: no "-0%"
        config.position = position
        config.epoch = self.epoch
        if position <= self.margin:
            config.outcome = GOOD
        elif position >= 1 - self.margin:
            config.outcome = BAD
        else:
            config.outcome = AMBIGUOUS
        return config.outcome

    def test(self, key: Key) -> str:
        config = self._config(key)
        if config.outcome is not None:  # the same subset is never measured twice against one baseline
            return config.outcome
        rounds = max(1, math.ceil(len(self._now_runs(config)) / self.repeat))
        runs_before = self.new_runs
        self.measure(config, rounds)
        outcome = self.classify(config)
        while outcome == AMBIGUOUS and rounds < 1 + MAX_EXTRA_ROUNDS:
            rounds += 1
            self.measure(config, rounds)
            outcome = self.classify(config)
        self._report(config)
        if self.new_runs > runs_before:  # measured now, not replayed from the journal
            self.since_check.append(key)
            if len(self.since_check) >= CHECK_EVERY:
                self.check_baseline()
        return outcome

    # -- drift ---------------------------------------------------------------------------
    def check_baseline(self) -> None:
        """Measure GOOD and BAD again. Still each on its own side of the margin: the configurations measured
        since the last check are confirmed, and the new runs join the baseline. Otherwise the baseline drifted
        (see the module docstring): Drifted when it cannot be trusted any more, else _Restart."""
        good, bad = self.configs[self.good_key], self.configs[self.bad_key]
        g0, b0 = self._baseline()
        n = self.repeat  # a configuration's worth of runs per side: the check costs two configurations
        after = len(self.order)
        fresh: Dict[Key, List[Dict[str, Any]]] = {}
        for config in (good, bad):
            before = len(config.runs)
            for i in range(n):
                self.progress(f"[check] {self._label(config)} again after {after} configurations: run {i + 1} of "
                              f"{n}{self._eta()}")
                self._run(config)
            fresh[config.key] = config.runs[before:]
        g_values, b_values = (_metric_values(fresh[k], self.metric) for k in (self.good_key, self.bad_key))
        g1 = median(g_values) if g_values else None  # None: every run of the check failed
        b1 = median(b_values) if b_values else None
        check: Dict[str, Any] = {"after_configurations": after, "good_before": g0, "bad_before": b0,
                                 "good": g1, "bad": b1}
        self.checks.append(check)
        gap = b0 - g0
        drifted = g1 is None or b1 is None or (g1 - g0) / gap > self.margin or (b1 - g0) / gap < 1 - self.margin
        check["drifted"] = drifted
        if not drifted:  # the new runs join the baseline
            self.progress(f"[check] GOOD {_num(g1)}, BAD {_num(b1)} (at the start of this baseline {_num(g0)}, "
                          f"{_num(b0)}): the {counted(len(self.since_check), 'configuration')} since the last check "
                          "stand")
            self.since_check = []
            return
        self.drifts += 1
        self.epoch += 1
        for runs in fresh.values():
            for run in runs:
                # The new baseline's first runs (in memory: a resumed bisect measures its latest baseline again).
                run["epoch"] = self.epoch
        what = (f"GOOD {_num(g0)} -> {_num(g1)}, BAD {_num(b0)} -> {_num(b1)} ({self.metric}) after "
                f"{after} configurations")
        # The new baseline: these runs and more, as at the start (at least BASELINE_MIN_RUNS a side, more rounds
        # while they do not separate).
        self.measure(good, 1, BASELINE_MIN_RUNS)
        self.measure(bad, 1, BASELINE_MIN_RUNS)
        rounds = 1
        while not self.distinguishable() and rounds < 1 + MAX_EXTRA_ROUNDS:
            rounds += 1
            self.measure(good, rounds, BASELINE_MIN_RUNS)
            self.measure(bad, rounds, BASELINE_MIN_RUNS)
        if not self.distinguishable():
            raise Drifted(f"GOOD and BAD drifted while bisect ran ({what}) and no longer separate beyond noise: "
                          "the machine's speed changed under the benchmark (load, clocks, a neighbour); quiet it "
                          "and run bisect again")
        if self.drifts > MAX_DRIFTS:
            raise Drifted(f"GOOD and BAD drifted {self.drifts} times while bisect ran (last: {what}): the machine's "
                          "speed keeps changing under the benchmark, so no configuration can be classed with "
                          "confidence; quiet it and run bisect again")
        suspects = [k for k in self.since_check if k not in (self.good_key, self.bad_key)]
        for key in suspects:
            config = self.configs[key]
            config.outcome, config.position, config.epoch = None, None, None
        self.current = list(self.names)
        self.since_check = []
        g2, b2 = self._baseline()
        self.progress(f"[check] the baseline drifted: {what}; GOOD {_num(g2)} and BAD {_num(b2)} are the new ends, "
                      f"and the {counted(len(suspects), 'configuration')} measured since the last check "
                          f"{'is' if len(suspects) == 1 else 'are'} measured again")
        raise _Restart()

    def settle(self, search: Callable[[], List[str]]) -> List[str]:
        """Run a search to its end with the baseline checked before its answer is given: after a drift it is
        replayed (the answers that still hold come from the cache)."""
        while True:
            try:
                found = search()
                if self.since_check:
                    self.check_baseline()  # before concluding
                return found
            except _Restart:
                continue

    def _report(self, config: Config) -> None:
        values = self.values(config)
        shown = f"median {median(values):.6g}" if values else "no measurement"
        where = f" ({config.position:.0%} of the way to BAD)" if config.position is not None else ""
        eta = self._eta()
        self.progress(f"[{self.order.index(config.key) + 1}] {self._label(config)} -> {shown}{where}: "
                      f"{config.outcome or 'measured'} | {self.total_runs} runs ({self.journal_runs} journaled){eta}")

    def _label(self, config: Config) -> str:
        label = config.label if len(config.label) <= 60 else config.label[:57] + "..."
        return label if config.key in (self.good_key, self.bad_key) else f"{len(config.key)} BAD: {label}"

    def _eta(self, config: Optional[Config] = None, target: int = 0) -> str:
        """', ~S s/run, ETA ~T' once a run of this bisect has been timed (journaled runs were not). S is the median
        of the latest runs, so the ETA follows a machine whose speed changes; T counts the re-measurements of
        GOOD and BAD (drift checks) too."""
        if not self.run_seconds:
            return ""
        per_run = median(self.run_seconds[-ETA_RECENT_RUNS:])
        runs = max(0, target - len(self._now_runs(config))) if config is not None else 0  # this configuration's
        good = self.configs.get(self.good_key)
        if good is None or good.outcome is None:  # GOOD and BAD still being measured
            for key in (self.good_key, self.bad_key):
                other = self.configs.get(key)
                if other is not config:
                    runs += max(0, self.repeat - (len(self._now_runs(other)) if other is not None else 0))
        # ddmin needs about 2·log2(k) more configurations for one cause among k deltas.
        configs_left = 2 * math.ceil(math.log2(len(self.current))) if len(self.current) > 1 else 0
        runs += self.repeat * configs_left
        checks = math.ceil((len(self.since_check) + configs_left) / CHECK_EVERY) if configs_left or self.since_check \
            else 0
        runs += checks * 2 * self.repeat
        runs = min(runs, max(0, self.max_runs - self.total_runs))
        return f", ~{per_run:.2g} s/run, ETA ~{_duration(runs * per_run)}"

    def distinguishable(self) -> bool:
        g = self.values(self.configs[self.good_key])
        b = self.values(self.configs[self.bad_key])
        if not g or not b:
            return False
        return noise.baselines(g, b, median(g), median(b))

    # -- the whole search --------------------------------------------------------------
    def baselines(self) -> None:
        good, bad = self._config(self.good_key), self._config(self.bad_key)
        rounds = 1
        while True:
            self.measure(good, rounds, BASELINE_MIN_RUNS)
            self.measure(bad, rounds, BASELINE_MIN_RUNS)
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

    def _tracked(self, key: Key) -> str:
        outcome = self.test(key)
        if outcome == BAD and len(key) < len(self.current):
            self.current = list(key)
        return outcome

    def search(self, first: Sequence[str] = ()) -> List[str]:
        """The minimal BAD set: plain ddmin, or, given the ranking's first candidate (a delta or a group of
        tied ones), that guess tested first (guided_search)."""
        guess = sorted(set(first) & set(self.names))
        if not guess or len(guess) == len(self.names):
            def plain() -> List[str]:
                self.path = {"guided": False, "steps": []}
                return ddmin(self.names, self._tracked)
            return self.settle(plain)
        return self.settle(lambda: self.guided_search(guess))

    def guided_search(self, guess: Sequence[str]) -> List[str]:
        """Test the guess before ddmin. GOOD plus the guess: BAD means it reproduces the slowdown alone, and
        ddmin within it (nothing more when it is one delta) is the answer. Otherwise BAD minus the guess says
        whether the rest reproduces it without the guess (BAD) or the guess is needed but not enough (GOOD: it
        acts together with something else); either way ddmin then searches every delta, as plain ddmin would,
        its tests that meet these two taken from the cache (and the journal): at most two configurations more
        than plain ddmin (ddmin over the rest alone partitions differently and can cost four more,
        benchmarks/bisect_runs.py)."""
        guess_key: Key = tuple(sorted(guess))
        rest_key: Key = tuple(sorted(n for n in self.names if n not in guess_key))
        steps: List[Dict[str, Any]] = []
        self.path = {"guided": True, "guess": list(guess_key), "steps": steps}
        plus = self._tracked(guess_key)
        steps.append({"test": "GOOD + guess", "bad_deltas": list(guess_key), "outcome": plus})
        if plus == BAD:
            self.path["result"] = "the guess reproduces BAD alone" + (
                ": ddmin within it" if len(guess_key) > 1 else "")
            return ddmin(list(guess_key), self._tracked) if len(guess_key) > 1 else list(guess_key)
        minus = self._tracked(rest_key)
        steps.append({"test": "BAD \u2212 guess", "bad_deltas": list(rest_key), "outcome": minus})
        if minus == BAD:
            self.path["result"] = "the rest reproduces BAD without the guess: ddmin over every delta"
        else:
            self.path["result"] = "the guess is needed but not enough (it acts with another delta): ddmin over " \
                                  "every delta"
        return ddmin(self.names, self._tracked)
