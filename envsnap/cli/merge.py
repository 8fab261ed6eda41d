"""`envsnap merge`: join per-node snapshots into one cluster snapshot."""
from __future__ import annotations

import click

from envsnap.cli.options import FILE


@click.command()
@click.argument("snapshots", nargs=-1, required=True, metavar="SNAPSHOT...", type=FILE)
@click.option("-o", "--output", required=True, type=FILE, help="Cluster snapshot to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--label", "-l", default=None, help="Label of the merged snapshot (default: the nodes' common label).")
def merge(snapshots, output, force, label) -> None:
    """Join per-node snapshots (one per host) into one cluster snapshot for diff."""
    from envsnap.cli.options import load_snapshot
    from envsnap.format import printable
    from envsnap.model import merge as merge_mod, store
    from envsnap.model.snapshot import utc_now

    store.check_writable(output, force)
    loaded = [load_snapshot(path) for path in snapshots]
    merged = merge_mod.merge(loaded, list(snapshots), utc_now(), label=label)
    store.save(merged, output, force=force)
    if output != "-":
        click.echo(printable(f"wrote {output}: {len(merged['nodes'])} node{'s' if len(merged['nodes']) != 1 else ''} "
                             f"({', '.join(merged['nodes'])})"), err=True)
