"""`envsnap show`: a readable summary of one snapshot."""
from __future__ import annotations

from typing import cast

import click

from envsnap.cli.options import FILE


@click.command()
@click.argument("snapshot_file", metavar="FILE", type=FILE)
@click.option("--verbose", "-v", is_flag=True, help="Also list every section's main facts.")
def show(snapshot_file: str, verbose: bool) -> None:
    """Print a readable summary of a snapshot: what was captured, what was not and why.

    A merged multi-node snapshot (`envsnap merge`) is shown node by node."""
    from envsnap.capture import collectors
    from envsnap.cli.options import load_snapshot
    from envsnap.model.types import Snapshot
    from envsnap.render.show import render_show

    snap = cast(Snapshot, load_snapshot(snapshot_file))  # validated on load (model/store.py)
    click.echo(render_show(snap, verbose=verbose, summarize=collectors.summarize, order=collectors.COLLECTOR_NAMES))
