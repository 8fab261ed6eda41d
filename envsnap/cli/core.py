"""`envsnap capture` and `envsnap show`."""
from __future__ import annotations

import sys

import click

from envsnap.cli.options import capture_options


@click.command()
@click.option("-o", "--output", required=True, help="Snapshot file to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@capture_options
def capture(output: str, force: bool, capture_ctx) -> None:
    """Record everything that can change performance into a snapshot file."""
    from envsnap import capture as capture_mod
    from envsnap import snapshot
    from envsnap.render_show import summary_line

    snapshot.check_writable(output, force)
    snap = capture_mod.capture(capture_ctx)
    snapshot.save(snap, output, force=force)
    if output != "-":
        click.echo(summary_line(snap, output), err=True)


@click.command()
@click.argument("snapshot_file", metavar="FILE")
@click.option("--verbose", "-v", is_flag=True, help="Also list every section's main facts.")
def show(snapshot_file: str, verbose: bool) -> None:
    """Print a readable summary of a snapshot: what was captured, what was not and why."""
    from envsnap import snapshot
    from envsnap.render_show import render_show

    snap = snapshot.load(snapshot_file)
    click.echo(render_show(snap, verbose=verbose))


COMMANDS = [capture, show]
