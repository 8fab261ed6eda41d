"""`envsnap attach`: add a measurement made elsewhere to a snapshot."""
from __future__ import annotations

import os

import click

from envsnap.cli.options import FILE
from envsnap.format import plural


@click.command()
@click.argument("snapshot_file", metavar="FILE", type=FILE)
@click.option("--metric", "metric_values", multiple=True, metavar="NAME=VALUE",
              help="A measured value, e.g. verify_ms=29 (repeatable).")
@click.option("--trace", "trace_files", multiple=True, type=click.Path(exists=True, dir_okay=False), metavar="FILE",
              help="A profiler trace made elsewhere (Chrome/Kineto .json or .json.gz; one per rank, "
                   "repeatable): its summary is attached with the measurement.")
@click.option("--steps", "trace_steps", type=click.IntRange(1), metavar="N",
              help="How many steps the --trace files cover, when they carry no step markers.")
@click.option("--note", help="Where the measurement comes from (kept with it).")
@click.option("--direction", "direction_specs", multiple=True, metavar="NAME=higher|lower|none",
              help="Which way is better for a metric, when its name does not say (repeatable).")
def attach(snapshot_file, metric_values, trace_files, trace_steps, note, direction_specs) -> None:
    """Add a measurement made elsewhere (a profiler, a dashboard) to snapshot FILE.

    The file is rewritten in place, atomically: it is valid at every moment. A --trace is read
    and summarised (kernels, CPU ops, launches, steps); the trace itself is not stored.
    """
    from envsnap.cli.options import load_snapshot, say
    from envsnap.errors import EnvsnapError
    from envsnap.measure import runs
    from envsnap.model import store

    if snapshot_file == "-":
        raise EnvsnapError("attach rewrites a snapshot file; '-' (stdin) cannot be rewritten")
    if not metric_values and not trace_files:
        raise EnvsnapError("attach needs --metric NAME=VALUE or --trace FILE")
    values = runs.parse_metric_values(metric_values)
    directions = runs.parse_direction_specs(direction_specs)
    trace = None
    if trace_files:
        from envsnap.measure.trace_runs import summarize_files

        trace = summarize_files(list(trace_files), "attach", trace_steps)
        if not trace["files"]:
            raise EnvsnapError(trace["notes"][0])
    # Through a symlink, rewrite its target rather than replacing the link with a file.
    target = os.path.realpath(snapshot_file)
    # Read, add, write while holding the file: another attach to it waits its turn and adds to this one's
    # result, instead of writing back what it read before this one wrote.
    with store.updating(target):
        snap = load_snapshot(target)
        snap.setdefault("runs", []).append(runs.attach_record(values, note, trace=trace))
        runs.merge_directions(snap, directions)
        store.save(snap, target, force=True)
    names = ", ".join([f"{k}={v:g}" for k, v in sorted(values.items())]
                      + [f"{len(trace['files'])} trace file(s)" for _ in [0] if trace])
    say(f"attached {names} to {snapshot_file} ({plural(len(snap['runs']), 'run')})")
