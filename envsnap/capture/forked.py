"""Run one collector in a forked child process, its section coming back through a pipe.

Why: the packages collector stats every installed file (25,000 on a real SGLang venv) and
os.stat releases the GIL for each call and must take it back after; with the other collectors'
threads running Python at the same time (imports, NVML, parsing), each of those 25,000 hand-backs
can wait for another thread's turn. Measured on the H200 VM (16 cores, 25,207 files): the
collector alone 0.10-0.16 s, inside a capture beside the others 0.28-0.37 s, most of a warm
capture's wall time. In its own process it has a GIL of its own and a core of its own.

Only the one-shot `envsnap capture` command asks for it (CaptureContext.own_process), and it forks
the child first thing (prestart), before the runner and the other collectors are imported; where its
command line sets none of the options the collector reads, even before click is imported
(prestart_at_start, from cli.main), the parsed options then checked against the defaults it used. A library
caller, `run` and `bisect` (long-lived, with their own Ctrl-C handling) keep the collector in a
thread. And the child is forked only while the capturing process has no other thread (before the
runner starts its threads): forking a process with threads can copy a lock another thread held,
and the child could hang on it. The section comes
back as a pickle (every type the collector returned, unchanged: the runner scrubs and validates
it as any other); the child never returns to the caller's code: it leaves by os._exit, whatever
happens, so no atexit handler, buffered output or `finally` of the parent runs twice. A child
still running when the capture gives up on it is killed (kill_all).
"""
from __future__ import annotations

import os
import pickle
import threading
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple, cast

from envsnap.model.types import Section
from envsnap.subproc import fork_child, reap, write_all

_Collect = Callable[[Any], Section]

# The collectors that run in a process of their own when the capture command asks (ctx.own_process).
OWN_PROCESS = frozenset({"packages"})
# The options that set what an OWN_PROCESS collector reads (CaptureContext's deep, timeout, redact, python, content
# budgets, no_cache), and help: a command line with none of them may have its collectors forked at the process's
# start (prestart_at_start), before the option parsing, with the options' defaults.
OPTIONS_READ = frozenset({"--deep", "--timeout", "--no-redact", "--no-cache", "--python", "--content-max-file",
                          "--content-max-total", "--help", "-h"})
# CaptureContext's fields that no OWN_PROCESS collector reads (the others must agree for an early child to be
# taken): what the other collectors record, and the capture's own state.
FIELDS_NOT_READ: FrozenSet[str] = frozenset({"label", "watch", "repos", "pids", "sglang", "probe_dir", "logs",
                                             "sglang_url", "patches", "started", "deadline", "early_window",
                                             "progress"})
_AT_START: List[Tuple[Any, Dict[str, "ForkedCollector"]]] = []  # (its context, the children) until prestart


class ForkedCollector:
    """A collector started in a child process; call it (in the collector's thread) for its section."""

    def __init__(self, pid: int, read_fd: int) -> None:
        self.pid = pid
        self._read_fd = read_fd
        self._reaped = False
        self._lock = threading.Lock()

    def __call__(self, ctx: Any) -> Section:
        with os.fdopen(self._read_fd, "rb") as pipe:
            payload = pipe.read()  # EOF when the child exits (or is killed)
        self._end(kill=False)
        if not payload:
            raise RuntimeError("the collector's process ended without an answer")
        kind, value = pickle.loads(payload)
        if kind == "error":
            raise RuntimeError(value)
        # Unpickled, so of no type mypy can know: whatever the collector returned, which the runner
        # checks as it checks a thread's (runner._normalise) before anything reads it.
        return cast(Section, value)

    def kill(self) -> None:
        """Stop the child if it still runs (the capture gave up on it), and reap it."""
        self._end(kill=True)

    def _end(self, kill: bool) -> None:
        # Once only (the collector's thread and the capture's clean-up may both get here): a pid
        # reaped once may be another process's next.
        with self._lock:
            if not self._reaped:
                reap(self.pid, kill=kill)
                self._reaped = True


def start(func: _Collect, ctx: Any) -> Optional[ForkedCollector]:
    """func(ctx) running in a forked child, or None where forking is not safe or not possible."""
    forked = fork_child(lambda write_fd: _answer(func, ctx, write_fd))
    return None if forked is None else ForkedCollector(*forked)


def prestart_at_start(args: List[str]) -> None:
    """Fork the OWN_PROCESS collectors as the capture command's process starts (cli.main, before click and the
    command's options: ~25 ms on an H100 VM, twice that here), with the options' defaults, when the command line
    (`args`, after `capture`) and ENVSNAP_PYTHON set nothing they read. prestart takes them once the options are
    parsed, if the parsed context agrees; a child nothing takes is killed at exit (a usage error, say)."""
    import atexit
    import gc

    if _AT_START or os.environ.get("ENVSNAP_PYTHON") or any(a.split("=", 1)[0] in OPTIONS_READ for a in args):
        return
    from envsnap.capture.base import CaptureContext

    ctx = CaptureContext(own_process=True)
    enabled = gc.isenabled()
    gc.disable()  # the child works with the collector paused, as one forked inside the command's one_shot_gc
    try:
        _AT_START.append((ctx, prestart(ctx)))
    finally:
        if enabled:
            gc.enable()
    atexit.register(_kill_untaken)


def _kill_untaken() -> None:
    while _AT_START:
        kill_all(list(_AT_START.pop()[1].values()))


def _agree(early: Any, ctx: Any) -> bool:
    """Whether two capture contexts agree on every field an OWN_PROCESS collector reads."""
    import dataclasses

    return all(getattr(early, f.name) == getattr(ctx, f.name)
               for f in dataclasses.fields(ctx) if f.name not in FIELDS_NOT_READ)


def prestart(ctx: Any) -> Dict[str, ForkedCollector]:
    """The OWN_PROCESS collectors forked now, for the one-shot capture command (ctx.own_process): before
    it imports the runner and the other collectors (~25 ms on the H200), which the child needs not wait
    for. Starts the capture's clock (ctx.start_clock): the child and the runner share one deadline.
    Those forked at the process's start (prestart_at_start) are taken instead where their context agrees with
    `ctx` (their clock with them), else killed."""
    if not ctx.own_process:
        return {}
    if _AT_START:
        early, children = _AT_START.pop()
        if _agree(early, ctx):
            ctx.started, ctx.deadline = early.started, early.deadline
            return children
        kill_all(list(children.values()))
    import importlib

    ctx.start_clock()
    children = {}
    for name in sorted(OWN_PROCESS):
        child = start(importlib.import_module(f"envsnap.capture.collectors.{name}").collect, ctx)
        if child is not None:
            children[name] = child
    return children


def _answer(func: _Collect, ctx: Any, write_fd: int) -> None:
    """In the child: func(ctx), or its error, pickled down the pipe."""
    answer: Tuple[str, Any]
    try:
        answer = ("ok", func(ctx))
    except BaseException as exc:  # the runner words it as for a thread's collector
        answer = ("error", f"{type(exc).__name__}: {exc}")
    try:
        payload = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:  # a value pickle cannot carry
        payload = pickle.dumps(("error", f"collector output could not be passed back: {exc}"))
    write_all(write_fd, payload)


def kill_all(children: List[ForkedCollector]) -> None:
    for child in children:
        child.kill()
