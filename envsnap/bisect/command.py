"""`envsnap bisect` as a whole: load, plan, restore what a killed bisect left, search, restore.

Order of a bisect, and why:
1. the snapshots' differences: environment variables (deltas.py) and files (files.py), the
   files resolved read-only against this machine; a file differing in several hunks is searched
   hunk by hunk (hunks.py), unless --by-file;
2. files an earlier bisect with this journal left switched (it was killed: no chance to
   restore) are restored first, and that is said — before anything is compared with disk;
3. `--dry-run` stops here: every file that would be touched and every variable, nothing
   written (not even the journal);
4. the journal (journal.py), then the search (search.py), the files switched per
   configuration by applier.py and restored whatever happens (exit, Ctrl-C, an error);
5. the result (outcome.py), with the commands to keep only the minimal set.
Metric definitions: `envsnap run --metric NAME=REGEX` stores its regexes with the run
session; `bisect --metric NAME` (or no --metric) reuses them, so the benchmark's output is
read the way the snapshots' runs were.
"""
from __future__ import annotations

import fnmatch
import os
import re
import shlex
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

from envsnap.bisect import DEFAULT_MARGIN, DEFAULT_MAX_RUNS, DEFAULT_REPEAT, hunks as hunks_mod, interrupts, outcome
from envsnap.bisect.applier import (
    MANIFEST,
    FileApplier,
    RestoreReport,
    backup_dir_for,
    counted,
    restore_command,
    restore_dir,
    still_switched,
)
from envsnap.bisect.deltas import collect_deltas
from envsnap.bisect.files import collect_file_deltas
from envsnap.bisect.journal import (
    JOURNAL_VERSION,
    Journal,
    JournalWriteFailed,
    _sha,
    default_journal_path,
)
from envsnap.bisect.search import Bisector, BudgetExhausted, Drifted, NotDistinguishable
from envsnap.bisect.sources import WheelFinder, pip_cache_dir
from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.errors import EnvsnapError
from envsnap.measure import DEFAULT_RUN_TIMEOUT, metrics as metrics_mod
from envsnap.measure.parsers import MetricSpec, parse_metric_specs
from envsnap.measure.runs import result_files, result_patterns, stored_metric_regexes
from envsnap.model import store
from envsnap.redact import redact_argv, redact_text
from envsnap.subproc import command_problem

_REDACTED = re.compile(r"redacted:[0-9a-f]{8}")


# ---------------------------------------------------------------------------------------
# Metric definitions stored with the snapshots' runs
# ---------------------------------------------------------------------------------------

def reuse_metric_specs(good: Mapping[str, Any], bad: Mapping[str, Any], metric: Optional[str],
                       custom: Sequence[MetricSpec]) -> Tuple[List[MetricSpec], List[str]]:
    """The regexes `envsnap run --metric NAME=REGEX` stored, for the names bisect will read.

    With --metric NAME=REGEX given, that wins. With --metric NAME, NAME's stored regex; with no
    --metric, every stored one. A name whose regexes differ between GOOD and BAD, or that was
    stored redacted, is refused (one line naming --metric NAME=REGEX).
    """
    if custom:
        return list(custom), []
    stored: Dict[str, Dict[str, str]] = {}
    for label, snap in (("GOOD", good), ("BAD", bad)):
        for name, regex in stored_metric_regexes(snap).items():
            stored.setdefault(name, {})[label] = regex
    names = [metric] if metric else sorted(stored)
    specs: List[MetricSpec] = []
    notes = []
    for name in names:
        regexes = stored.get(name)
        if not regexes:
            continue
        if len(set(regexes.values())) > 1:
            raise EnvsnapError(f"GOOD and BAD were measured with different regexes for {name!r} "
                               f"({regexes['GOOD']!r} vs {regexes['BAD']!r}): give --metric {name}=REGEX")
        regex = next(iter(regexes.values()))
        if _REDACTED.search(regex):
            raise EnvsnapError(f"the regex stored for {name!r} was redacted (it looked like a secret): give "
                               f"--metric {name}=REGEX")
        specs.extend(parse_metric_specs([f"{name}={regex}"], option="stored metric"))
        notes.append(f"metric {name} is read with the regex its runs were measured with: {regex}")
    return specs, notes


# ---------------------------------------------------------------------------------------
# Restoring
# ---------------------------------------------------------------------------------------

def restore_files(journal_path: str, look_in: Sequence[str] = ()) -> Tuple[List[str], int]:
    """`envsnap bisect --restore`: (lines to print, exit code). A journal that does not exist (and has no
    backups beside it) is bad input: EnvsnapError naming the journals with switched files found in its
    directory, `look_in` and the current one."""
    journal_path = os.path.abspath(journal_path)
    directory = backup_dir_for(journal_path)
    if not os.path.lexists(journal_path) and not os.path.isdir(directory):
        raise EnvsnapError(f"journal {journal_path} does not exist, so nothing was restored; "
                           + _where_journals_are([os.path.dirname(journal_path), *look_in, os.getcwd()]))
    with interrupts.held():
        report = restore_dir(directory)
    if report is None:
        return [f"nothing to restore: no files were left switched by a bisect with journal {journal_path}"], 0
    lines = [_restored_line(report, directory)]
    lines.extend(report.lines())
    return lines, 0 if report.clean else 1


def _where_journals_are(directories: Sequence[str]) -> str:
    """Which journals hold switched files (their backup directories, JOURNAL.backup/), in these
    directories: the commands that restore them, or where a journal is when none is found."""
    seen: List[str] = []
    for directory in directories:
        real = os.path.realpath(directory)
        if real not in seen and os.path.isdir(real):
            seen.append(real)
    found: List[str] = []
    for directory in seen:
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            backup = os.path.join(directory, name)
            if name.endswith(".backup") and os.path.isfile(os.path.join(backup, MANIFEST)):
                switched = still_switched(backup)
                what = (f"{counted(len(switched), 'file')} still switched: {', '.join(switched[:5])}"
                        + (", ..." if len(switched) > 5 else "")) if switched else "no file still switched"
                found.append(f"`{restore_command(backup)}` ({what})")
    where = ", ".join(seen)
    if found:
        return f"bisect backups found in {where}: " + "; ".join(found)
    return (f"no bisect backups (JOURNAL.backup/) in {where}: a bisect's journal is the --journal it was given, "
            "else <BAD name>.bisect.jsonl next to BAD (`envsnap bisect --restore BAD` names that one), and its "
            "switched files' backups are beside it in JOURNAL.backup/")


def _restored_line(report: RestoreReport, directory: str) -> str:
    n = len(report.restored) + len(report.unchanged)
    text = f"restored {counted(len(report.restored), 'file')} an interrupted bisect had switched"
    if report.unchanged:
        text += f" ({len(report.unchanged)} more {'was' if len(report.unchanged) == 1 else 'were'} already as before)"
    if n == 0 and not report.left and not report.failed:
        text = "nothing was switched yet by the interrupted bisect"
    return text + f" (backups were in {directory})"


# ---------------------------------------------------------------------------------------
# The bisect
# ---------------------------------------------------------------------------------------

def run_bisect(
    good_path: str,
    bad_path: str,
    command: Sequence[str],
    *,
    metric: Optional[str] = None,
    custom: Sequence[MetricSpec] = (),
    repeat: int = DEFAULT_REPEAT,
    margin: float = DEFAULT_MARGIN,
    max_runs: int = DEFAULT_MAX_RUNS,
    journal_path: Optional[str] = None,
    timeout: float = DEFAULT_RUN_TIMEOUT,
    directions: Optional[Mapping[str, str]] = None,
    environ: Optional[Mapping[str, str]] = None,
    progress: Optional[Callable[[str], None]] = None,
    on_journal: Optional[Callable[[Journal], None]] = None,
    wheels: Sequence[str] = (),
    dry_run: bool = False,
    by_file: bool = False,
    guess: bool = True,
) -> Dict[str, Any]:
    """Load both snapshots, search, and return the result (see README: `envsnap bisect`)."""
    if not command and not dry_run:
        raise EnvsnapError("bisect needs the benchmark command after --")
    problem = None if dry_run else command_problem(command, env=os.environ if environ is None else environ)
    if problem:  # before anything is loaded, journaled or switched
        raise EnvsnapError(f"cannot run the benchmark: {problem}")
    if not 0 < margin < 0.5:
        raise EnvsnapError(f"--margin {margin}: must be between 0 and 0.5 (a fraction of the GOOD-BAD gap)")
    if "-" in (good_path, bad_path):
        raise EnvsnapError("bisect reads two snapshot files; '-' (stdin) is not supported here")
    say = progress or (lambda line: None)
    good = store.load(good_path, shapes=SECTION_SHAPES)
    bad = store.load(bad_path, shapes=SECTION_SHAPES)
    for path, snap in ((good_path, good), (bad_path, bad)):
        nodes = snap.get("nodes")
        if isinstance(nodes, dict) and nodes:
            # Its top-level sections are empty: bisecting it would find nothing to switch, silently.
            raise EnvsnapError(f"{path} is a merged multi-node snapshot ({', '.join(nodes)}): bisect switches "
                               "variables and files on this machine, so give it this node's own snapshot "
                               "(the one `envsnap merge` read)")
    environ = dict(os.environ if environ is None else environ)
    custom, metric_notes = reuse_metric_specs(good, bad, metric, custom)
    delta_set = collect_deltas(good, bad, environ)
    journal_path = os.path.abspath(journal_path or default_journal_path(bad_path))
    backup_dir = backup_dir_for(journal_path)
    notes: List[str] = []

    if not dry_run:
        with interrupts.held():
            report = restore_dir(backup_dir)
        if report is not None:
            line = _restored_line(report, backup_dir) + ", before starting"
            say(line)
            notes.append(line)
            if not report.clean:
                raise EnvsnapError("; ".join(report.lines()) + ": look at it, then run bisect again")
    elif os.path.isdir(backup_dir):
        notes.append(f"an interrupted bisect left files switched (backups in {backup_dir}): `envsnap bisect "
                     "--restore` puts them back; a real run restores them first")

    file_set = collect_file_deltas(good, bad, WheelFinder(wheels, pip_cache_dir(environ)))
    _leave_benchmark_outputs(file_set, command)
    for delta in file_set.refused:
        say(f"{delta.name}: {delta.note}")
    env_deltas, file_deltas = delta_set.applicable, file_set.applicable
    # A file whose versions differ in several hunks is searched hunk by hunk (hunks.py), unless --by-file.
    units, splits, split_notes = (list(file_deltas), {}, []) if by_file else hunks_mod.split_all(file_deltas)
    hunk_units = [u for u in units if isinstance(u, hunks_mod.HunkDelta)]
    spec = ";".join(f"{name}={regex.pattern}" for name, regex in custom) if custom else (metric or "")
    header = {
        "version": JOURNAL_VERSION,
        "good_file": os.path.abspath(good_path),
        "bad_file": os.path.abspath(bad_path),
        "deltas": sorted([d.name for d in env_deltas] + [redact_text(d.name) for d in units]),
        # Files join the identity only when there are some: an env-only journal keeps its hash; hunks
        # only when a file is split (a journal of whole files keeps its hash too).
        "deltas_sha256": _sha([[d.name, d.good, d.bad] for d in env_deltas]
                              + [[d.name, d.good.sha256, d.bad.sha256, d.good.present, d.bad.present]
                                 for d in file_deltas]
                              + [[h.name, h.index, h.of] for h in hunk_units]),
        "command": redact_argv(command),
        "command_sha256": _sha(list(command)),
        "metric": spec,
        "repeat": repeat,
        "created": _now(),
    }
    overrides: Dict[str, str] = {}
    for snap in (good, bad):
        stored = snap.get("metric_directions")
        if isinstance(stored, dict):
            overrides.update({k: v for k, v in stored.items() if v in metrics_mod.DIRECTIONS})
    overrides.update(directions or {})

    result: Dict[str, Any] = {
        "schema_version": outcome.RESULT_SCHEMA_VERSION,
        "good": outcome.side(good, good_path),
        "bad": outcome.side(bad, bad_path),
        "command": redact_argv(command),
        "repeat": repeat,
        "margin": margin,
        "journal": journal_path,
        "deltas": {
            "total": len(env_deltas) + len(delta_set.not_applicable) + len(units)
            + len(file_set.not_applicable) + len(file_set.refused),
            "applied": [d.public() for d in env_deltas],
            "not_applicable": [d.public() for d in delta_set.not_applicable],
            "files": [d.public() for d in file_deltas],
            "hunks": [h.public() for h in hunk_units],
            "files_not_applicable": [d.public() for d in file_set.not_applicable],
            "files_refused": [d.public() for d in file_set.refused],
        },
        "notes": notes + metric_notes + list(delta_set.notes) + file_set.notes + split_notes + [
            "bisect switches environment variables and files whose GOOD and BAD versions it can re-create; "
            "package versions, drivers, GPU settings and commits cannot be switched per run (see `envsnap "
            "diff` for all differences)"],
        "minimal": [],
        "one_minimal": False,
        "configurations": [],
    }
    n_files, n_env, n_hunks = len(units) - len(hunk_units), len(env_deltas), len(hunk_units)
    what = f"{counted(n_files, 'file')}, " + (f"{counted(n_hunks, 'hunk')} of {counted(len(splits), 'file')}, "
                                              if n_hunks else "")
    if dry_run:
        return outcome.finish(result, "dry_run", 0, f"would search {counted(len(units) + n_env, 'delta')} ({what}"
                              f"{counted(n_env, 'variable')}); nothing was run or written", None, overrides)
    if not env_deltas and not file_deltas:
        anything = delta_set.not_applicable or file_set.not_applicable or file_set.refused
        why = ("no environment variable or file differs between GOOD and BAD in a way bisect can see"
               if not anything else "no differing variable or file can be re-applied (see 'not applicable')")
        return outcome.finish(result, "no_deltas", 1, why, None, overrides)

    try:
        journal = Journal(journal_path, header).open()
    except JournalWriteFailed as exc:
        raise EnvsnapError(f"{exc}; no file was switched") from None
    if on_journal:
        on_journal(journal)
    if journal.replaced:
        line = (f"replaced journal {journal_path}: it belonged to a different bisect ({journal.replaced}) "
                "that had completed no configuration")
        say(line)
        result["notes"].append(line)
    applier = FileApplier(backup_dir, file_deltas, splits=splits) if file_deltas else None
    bisector = Bisector(env_deltas, command, journal, file_deltas=units,
                        apply_files=applier.apply if applier else None, metric=metric, custom=custom,
                        repeat=repeat, margin=margin, max_runs=max_runs, timeout=timeout, environ=environ,
                        progress=progress)
    if file_deltas:
        say(f"switching {counted(len(file_deltas), 'file')} per configuration; each is backed up in {backup_dir} before it "
            f"is first touched and restored at the end (after a kill -9: envsnap bisect --restore "
            f"--journal {journal_path})")
    if journal.runs:
        say(f"resuming from {journal_path}: {counted(len(journal.runs), 'journaled run')} will not be repeated")
    if journal.dropped_partial:
        result["notes"].append("the journal's last line was incomplete (an interrupted write) and was dropped")
    say(f"searching {counted(len(units) + n_env, 'delta')} ({what}{counted(n_env, 'variable')}): GOOD and BAD "
        f"first, {counted(repeat, 'run')} "
        f"each, of `{shlex.join(redact_argv(command))}`")
    first: List[str] = []
    if guess:
        from envsnap.bisect.guess import first_candidate

        candidate = first_candidate(good, bad, env_deltas, units)
        if candidate is not None:
            first = candidate["deltas"]
            result["guess"] = candidate
    files: Optional[Dict[str, Any]] = None
    try:
        try:
            finished = _search(result, bisector, overrides, max_runs, delta_set, file_set, first)
        finally:
            with interrupts.held():  # a signal now waits until every file is back
                journal.close()
                files = _restore_after(applier, say, journal_path)
    except BaseException as exc:
        if files is None:  # a signal came before the restore could start: it blocked the others, restore now
            with interrupts.held():
                files = _restore_after(applier, say, journal_path)
        if isinstance(exc, interrupts.Interrupted):
            exc.files = files  # type: ignore[attr-defined]  # the CLI's message says where they are
            raise
        if isinstance(exc, EnvsnapError):
            raise EnvsnapError(f"{exc}; {files_sentence(files, journal_path)}") from None
        raise
    if applier is not None:
        finished["files_restore"] = {k: v for k, v in files.items() if k != "lines"}
        if files["not_restored"] or files["still_switched"]:
            finished["exit_code"] = 2
            finished["notes"].extend(files["lines"])
    if finished["status"] == "isolated":
        minimal = [d["name"] for d in finished["minimal"]]
        finished["keep"] = outcome.keep_plan(minimal, env_deltas, file_deltas, journal_path + ".keep", splits)
    return finished


def _leave_benchmark_outputs(file_set: Any, command: Sequence[str]) -> None:
    """A file the benchmark itself appends to (bench_serving's --output-file, ...) differs between
    two captures for that reason alone: switching it would make every run look like a user's edit."""
    outputs = {os.path.realpath(p) for p in result_files(command, os.getcwd())}
    patterns = result_patterns(command, os.getcwd())  # bench_serving's default-named result files

    def written_by_benchmark(path: str) -> bool:
        real = os.path.realpath(path)
        return real in outputs or any(fnmatch.fnmatch(real, pattern) for pattern in patterns)

    for group in (file_set.applicable, file_set.refused):
        for delta in [d for d in group if written_by_benchmark(d.name)]:
            group.remove(delta)
            delta.applicable, delta.current = False, None
            delta.note = "the benchmark command writes it (its result file): not switched"
            file_set.not_applicable.append(delta)
    file_set.not_applicable.sort(key=lambda d: d.name)


def _search(result: Dict[str, Any], bisector: Bisector, overrides: Mapping[str, str], max_runs: int, delta_set: Any,
            file_set: Any, first: Sequence[str] = ()) -> Dict[str, Any]:
    try:
        bisector.baselines()
    except NotDistinguishable:
        unswitched = []
        if delta_set.not_applicable:
            unswitched.append(f"{len(delta_set.not_applicable)} variables that could not be re-applied")
        if file_set.not_applicable or file_set.refused:
            unswitched.append(f"{len(file_set.not_applicable) + len(file_set.refused)} files that could not be "
                              "switched")
        tail = f"; the cause may be among what bisect cannot switch: {', '.join(unswitched)}" if unswitched else ""
        return outcome.finish(result, "not_distinguishable", 1,
                              "GOOD and BAD are not distinguishable beyond noise on this machine: the slowdown "
                              "does not reproduce through the variables and files bisect switches (or needs "
                              "more --repeat)" + tail, bisector, overrides)
    except BudgetExhausted:
        return outcome.finish(result, "budget_exhausted", 1,
                              f"stopped after --max-runs {max_runs} runs while measuring GOOD and BAD",
                              bisector, overrides)
    guess = result.get("guess")
    if guess and len(first) < len(bisector.names):
        bisector.progress(f"testing the ranking's first candidate first (rank {guess['rank']}: "
                          f"{', '.join(guess['keys'])}), then ddmin if it does not reproduce the split")
    try:
        minimal = bisector.search(first)
    except Drifted as exc:
        return outcome.finish(result, "drifted", 1, exc.message, bisector, overrides)
    except BudgetExhausted:
        return outcome.finish(result, "budget_exhausted", 1,
                              f"stopped after --max-runs {max_runs} runs before the set was minimal; the "
                              f"smallest BAD set found so far has {len(bisector.current)} deltas",
                              bisector, overrides, minimal=bisector.current)
    return outcome.finish(result, "isolated", 0, "", bisector, overrides, minimal=minimal)


def _restore_after(applier: Optional[FileApplier], say: Callable[[str], None], journal_path: str) -> Dict[str, Any]:
    """Put every switched file back and say so (stderr); what happened, as data. Idempotent: a second call
    finds nothing left to do."""
    summary: Dict[str, Any] = {"switched": 0, "writes": 0, "restored": 0, "not_restored": [], "still_switched": [],
                               "lines": []}
    if applier is None:
        return summary
    summary.update(switched=len(applier.touched), writes=applier.writes)
    try:
        report = applier.restore()
    except OSError as exc:
        still = still_switched(applier.directory)
        line = (f"could not restore the switched files ({exc.strerror or exc}): "
                + (f"still switched: {', '.join(still)}: run `{restore_command(applier.directory)}`"
                   if still else "none is left switched"))
        say(line)
        summary.update(still_switched=still, lines=[line],
                       not_restored=[{"file": p, "why": f"cannot restore: {exc.strerror or exc}"} for p in still])
        return summary
    if report is None:
        return summary
    # Of the files it switched (a file backed up but never written was not), those now as before.
    summary["restored"] = len(applier.touched & set(report.restored + report.unchanged))
    summary["not_restored"] = [{"file": p, "why": w} for p, w in report.left + report.failed]
    summary["still_switched"] = [p for p, _ in report.failed]
    summary["lines"] = report.lines()
    for line in report.lines():
        say(line)
    if report.clean and summary["switched"]:
        say(f"restored the {counted(summary['restored'], 'switched file')} byte for byte (mode and times too)")
    return summary


def files_sentence(files: Optional[Mapping[str, Any]], journal_path: str) -> str:
    """Where the files a stopped bisect switched are now, in words that are true: none switched, all back,
    or which are still switched and the command that puts them back."""
    if not files or not files.get("switched"):
        return "no file was switched"
    still = list(files.get("still_switched") or [])
    if still:
        return (f"{counted(len(still), 'file')} still switched: {', '.join(still)}: run "
                f"`{restore_command(backup_dir_for(journal_path))}`")
    left = [e for e in files.get("not_restored") or [] if e["file"] not in still]
    restored = int(files.get("restored") or 0)
    back = f"{counted(restored, 'switched file')} restored byte for byte" if restored else "no file is left switched"
    if left:
        return back + f"; {counted(len(left), 'file')} changed by someone else left as they are: " + \
            ", ".join(str(e["file"]) for e in left)
    return back


def _now() -> str:
    from envsnap.model.snapshot import utc_now

    return utc_now()
