"""What several commands share: the capture options (`capture`, `run`), loading snapshots and writing output."""
from __future__ import annotations

import contextlib
import functools
import gc
import re
import sys
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, Optional, Sequence, TypeVar

import click

from envsnap.capture.base import DEFAULT_CAPTURE_TIMEOUT, DEFAULT_CONTENT_MAX_FILE, DEFAULT_CONTENT_MAX_TOTAL
from envsnap.cli import keep_until_exit
from envsnap.errors import EnvsnapError

if TYPE_CHECKING:  # the analysis loads when a command analyses, not with the CLI's options
    from envsnap.analysis.compare.patches import PristineFinder

_T = TypeVar("_T")


@contextlib.contextmanager
def one_shot_gc() -> Iterator[None]:
    """For a command that runs once in its process (capture, diff): the cyclic garbage collector
    paused, and what the command made frozen out of later collections when it is done, the
    interpreter's last collection at exit included. Collections would only walk the imports'
    objects and the snapshots' (hundreds of thousands of dicts and strings for a large pair) again
    and again (measured: ~20 ms of a ~0.3 s warm capture). Cyclic garbage made inside is left to
    the process's exit; an in-process caller gets the collector back as it was."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


class ByteSize(click.ParamType):
    """A size in bytes: 524288, 512K, 8M, 1G (binary units)."""

    name = "size"
    _UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        if isinstance(value, int):
            return value
        match = re.fullmatch(r"\s*(\d+)\s*([kKmMgG]?)(?:i?[bB])?\s*", str(value))
        if not match:
            self.fail(f"{value!r} is not a size (e.g. 524288, 512K, 8M)", param, ctx)
        return int(match.group(1)) * self._UNITS[match.group(2).lower()]


class FileName(click.ParamType):
    """A file name taken as typed ('-' included): the command says what is wrong with it. Only the
    shell sees a difference: it completes file names there (click's shell completion)."""

    name = "file"

    def shell_complete(self, ctx: Any, param: Any, incomplete: str) -> Any:
        from click.shell_completion import CompletionItem

        return [CompletionItem(incomplete, type="file")]


FILE = FileName()


class Checked(click.ParamType):
    """A value of click type `base` that capture/preflight.py's `check` (named by its function name)
    accepts: what it refuses is click's usage error, as a missing --probe-dir is (one line naming
    the option, exit 2), before the command starts: nothing is captured or written."""

    def __init__(self, base: click.ParamType, check: str) -> None:
        self.base = base
        self.check = check
        self.name = base.name

    def convert(self, value: Any, param: Any, ctx: Any) -> Any:
        value = self.base.convert(value, param, ctx)
        if ctx is not None and ctx.resilient_parsing:  # shell completion parses too: it checks nothing
            return value
        from envsnap.capture import preflight

        try:
            return getattr(preflight, self.check)(value)
        except (EnvsnapError, ValueError) as exc:
            self.fail(str(exc) + _from_environment(param, ctx), param, ctx)

    def shell_complete(self, ctx: Any, param: Any, incomplete: str) -> Any:
        return self.base.shell_complete(ctx, param, incomplete)


def _from_environment(param: Any, ctx: Any) -> str:
    """Where a refused value came from when the command line did not hold it: ' (from ENVSNAP_PYTHON)'."""
    envvar = getattr(param, "envvar", None)
    if ctx is None or param is None or not isinstance(envvar, str):
        return ""
    source = ctx.get_parameter_source(param.name)
    return f" (from {envvar})" if source is not None and source.name == "ENVIRONMENT" else ""


def capture_options(func):
    """Decorate a click command with every capture option; it receives `capture_ctx`."""
    options = [
        click.option("--label", "-l", default="", help="A name for this snapshot (e.g. good, bad, 2026-11-28)."),
        click.option("--watch", "-w", multiple=True, type=Checked(click.Path(), "check_path"),
                     help="File or directory to hash (repeatable)."),
        click.option("--repo", "repos", multiple=True, type=Checked(click.Path(), "check_path"),
                     help="Extra git checkout to record (repeatable)."),
        click.option("--deep", is_flag=True, help="Slower checks: hash every installed file, import torch in a subprocess."),
        click.option("--timeout", default=DEFAULT_CAPTURE_TIMEOUT, show_default=True, type=click.FloatRange(0.5, 3600),
                     help="Seconds the whole capture may take; a collector still running then is recorded as timeout."),
        click.option("--no-redact", is_flag=True, help="Keep secret-looking values in clear text (off by default)."),
        click.option("--pid", "pids", multiple=True, type=Checked(click.IntRange(1), "check_pid"),
                     help="Record this process tree (repeatable)."),
        click.option("--sglang", "find_sglang", is_flag=True, help="Find running SGLang servers and record their process trees."),
        click.option("--probe-dir", type=click.Path(exists=True, file_okay=False),
                     help="Merge the in-process probe's records from this directory."),
        click.option("--log", "logs", multiple=True, type=click.Path(exists=True),
                     help="Server log with NCCL_DEBUG=INFO lines (repeatable)."),
        click.option("--sglang-url", type=Checked(click.STRING, "check_server"),
                     help="Fetch /server_info from this SGLang server (e.g. http://127.0.0.1:30000); "
                          "one that does not accept a connection within 3 s is an error."),
        click.option("--no-cache", is_flag=True,
                     help="Hash every file; neither read nor update the trusted hash cache (~/.cache/envsnap)."),
        click.option("--python", "python_exe", type=Checked(click.Path(), "check_python"), envvar="ENVSNAP_PYTHON",
                     help="Describe this interpreter's packages and startup hooks (the server's venv) [env: ENVSNAP_PYTHON]."),
        click.option("--patch", "patch_files", multiple=True, type=click.Path(exists=True), metavar="FILE|DIR",
                     help="Unified diff (or a directory of *.patch/*.diff) whose every hunk is checked against "
                          "the files it targets: applied, not applied, conflict (repeatable)."),
        click.option("--content-max-file", type=ByteSize(), default=DEFAULT_CONTENT_MAX_FILE, show_default="512K",
                     help="Text kept per file (patches, edited files, start-up hooks, watched files); "
                          "a longer file is kept truncated."),
        click.option("--content-max-total", type=ByteSize(), default=DEFAULT_CONTENT_MAX_TOTAL, show_default="8M",
                     help="Text kept per snapshot; files beyond it are recorded as over_budget (hash only)."),
    ]

    @functools.wraps(func)
    def wrapper(*args, label, watch, repos, deep, timeout, no_redact, pids, find_sglang, probe_dir, logs, sglang_url,
                no_cache, python_exe, patch_files, content_max_file, content_max_total, **kwargs):
        from envsnap.capture.base import CaptureContext

        kwargs["capture_ctx"] = CaptureContext(
            label=label, deep=deep, watch=list(watch), repos=list(repos), timeout=timeout,
            redact=not no_redact, pids=list(pids), sglang=find_sglang, probe_dir=probe_dir,
            logs=list(logs), sglang_url=sglang_url, python=python_exe, no_cache=no_cache, patches=list(patch_files),
            content_max_file=content_max_file, content_max_total=content_max_total,
        )
        return func(*args, **kwargs)

    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper


def wheels_options(func):
    """--wheels DIR and --no-pip-cache: where the pristine side of an installed file edited on one
    side only may be found offline (capture/pristine.py). The command receives `wheels`, `pip_cache`."""
    func = click.option("--no-pip-cache", "pip_cache", is_flag=True, flag_value=False, default=True,
                        help="Do not look for pristine installed files in pip's cache.")(func)
    return click.option("--wheels", multiple=True, type=click.Path(exists=True), metavar="DIR",
                        help="Directory of wheels (or a .whl) holding installed files as released, to diff "
                             "a file edited in site-packages against (repeatable; pip's cache is searched too).")(func)


def pristine_finder(good: Dict[str, Any], bad: Dict[str, Any], wheels: Sequence[str], pip_cache: bool
                    ) -> "PristineFinder":
    """What finds the pristine texts of the installed files edited on one side only, for analyze():
    given what is needed (analysis/patches.pristine_needs), it searches only when something is."""
    redact = not (good.get("redaction") == "off" and bad.get("redaction") == "off")

    def find(needs: "list[dict[str, Any]]") -> "dict[str, dict[str, Any]]":
        if not needs:
            return {}
        from envsnap.capture.pristine import lookup

        return lookup(needs, list(wheels), use_pip_cache=pip_cache, redact=redact)
    return find


def load_snapshot(path: str) -> Dict[str, Any]:
    """A snapshot file, each section's data checked against its collector's SHAPE (the model layer
    knows no collector: the shapes are passed down from the explicit list)."""
    from envsnap.capture.collectors import SECTION_SHAPES
    from envsnap.model import store

    return store.load(path, shapes=SECTION_SHAPES)


def analyze_pair(good_file: str, bad_file: str, analyze: Callable[[Dict[str, Any], Dict[str, Any]], _T]) -> _T:
    """analyze(good, bad) of GOOD and BAD as load_snapshot loads them.

    Big files are validated by another process while `analyze` runs on their parse (model/pair.py):
    its answer is kept only once validation has passed; where it fails, the files are read again the
    strict way (whose error, if any, is raised) and analysed again. An error raised by `analyze` on
    files that do not pass is theirs, not the analysis's: the strict read's error replaces it."""
    from envsnap.capture.collectors import SECTION_SHAPES
    from envsnap.model import pair

    if good_file == "-" and bad_file == "-":
        raise EnvsnapError("only one of GOOD and BAD can be read from stdin ('-')")
    with pair.read(good_file, bad_file, shapes=SECTION_SHAPES) as snaps:
        keep_until_exit(snaps)
        try:
            result = analyze(snaps.good, snaps.bad)
        except Exception:
            if snaps.confirmed():
                raise
        else:
            if snaps.confirmed():
                return result
        good, bad = snaps.load_checked()  # raises what is wrong with them, or reads them the reference way
        return analyze(good, bad)


def say(text: str, err: bool = True) -> None:
    """Print one of envsnap's own messages (progress, summaries, what was written). They quote what the
    user ran and measured (a command line, a metric name, a variable and its value, a benchmark's
    error line): each line passes through redaction, as everything a snapshot keeps does, and its control
    characters are written out (format.printable): a value cannot start a line of its own."""
    from envsnap.format import printable
    from envsnap.redact import clean_text, redact_text

    click.echo("\n".join(printable(redact_text(clean_text(line))) for line in text.split("\n")), err=err)


def emit(text: str, output: Optional[str], force: bool) -> None:
    """Write TEXT to OUTPUT atomically, or to stdout (plain arrows on a terminal that cannot show them)."""
    from envsnap.model.store import atomic_write_text

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
