"""`envsnap bisect`: delta debugging over the environment and file differences of two snapshots."""
from __future__ import annotations

import json
import sys
from typing import Dict

import click

from envsnap.bisect import DEFAULT_MARGIN, DEFAULT_MAX_RUNS, DEFAULT_REPEAT
from envsnap.cli.options import FILE
from envsnap.measure import DEFAULT_RUN_TIMEOUT


@click.command()
@click.argument("good", metavar="GOOD", required=False, type=FILE)
@click.argument("bad", metavar="BAD", required=False, type=FILE)
@click.option("--repeat", "-n", default=DEFAULT_REPEAT, show_default=True, type=click.IntRange(1, 1000),
              help="Runs per configuration (its median is what counts).")
@click.option("--metric", metavar="NAME[=REGEX]",
              help="Metric to compare (default: the first run's throughput-like metric); NAME=REGEX also "
                   "defines it from the output, like `envsnap run --metric`. Regexes stored by `envsnap run "
                   "--metric` are reused.")
@click.option("--direction", type=click.Choice(["higher", "lower", "none"]),
              help="Which way is better for the metric (only for the wording; the search needs no direction).")
@click.option("--journal", type=click.Path(dir_okay=False),
              help="JSONL journal of every run [default: BAD's name with .bisect.jsonl, next to BAD]. "
                   "Re-running with the same journal resumes without repeating runs; file backups live "
                   "beside it (JOURNAL.backup/).")
@click.option("--max-runs", default=DEFAULT_MAX_RUNS, show_default=True, type=click.IntRange(1, 1_000_000),
              help="Stop after this many benchmark runs in all (journaled ones included).")
@click.option("--margin", default=DEFAULT_MARGIN, show_default=True, type=click.FloatRange(0.01, 0.49),
              help="A configuration whose median is within this fraction of the GOOD-BAD gap of one end "
                   "counts as that end; in between it is re-measured, then called ambiguous.")
@click.option("--run-timeout", default=DEFAULT_RUN_TIMEOUT, show_default=True, type=click.FloatRange(0.1, 7 * 86400),
              help="Seconds one run may take before it is killed and counted as failed.")
@click.option("--wheels", "wheel_dirs", multiple=True, type=click.Path(file_okay=False, exists=True),
              metavar="DIR", help="Directory of wheels (besides pip's cache) to take an installed file's "
                                  "pristine version from (repeatable).")
@click.option("--dry-run", is_flag=True,
              help="List every file that would be switched and every variable, then stop: nothing is run, "
                   "nothing is written.")
@click.option("--restore", "restore_only", is_flag=True,
              help="Put back the files a killed bisect left switched (found through --journal, or BAD's "
                   "default journal), then exit.")
@click.option("--by-file", is_flag=True,
              help="Switch each differing file whole; by default a file whose versions differ in several hunks "
                   "is switched hunk by hunk, so the result names the hunk.")
@click.option("--no-guess", is_flag=True,
              help="Plain ddmin: do not test the ranking's first candidate (GOOD plus it, BAD minus it) first.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.argument("command", nargs=-1, type=click.UNPROCESSED)
def bisect(good, bad, repeat, metric, direction, journal, max_runs, margin, run_timeout, wheel_dirs, dry_run,
           restore_only, by_file, no_guess, fmt, command) -> int:
    """Find which differences between GOOD and BAD cause the slowdown: variables and files.

    \b
    envsnap bisect good.json bad.json --repeat 3 -- ./bench.sh --its-own-flags
    envsnap bisect good.json bad.json --dry-run          # what would be switched
    envsnap bisect --restore --journal bad.bisect.jsonl  # after a kill -9

    Put `--` before COMMAND. Runs COMMAND with the GOOD environment and files plus subsets of
    the differences switched to BAD (Zeller's ddmin: O(log n) configurations for one cause, and
    interacting causes come out together); a file differing in several hunks is switched hunk by
    hunk (--by-file: whole). Files are switched by atomic replacement after a
    journaled backup and restored at the end, on Ctrl-C, SIGTERM, SIGHUP and SIGQUIT (a second
    signal waits for the restore), and by the next bisect (or --restore) after a kill -9; a file
    whose content is neither version is refused, never overwritten. GOOD and BAD are measured
    again every 4 configurations: a drifted baseline is said and re-measured against.
    GOOD and BAD are measured first; each configuration is classed by where its median falls
    between them. The first candidate of `envsnap diff`'s ranking (or its first tied group) is tested
    before ddmin: GOOD plus it, then, if that does not reproduce BAD, BAD minus it; ddmin goes on
    from what they showed (--no-guess: plain ddmin). Progress and ETA go to stderr. Exit 0: isolated (or --dry-run, --restore);
    1: not isolatable (indistinguishable, drifted, nothing to switch, --max-runs reached) or a file
    --restore had to leave; 2: bad input, a benchmark that never works, or a file that could
    not be switched or restored (a full disk, a read-only checkout: the line says which files are
    still switched); 130 on Ctrl-C, 128 + n on another signal.
    """
    from envsnap.errors import EnvsnapError

    if restore_only:
        return _restore(good, bad, journal, command)
    if not good or not bad:
        raise EnvsnapError("bisect needs GOOD and BAD snapshot files (or --restore)")

    from envsnap.bisect import interrupts

    # First, before the heavy imports: a signal from here on ends the bisect through one handler (restoring
    # whatever it switched), and its exit status names the signal.
    guard = interrupts.Guard().install()
    journal_box: Dict[str, str] = {}
    try:
        return _bisect(good, bad, repeat, metric, direction, journal, max_runs, margin, run_timeout, wheel_dirs,
                       dry_run, by_file, no_guess, fmt, command, journal_box)
    except interrupts.Interrupted as exc:
        late = guard.uninstall()
        _say(_interrupted_line(exc, journal_box.get("path"), late))
        raise SystemExit(exc.exit_code) from None
    finally:
        guard.uninstall()


def _bisect(good, bad, repeat, metric, direction, journal, max_runs, margin, run_timeout, wheel_dirs, dry_run,
            by_file, no_guess, fmt, command, journal_box: Dict[str, str]) -> int:
    from envsnap.bisect import command as command_mod
    from envsnap.format import printable
    from envsnap.measure.parsers import check_metric_name, parse_metric_specs
    from envsnap.redact import redact_text, scrub
    from envsnap.render.text import render_bisect

    custom = []
    metric_name = None
    if metric:
        if "=" in metric:
            custom = parse_metric_specs([metric])
            metric_name = custom[0][0]
        else:
            metric_name = check_metric_name(metric.strip(), f"--metric {metric!r}")
    directions = {metric_name: direction} if (direction and metric_name) else {}

    def progress(line: str) -> None:
        # Lines quote variables, files and the benchmark's own output: a credential never reaches the terminal.
        try:
            click.echo(printable(f"envsnap bisect: {redact_text(line)}"), err=True)
        except OSError:  # a terminal gone (SIGHUP) or a closed pipe: the bisect, and its restore, go on
            pass

    result = command_mod.run_bisect(
        good, bad, list(command), metric=metric_name, custom=custom, repeat=repeat, margin=margin,
        max_runs=max_runs, journal_path=journal, timeout=run_timeout, directions=directions,
        progress=progress, on_journal=lambda j: journal_box.update(path=j.path),
        wheels=list(wheel_dirs), dry_run=dry_run, by_file=by_file, guess=not no_guess,
    )
    if direction and result.get("metric") and not metric_name:
        result["direction"] = direction
    if fmt == "json":
        click.echo(json.dumps(scrub(result), sort_keys=True, indent=1, ensure_ascii=False))
    else:
        click.echo(redact_text(render_bisect(result)))
    sys.stdout.flush()
    return int(result["exit_code"])


def _restore(good, bad, journal, command) -> int:
    from envsnap.bisect import command as command_mod
    from envsnap.bisect.journal import default_journal_path
    from envsnap.errors import EnvsnapError
    from envsnap.format import printable

    if command:
        raise EnvsnapError("--restore takes no benchmark command")
    snapshot = bad or good  # `--restore BAD` names BAD alone
    path = journal or (default_journal_path(snapshot) if snapshot else None)
    if path is None:
        raise EnvsnapError("--restore needs --journal FILE (or GOOD and BAD, for BAD's default journal)")
    import os

    from envsnap.redact import redact_text

    look_in = [os.path.dirname(os.path.abspath(p)) for p in (bad, good) if p]
    lines, code = command_mod.restore_files(path, look_in)
    for line in lines:
        click.echo(printable(f"envsnap bisect: {redact_text(line)}"))
    return int(code)


def _interrupted_line(exc, journal_path, late) -> str:
    """One true line about a bisect a signal stopped: where its switched files are, and how to go on."""
    import os

    from envsnap.bisect import command as command_mod
    from envsnap.bisect.applier import backup_dir_for, still_switched

    files = getattr(exc, "files", None)
    if files is not None or not journal_path:
        where = command_mod.files_sentence(files, journal_path or "")
    else:  # stopped outside the search (loading, printing the result): read the manifest
        still = still_switched(backup_dir_for(journal_path))
        where = (command_mod.files_sentence({"switched": len(still), "still_switched": still}, journal_path)
                 if still else "no file is left switched")
    line = f"interrupted by {exc.name}"
    if late:
        line += f" ({' and '.join(late)} came during the restore and waited for it)"
    line += f": {where}"
    if journal_path and os.path.exists(journal_path):
        line += f"; finished runs are in {journal_path}: run the same command again to resume"
    return line


def _say(line: str) -> None:
    from envsnap.redact import redact_text

    try:
        click.echo(f"envsnap: error: {redact_text(line)}", err=True)
    except OSError:  # SIGHUP: the terminal may be gone
        pass
