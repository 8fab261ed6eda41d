"""`envsnap report`: the diff/rank result of two snapshots as one self-contained HTML file."""
from __future__ import annotations

import os

import click

from envsnap.cli import request_skip_teardown
from envsnap.cli.options import FILE, analyze_pair, pristine_finder, wheels_options


@click.command()
@click.argument("good_file", metavar="GOOD", type=FILE)
@click.argument("bad_file", metavar="BAD", type=FILE)
@click.option("-o", "--output", required=True, type=FILE, help="HTML file to write ('-' for stdout).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--metric", default=None, metavar="NAME", help="Metric of the verdict (default: the main one found in the runs).")
@wheels_options
def report(good_file: str, bad_file: str, output: str, force: bool, metric, wheels, pip_cache: bool) -> None:
    """Write an HTML forensic report comparing a GOOD and a BAD snapshot.

    Verdict, ranked causes, every run, the workers' environments, code state, GPU and host,
    and all differences, in one file that needs no network and no JavaScript to read.
    """
    from envsnap.analysis import result as result_mod
    from envsnap.format import printable
    from envsnap.model import store
    from envsnap.render.html import render_report

    store.check_writable(output, force)  # before the work: a refused overwrite costs nothing
    result = analyze_pair(good_file, bad_file, lambda good, bad: result_mod.analyze(
        good, bad, metric=metric, good_file=good_file, bad_file=bad_file, tables=True,
        pristine=pristine_finder(good, bad, wheels, pip_cache)))
    html = render_report(result)
    store.atomic_write_text(output, html, force=force)
    request_skip_teardown()
    if output != "-":
        summary = (result.get("verdict") or {}).get("summary") or "no metric to compare"
        causes = result.get("causes") or []
        first = f"; top cause {causes[0].get('key')}" if causes else ""
        click.echo(printable(f"wrote {os.path.relpath(output)} ({len(html.encode('utf-8')) // 1024} KiB): "
                             f"{summary}{first}"), err=True)
