"""`envsnap rank`: N measured snapshots -> association of each varying key with the metric."""
from __future__ import annotations

from typing import Optional, Tuple

import click

from envsnap.cli.options import emit, load_snapshot
from envsnap.errors import EnvsnapError


@click.command(name="rank")
@click.argument("snapshot_files", metavar="SNAP...", nargs=-1, required=True)
@click.option("--metric", default=None, help="Metric to explain (default: the throughput metric all runs have).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", default=None, help="Write to this file instead of stdout (atomic).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show only the N strongest associations.")
def rank_command(snapshot_files: Tuple[str, ...], metric: Optional[str], fmt: str, output: Optional[str],
                 force: bool, top: Optional[int]) -> None:
    """Rank keys that vary across N >= 3 measured snapshots by association with the metric.

    Each key's snapshots are grouped by its value; the score is the share of the metric's
    variance the grouping explains (eta squared), with a permutation p-value.
    """
    from envsnap.analysis import association
    from envsnap.model import store

    if output and output != "-":
        store.check_writable(output, force)
    if len(snapshot_files) < 3:
        raise EnvsnapError(f"rank needs at least 3 snapshots with runs, got {len(snapshot_files)} "
                           "(use `envsnap diff GOOD BAD` for two)")
    if sum(1 for f in snapshot_files if f == "-") > 1:
        raise EnvsnapError("only one snapshot can be read from stdin ('-')")
    snaps = [load_snapshot(f) for f in snapshot_files]
    result = association.associate(snaps, list(snapshot_files), metric=metric)
    if top:  # the N strongest units: a group of keys that cannot be told apart counts once
        result["associations"] = [a for a in result["associations"] if a["rank"] <= top]
        result["confounded"] = [g for g in result.get("confounded", []) if g["rank"] <= top]
    if fmt == "json":
        import json

        text = json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    else:
        from envsnap.render.text import render_rank

        text = render_rank(result)
    emit(text, output, force)
