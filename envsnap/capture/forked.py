"""Run one collector in a forked child process, its section coming back through a pipe.

Why: the packages collector stats every installed file (25,000 on a real SGLang venv) and
os.stat releases the GIL for each call and must take it back after; with the other collectors'
threads running Python at the same time (imports, NVML, parsing), each of those 25,000 hand-backs
can wait for another thread's turn. Measured on the H200 VM (16 cores, 25,207 files): the
collector alone 0.10-0.16 s, inside a capture beside the others 0.28-0.37 s, most of a warm
capture's wall time. In its own process it has a GIL of its own and a core of its own.

Only the one-shot `envsnap capture` command asks for it (CaptureContext.own_process), and it forks
the child first thing (prestart), before the runner and the other collectors are imported: a library
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
from typing import Any, Callable, Dict, List, Optional, Tuple, cast

from envsnap.model.types import Section
from envsnap.subproc import fork_child, reap, write_all

_Collect = Callable[[Any], Section]

# The collectors that run in a process of their own when the capture command asks (ctx.own_process).
OWN_PROCESS = frozenset({"packages"})


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


def prestart(ctx: Any) -> Dict[str, ForkedCollector]:
    """The OWN_PROCESS collectors forked now, for the one-shot capture command (ctx.own_process): before
    it imports the runner and the other collectors (~25 ms on the H200), which the child needs not wait
    for. Starts the capture's clock (ctx.start_clock): the child and the runner share one deadline."""
    if not ctx.own_process:
        return {}
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
