"""`envsnap capture`: record everything that can change performance into a snapshot."""
from __future__ import annotations

from typing import cast

import click

from envsnap.cli.options import FILE, capture_options, one_shot_gc, say


@click.command()
@click.option("-o", "--output", required=True, type=FILE, help="Snapshot file to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@capture_options
def capture(output: str, force: bool, capture_ctx) -> None:
    """Record everything that can change performance into a snapshot file."""
    # Runs once in its process: see one_shot_gc (the runner also pauses it during the capture itself).
    with one_shot_gc():
        from envsnap.capture import forked

        capture_ctx.own_process = True  # a one-shot process: the packages collector forks (forked.py),
        children = forked.prestart(capture_ctx)  # first thing: its child needs none of the imports below
        from envsnap.capture.collectors import neighbours

        neighbours.open_window(capture_ctx)  # its floor runs beside the imports below
        try:
            from envsnap.model import store

            store.check_writable(output, force)  # before the capture: a refused overwrite costs nothing
            from envsnap.capture import runner
            from envsnap.model.types import Snapshot
            from envsnap.render.show import summary_line

            snap = runner.capture(capture_ctx, prestarted=children)
        finally:
            forked.kill_all(list(children.values()))  # reaped already, unless the capture failed
        store.save(snap, output, force=force)
        if output != "-":
            say(summary_line(cast(Snapshot, snap), output))  # a snapshot the runner built
