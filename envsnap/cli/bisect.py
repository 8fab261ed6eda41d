"""`envsnap bisect`: delta debugging over the environment differences of two snapshots."""
from __future__ import annotations

import json
import sys

import click


@click.command()
@click.argument("good", metavar="GOOD")
@click.argument("bad", metavar="BAD")
@click.option("--repeat", "-n", default=3, show_default=True, type=click.IntRange(1, 1000),
              help="Runs per configuration (its median is what counts).")
@click.option("--metric", metavar="NAME[=REGEX]",
              help="Metric to compare (default: the first run's throughput-like metric); NAME=REGEX also "
                   "defines it from the output, like `envsnap run --metric`.")
@click.option("--direction", type=click.Choice(["higher", "lower", "none"]),
              help="Which way is better for the metric (only for the wording; the search needs no direction).")
@click.option("--journal", type=click.Path(dir_okay=False),
              help="JSONL journal of every run [default: BAD's name with .bisect.jsonl, next to BAD]. "
                   "Re-running with the same journal resumes without repeating runs.")
@click.option("--max-runs", default=200, show_default=True, type=click.IntRange(1, 1_000_000),
              help="Stop after this many benchmark runs in all (journaled ones included).")
@click.option("--margin", default=0.25, show_default=True, type=click.FloatRange(0.01, 0.49),
              help="A configuration whose median is within this fraction of the GOOD-BAD gap of one end "
                   "counts as that end; in between it is re-measured, then called ambiguous.")
@click.option("--run-timeout", default=3600.0, show_default=True, type=click.FloatRange(0.1, 7 * 86400),
              help="Seconds one run may take before it is killed and counted as failed.")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def bisect(good, bad, repeat, metric, direction, journal, max_runs, margin, run_timeout, fmt, command) -> int:
    """Find which environment differences between GOOD and BAD cause the slowdown.

    \b
    envsnap bisect good.json bad.json --repeat 3 -- ./bench.sh --its-own-flags

    Put `--` before COMMAND. Runs COMMAND with the GOOD environment plus subsets of the differing variables
    switched to their BAD values (Zeller's ddmin: O(log n) configurations for one cause,
    and interacting causes come out together). GOOD and BAD are measured first; each
    configuration is classed by where its median falls between them. Progress and ETA go
    to stderr. Exit 0: isolated; 1: not isolatable (GOOD and BAD indistinguishable,
    nothing to switch, --max-runs reached); 2: bad input or a benchmark that never works.
    """
    from envsnap.analysis.bisect import search
    from envsnap.measure.parsers import check_metric_name, parse_metric_specs
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
        click.echo(f"envsnap bisect: {line}", err=True)

    journal_box = {}
    try:
        result = search.run_bisect(
            good, bad, list(command), metric=metric_name, custom=custom, repeat=repeat, margin=margin,
            max_runs=max_runs, journal_path=journal, timeout=run_timeout, directions=directions,
            progress=progress, on_journal=lambda j: journal_box.setdefault("path", j.path),
        )
    except KeyboardInterrupt:
        if "path" in journal_box:
            click.echo(f"envsnap bisect: interrupted; finished runs are in {journal_box['path']}: run the same "
                       "command again to resume", err=True)
        raise
    if direction and result.get("metric") and not metric_name:
        result["direction"] = direction
    if fmt == "json":
        click.echo(json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False))
    else:
        click.echo(render_bisect(result))
    sys.stdout.flush()
    return int(result["exit_code"])
