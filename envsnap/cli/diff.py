"""`envsnap diff`: two snapshots -> verdict, ranked likely causes, differences."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Optional

import click

from envsnap.cli import request_skip_teardown
from envsnap.cli.options import FILE, analyze_pair, emit, one_shot_gc, pristine_finder, wheels_options
from envsnap.errors import EnvsnapError

if TYPE_CHECKING:  # the analysis is imported where it runs (see analyze below)
    from envsnap.model.result_types import DiffResult

_FORMATS = click.Choice(["text", "json", "html"])


@click.command()
@click.argument("good_file", metavar="GOOD", type=FILE)
@click.argument("bad_file", metavar="BAD", type=FILE)
@click.option("--format", "fmt", type=_FORMATS, default="text", show_default=True, help="Output format.")
@click.option("-o", "--output", default=None, type=FILE, help="Write to this file instead of stdout (atomic).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--all", "show_all", is_flag=True, help="Include volatile fields (timestamps, pids, temperatures...).")
@click.option("--metric", default=None, help="Main metric (default: the throughput metric both sides measured).")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show only the N most likely causes.")
@click.option("-v", "--verbose", is_flag=True,
              help="Text: list every difference, each cause's evidence, and every patch in full.")
@wheels_options
def diff(good_file: str, bad_file: str, fmt: str, output: Optional[str], force: bool, show_all: bool,
         metric: Optional[str], top: Optional[int], verbose: bool, wheels, pip_cache: bool) -> int:
    """Rank what differs between a GOOD and a BAD snapshot by how likely it caused the change.

    Exit status: 0 when nothing relevant differs, 1 when something does, 2 on bad input or
    usage, 3 on an internal error (a bug: ENVSNAP_DEBUG=1 shows the traceback), 130 when
    interrupted.
    """
    with one_shot_gc():  # runs once in its process
        from envsnap.model import store

        if output and output != "-":
            store.check_writable(output, force)

        def analyze(good: Dict[str, Any], bad: Dict[str, Any]) -> DiffResult:
            # Imported here: while a big pair is validated in parallel (analyze_pair).
            from envsnap.analysis import result as result_mod

            return result_mod.analyze(good, bad, metric=metric, include_volatile=show_all, good_file=good_file,
                                      bad_file=bad_file, top=top if fmt != "text" else None, tables=fmt != "text",
                                      pristine=pristine_finder(good, bad, wheels, pip_cache))

        result = analyze_pair(good_file, bad_file, analyze)
        if fmt == "json":
            import json

            text = json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
        elif fmt == "html":
            try:
                from envsnap.render.html import render_report
            except ImportError as exc:
                raise EnvsnapError(f"html output needs envsnap.report, which is not available ({exc})") from None
            text = render_report(result)
        else:
            from envsnap.render.text import DEFAULT_TOP, render_diff

            text = render_diff(result, verbose=verbose or show_all, top=top or DEFAULT_TOP)
        emit(text, output, force)
    request_skip_teardown()
    return 1 if result["differences"] else 0
