"""`envsnap rank`: N measured snapshots -> association of each varying key with the metric."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import click

from envsnap.cli.options import FILE, emit, load_snapshot
from envsnap.errors import EnvsnapError


@click.command(name="rank")
@click.argument("snapshot_files", metavar="SNAP...", nargs=-1, required=True, type=FILE)
@click.option("--metric", default=None, help="Metric to explain (default: the throughput metric all runs have).")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option("-o", "--output", default=None, type=FILE, help="Write to this file instead of stdout (atomic).")
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
    _refuse_repeats(snapshot_files)
    snaps = [load_snapshot(f) for f in snapshot_files]
    _refuse_copies(snaps, snapshot_files)
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


def _refuse_repeats(paths: Tuple[str, ...]) -> None:
    """One file named twice (or through a link) would count its runs twice: bad input, before loading."""
    import os

    seen: Dict[Tuple[int, int], str] = {}
    for path in paths:
        if path == "-":
            continue
        try:
            st = os.stat(path)
        except OSError:
            continue  # the loader names what is wrong with it
        first = seen.get((st.st_dev, st.st_ino))
        if first is not None:
            same = "given twice" if first == path else f"the same file as {first}"
            raise EnvsnapError(f"{path} is {same}: each snapshot counts once")
        seen[(st.st_dev, st.st_ino)] = path


def _refuse_copies(snaps: List[Dict[str, Any]], paths: Tuple[str, ...]) -> None:
    """A copy under another name is the same runs counted twice too (equal dicts: usually told apart
    by their first key, the capture time)."""
    for i, snap in enumerate(snaps):
        for j in range(i):
            if snaps[j] == snap:
                raise EnvsnapError(f"{paths[j]} and {paths[i]} are the same snapshot: each snapshot counts once")
