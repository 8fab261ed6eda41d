"""`envsnap diff` (two snapshots: ranked likely causes) and `envsnap rank` (N snapshots: association)."""
from __future__ import annotations

import sys
from typing import Optional, Tuple

import click

from envsnap.errors import EnvsnapError

_FORMATS = click.Choice(["text", "json", "html"])


def _emit(text: str, output: Optional[str], force: bool) -> None:
    from envsnap.snapshot import atomic_write_text

    if output and output != "-":
        atomic_write_text(output, text, force=force)
        return
    encoding = getattr(sys.stdout, "encoding", None) or "utf-8"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):  # a C-locale terminal: keep it readable
        for fancy, plain in (("\u2192", "->"), ("\u2212", "-"), ("\u2026", "..."), ("\u2014", "--")):
            text = text.replace(fancy, plain)
        text = text.encode(encoding, "replace").decode(encoding)
    click.echo(text, nl=False)


@click.command()
@click.argument("good_file", metavar="GOOD")
@click.argument("bad_file", metavar="BAD")
@click.option("--format", "fmt", type=_FORMATS, default="text", show_default=True, help="Output format.")
@click.option("-o", "--output", default=None, help="Write to this file instead of stdout (atomic).")
@click.option("--force", is_flag=True, help="Overwrite OUTPUT if it exists.")
@click.option("--all", "show_all", is_flag=True, help="Include volatile fields (timestamps, pids, temperatures...).")
@click.option("--metric", default=None, help="Main metric (default: the throughput metric both sides measured).")
@click.option("--top", type=click.IntRange(min=1), default=None, help="Show only the N most likely causes.")
@click.option("-v", "--verbose", is_flag=True, help="Text: list every difference and each cause's evidence.")
def diff(good_file: str, bad_file: str, fmt: str, output: Optional[str], force: bool, show_all: bool,
         metric: Optional[str], top: Optional[int], verbose: bool) -> int:
    """Rank what differs between a GOOD and a BAD snapshot by how likely it caused the change.

    Exit status: 0 when nothing relevant differs, 1 when something does, 2 on error.
    """
    from envsnap import rank, snapshot

    if output and output != "-":
        snapshot.check_writable(output, force)
    if good_file == "-" and bad_file == "-":
        raise EnvsnapError("only one of GOOD and BAD can be read from stdin ('-')")
    good = snapshot.load(good_file)
    bad = snapshot.load(bad_file)
    result = rank.analyze(good, bad, metric=metric, include_volatile=show_all, good_file=good_file,
                          bad_file=bad_file, top=top if fmt != "text" else None)
    if fmt == "json":
        import json

        text = json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    elif fmt == "html":
        try:
            from envsnap.report import render_report
        except ImportError as exc:
            raise EnvsnapError(f"html output needs envsnap.report, which is not available ({exc})") from None
        text = render_report(result, good, bad)
    else:
        from envsnap.render_text import DEFAULT_TOP, render_diff

        text = render_diff(result, verbose=verbose or show_all, top=top or DEFAULT_TOP)
    _emit(text, output, force)
    return 1 if result["differences"] else 0


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
    from envsnap import rank, snapshot

    if output and output != "-":
        snapshot.check_writable(output, force)
    if len(snapshot_files) < 3:
        raise EnvsnapError(f"rank needs at least 3 snapshots with runs, got {len(snapshot_files)} "
                           "(use `envsnap diff GOOD BAD` for two)")
    if sum(1 for f in snapshot_files if f == "-") > 1:
        raise EnvsnapError("only one snapshot can be read from stdin ('-')")
    snaps = [snapshot.load(f) for f in snapshot_files]
    result = rank.associate(snaps, list(snapshot_files), metric=metric)
    if top:
        result["associations"] = result["associations"][:top]
    if fmt == "json":
        import json

        text = json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False) + "\n"
    else:
        from envsnap.render_text import render_rank

        text = render_rank(result)
    _emit(text, output, force)


COMMANDS = [diff, rank_command]
