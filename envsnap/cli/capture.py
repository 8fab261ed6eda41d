"""`envsnap capture`: record everything that can change performance into a snapshot."""
from __future__ import annotations

import click

from envsnap.cli.options import capture_options


@click.command()
@click.option("-o", "--output", required=True, help="Snapshot file to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@capture_options
def capture(output: str, force: bool, capture_ctx) -> None:
    """Record everything that can change performance into a snapshot file."""
    import gc

    # A command that runs once in its process: the cyclic garbage collector would only walk the
    # objects of the imports and of the snapshot again and again (the runner pauses it during
    # the capture itself, see runner.capture). Paused from here, and what the command made is
    # frozen out of later collections when it is done, the interpreter's last collection at exit
    # included (measured: ~20 ms of a ~0.3 s warm capture). Cyclic garbage made here is then
    # left to the process's exit; an in-process caller gets the collector back as it was.
    enabled = gc.isenabled()
    gc.disable()
    try:
        from envsnap.capture import runner
        from envsnap.model import store
        from envsnap.render.show import summary_line

        store.check_writable(output, force)
        snap = runner.capture(capture_ctx)
        store.save(snap, output, force=force)
        if output != "-":
            click.echo(summary_line(snap, output), err=True)
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
