"""`envsnap attach`: add a measurement made elsewhere to a snapshot."""
from __future__ import annotations

import os

import click

from envsnap.cli.options import FILE


@click.command()
@click.argument("snapshot_file", metavar="FILE", type=FILE)
@click.option("--metric", "metric_values", multiple=True, required=True, metavar="NAME=VALUE",
              help="A measured value, e.g. verify_ms=29 (repeatable).")
@click.option("--note", help="Where the measurement comes from (kept with it).")
@click.option("--direction", "direction_specs", multiple=True, metavar="NAME=higher|lower|none",
              help="Which way is better for a metric, when its name does not say (repeatable).")
def attach(snapshot_file, metric_values, note, direction_specs) -> None:
    """Add a measurement made elsewhere (a profiler, a dashboard) to snapshot FILE.

    The file is rewritten in place, atomically: it is valid at every moment.
    """
    from envsnap.cli.options import load_snapshot
    from envsnap.errors import EnvsnapError
    from envsnap.measure import runs
    from envsnap.model import store

    if snapshot_file == "-":
        raise EnvsnapError("attach rewrites a snapshot file; '-' (stdin) cannot be rewritten")
    values = runs.parse_metric_values(metric_values)
    directions = runs.parse_direction_specs(direction_specs)
    snap = load_snapshot(snapshot_file)
    snap.setdefault("runs", []).append(runs.attach_record(values, note))
    runs.merge_directions(snap, directions)
    # Through a symlink, rewrite its target rather than replacing the link with a file.
    store.save(snap, os.path.realpath(snapshot_file), force=True)
    names = ", ".join(f"{k}={v:g}" for k, v in sorted(values.items()))
    click.echo(f"attached {names} to {snapshot_file} ({len(snap['runs'])} runs)", err=True)
