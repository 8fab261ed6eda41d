"""The `envsnap` command: a thin click layer over the library.

One module per command, named after it (probe holds the probe group), loaded only when it
runs (app.py); this module turns outcomes into exit codes, in one place: a command returns its
status (diff: 0 same / 1 differs; run: 1 when no run succeeded; bisect: 0 isolated / 1 not; probe
status: 1 when not installed), and errors map to codes here:
  EnvsnapError / bad usage -> one line on stderr, exit 2
  `envsnap` alone -> the usage and the command list on stderr, exit 2 (a usage error: git prints
    the same and exits 1, click's groups exit 2 with the help, like our other usage errors)
  Ctrl-C (SIGTERM, SIGHUP where a command asks for it) -> one line on stderr, exit 130
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
    if args[:1] == ["capture"]:
        if argv is None:  # the process is envsnap's own: its packages child may be forked before click's import
            from envsnap.capture import forked

            forked.prestart_at_start(args[1:])
        from envsnap.capture.collectors import neighbours

        neighbours.open_window_at_start()  # its floor runs beside click's import and the parsing below
    import click

    from envsnap.cli.app import cli
    from envsnap.errors import EnvsnapError, Interrupted

    out_of_memory = False
    try:
        rc = _invoke(cli, args)
    except MemoryError:
        out_of_memory = True  # said below, once the exception (and the frames holding the data) is gone
    except EnvsnapError as exc:
        _fail(str(exc), 2)
    except Interrupted as exc:
        _interrupted(str(exc))
    except (click.exceptions.Abort, KeyboardInterrupt):
        _interrupted("interrupted")
    except click.ClickException as exc:
        group_ctx = _group_without_command(exc)
        if group_ctx is not None:
            # `envsnap` (or `envsnap probe`) alone: the usage and the command list, not one line
            # naming what is missing; still a usage error.
            click.echo(group_ctx.get_help(), err=True)
            sys.exit(2)
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


def _invoke(cli, args: "list[str]"):
    """click's `main(standalone_mode=False)` without its handling of Ctrl-C, which prints a blank line
    before our own (one message, not three lines): shell completion, then the command's return value."""
    import click

    cli._main_shell_completion({}, "envsnap", "_ENVSNAP_COMPLETE")
    try:
        with cli.make_context("envsnap", args) as ctx:
            return cli.invoke(ctx)
    except click.exceptions.Exit as exc:  # --help, --version spelled otherwise
        return exc.exit_code


class interrupt_on_termination:  # noqa: N801 (used as a function: `with interrupt_on_termination():`)
    """SIGTERM and SIGHUP end the command inside like Ctrl-C does (KeyboardInterrupt): what it keeps on
    Ctrl-C (a run's finished runs, a bisect's restored files and journal) it keeps on them too. With
    `ignore`, they are ignored instead (while what is kept is being written). The previous handlers are
    back afterwards. A class, not contextlib's decorator: `envsnap --version` imports this module and
    nothing more (contextlib and typing would be most of its import time)."""

    def __init__(self, ignore: bool = False) -> None:
        self.ignore = ignore
        self.previous: "dict[int, object]" = {}

    def __enter__(self) -> None:
        import signal

        for signum in (signal.SIGTERM, signal.SIGHUP):
            try:
                self.previous[signum] = signal.signal(signum, signal.SIG_IGN if self.ignore else _raise_interrupt)
            except (ValueError, OSError):  # not the main thread (tests calling main() in one)
                pass

    def __exit__(self, *exc_info: object) -> None:
        import signal

        for signum, handler in self.previous.items():
            signal.signal(signum, handler)  # type: ignore[arg-type]


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt()


def _group_without_command(exc: Exception):
    """The context of a group given no command (click >= 8.2 raises NoArgsIsHelpError), else None."""
    import click

    no_args = getattr(click.exceptions, "NoArgsIsHelpError", None)
    return getattr(exc, "ctx", None) if no_args is not None and isinstance(exc, no_args) else None


def _interrupted(message: str) -> None:
    # On a terminal the ^C it echoed ends the line first, so the message starts a line of its own.
    if sys.stderr.isatty():
        sys.stderr.write("\n")
    _fail(message, 130)


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
