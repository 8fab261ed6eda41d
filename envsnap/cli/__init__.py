"""The `envsnap` command: a thin click layer over the library.

One module per command, named after it (probe holds the probe group), loaded only when it
runs (app.py); this module turns outcomes into exit codes, in one place: a command returns its
status (diff: 0 same / 1 differs; run: 1 when no run succeeded; bisect: 0 isolated / 1 not; probe
status: 1 when not installed), and errors map to codes here:
  EnvsnapError / bad usage -> one line on stderr, exit 2
  Ctrl-C -> exit 130
  anything unexpected -> one line naming the bug, exit 3 (ENVSNAP_DEBUG=1 shows the traceback)
"""
from __future__ import annotations

import os
import sys

from envsnap import __version__

# `envsnap --version` answers before click is imported (a third of the start-up time);
# the text is click's version_option's, which answers every other spelling.
VERSION_TEXT = f"envsnap, version {__version__}\n"


def main(argv=None) -> None:
    """Console-script entry point."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args == ["--version"]:
        sys.stdout.write(VERSION_TEXT)
        sys.stdout.flush()
        sys.exit(0)
    import click

    from envsnap.cli.app import cli
    from envsnap.errors import EnvsnapError

    try:
        rc = cli.main(args=args, prog_name="envsnap", standalone_mode=False)
    except EnvsnapError as exc:
        _fail(str(exc), 2)
    except click.exceptions.Abort:
        _fail("interrupted", 130)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except click.ClickException as exc:
        # Usage errors: one line, naming the command's --help, exit 2.
        hint = ""
        if isinstance(exc, click.UsageError) and exc.ctx is not None:
            hint = f" (see '{exc.ctx.command_path} --help')"
        _fail(exc.format_message() + hint, 2)
    except BrokenPipeError:
        # `envsnap show x | head`: not an error worth a traceback.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        sys.exit(0)
    except Exception as exc:  # a bug in envsnap, not in the user's input
        if os.environ.get("ENVSNAP_DEBUG"):
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set ENVSNAP_DEBUG=1 for the traceback)", 3)
    sys.exit(rc if isinstance(rc, int) else 0)


def _fail(message: str, code: int) -> None:
    import click

    from envsnap.redact import clean_text, redact_text

    first = message.strip().splitlines()[0] if message.strip() else "error"
    # Messages quote user input (a path, an option value, a field of a --no-redact
    # snapshot): a credential in it must not reach the terminal or a CI log either.
    click.echo(f"envsnap: error: {redact_text(clean_text(first))}", err=True)
    sys.exit(code)
