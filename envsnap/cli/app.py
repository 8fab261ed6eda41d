"""The click group: every command is imported only when it is run (or listed by --help).

`envsnap capture` then loads the capture command and what it uses, not `diff`'s analysis
or `report`'s templates (click's documented pattern, "Lazily Loading Subcommands").
"""
from __future__ import annotations

import importlib
from typing import Dict, List, Optional, Tuple

import click

from envsnap import __version__

# command name -> (module, attribute)
COMMANDS: Dict[str, Tuple[str, str]] = {
    "attach": ("envsnap.cli.attach", "attach"),
    "bisect": ("envsnap.cli.bisect", "bisect"),
    "capture": ("envsnap.cli.capture", "capture"),
    "diff": ("envsnap.cli.diff", "diff"),
    "merge": ("envsnap.cli.merge", "merge"),
    "probe": ("envsnap.cli.probe", "probe"),
    "rank": ("envsnap.cli.rank", "rank_command"),
    "report": ("envsnap.cli.report", "report"),
    "run": ("envsnap.cli.run", "run"),
    "show": ("envsnap.cli.show", "show"),
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> List[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> Optional[click.Command]:
        spec = COMMANDS.get(cmd_name)
        if spec is None:
            return None
        module, attribute = spec
        command = getattr(importlib.import_module(module), attribute)
        assert isinstance(command, click.Command), f"{module}.{attribute} is not a click command"
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="envsnap")
def cli() -> None:
    """Performance forensics for LLM inference servers.

    \b
    capture  record everything that can change performance into a snapshot
    run      capture, then measure a benchmark command into the snapshot
    diff     rank the differences between a good and a bad snapshot
    bisect   re-run the benchmark on subsets of the differences to isolate the cause
    """
