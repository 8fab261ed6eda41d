"""`envsnap capture`: record everything that can change performance into a snapshot."""
from __future__ import annotations

import click

from envsnap.cli.options import capture_options, one_shot_gc


@click.command()
@click.option("-o", "--output", required=True, help="Snapshot file to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@capture_options
def capture(output: str, force: bool, capture_ctx) -> None:
    """Record everything that can change performance into a snapshot file."""
    # Runs once in its process: see one_shot_gc (the runner also pauses it during the capture itself).
    with one_shot_gc():
        from envsnap.capture import runner
        from envsnap.model import store
        from envsnap.render.show import summary_line

        store.check_writable(output, force)
        capture_ctx.own_process = True  # a one-shot process: the packages collector may fork (forked.py)
        snap = runner.capture(capture_ctx)
        store.save(snap, output, force=force)
        if output != "-":
            click.echo(summary_line(snap, output), err=True)
