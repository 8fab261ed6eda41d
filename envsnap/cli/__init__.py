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
    """Console-script entry point. Called with `argv` (another program running envsnap in its own
    process), it always leaves by SystemExit; as the process's entry point (no `argv`), a command that
    asked for it (request_skip_teardown) exits without the interpreter's teardown."""
    args = sys.argv[1:] if argv is None else list(argv)
    if argv is None:
        _PROCESS_ENTRY.append(True)
    if args == ["--version"]:
        sys.stdout.write(VERSION_TEXT)
        sys.stdout.flush()
        sys.exit(0)
    import click

    from envsnap.cli.app import cli
    from envsnap.errors import EnvsnapError

    out_of_memory = False
    try:
        rc = cli.main(args=args, prog_name="envsnap", standalone_mode=False)
    except MemoryError:
        out_of_memory = True  # said below, once the exception (and the frames holding the data) is gone
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
    if out_of_memory:
        _fail("out of memory: the input needs more memory than this process may use (its address-space or "
              "memory limit, or the machine's); raise the limit or run it where more memory is free", 2)
    code = rc if isinstance(rc, int) else 0
    if argv is None and skip_teardown_requested():
        # Everything is written: the interpreter's teardown would only free the command's objects one
        # by one (~40 ms for a large pair of snapshots). Exit handlers still run (an installed envsnap
        # probe records this process's exit too) and the streams are flushed; a closed pipe is fine.
        import atexit

        run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
        if run_exit_handlers is not None:
            run_exit_handlers()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


_SKIP_TEARDOWN: "list[bool]" = []
_PROCESS_ENTRY: "list[bool]" = []
_KEPT: "list[object]" = []


def request_skip_teardown() -> None:
    """For a command that is done once it returns and holds nothing to clean up (diff, report): exit
    without the interpreter's teardown (its exit handlers run first)."""
    _SKIP_TEARDOWN.append(True)


def skip_teardown_requested() -> bool:
    return bool(_SKIP_TEARDOWN)


def keep_until_exit(*objects: object) -> None:
    """Objects a command is done with but need not free: in envsnap's own process (main() as the entry
    point) they are kept to the end, which a command that skips the teardown never frees one by one
    (a large pair of snapshots: ~10 ms of the diff). Called in-process (main(argv), a test), nothing is
    kept: freeing them is the caller's memory back."""
    if _PROCESS_ENTRY:
        _KEPT.extend(objects)


def _fail(message: str, code: int) -> None:
    import click

    from envsnap.format import printable
    from envsnap.redact import clean_text, redact_text

    first = message.strip().splitlines()[0] if message.strip() else "error"
    # Messages quote user input (a path, an option value, a field of a --no-redact
    # snapshot): a credential in it must not reach the terminal or a CI log either, nor a control
    # character act on the terminal (an ESC sequence in a file name).
    click.echo(f"envsnap: error: {printable(redact_text(clean_text(first)))}", err=True)
    sys.exit(code)
