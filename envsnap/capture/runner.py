"""Run every collector under a time bound and assemble the snapshot.

Collectors run concurrently in daemon threads: one that hangs (a wedged GPU, a dead
NFS mount) is recorded as `timeout` when its bound passes and never holds up the
others or the process's exit. Anything a collector raises becomes an `error` entry.
"""
from __future__ import annotations

import contextlib
import gc
import socket
import threading
import time
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, cast

from envsnap.capture import forked
from envsnap.capture.base import CaptureContext, Collector, Progress
from envsnap.capture.collectors import COLLECTORS, SECTION_SHAPES, content
from envsnap.model import schema, snapshot as snapshot_mod
from envsnap.model.snapshot import utc_now
from envsnap.model.types import Section
from envsnap.redact import redact_text, scrub

_gc_lock = threading.Lock()
_gc_pauses = 0  # captures running now in this process (`run` and tests may overlap two)
_gc_resume = False  # whether the last of them turns the collector back on


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """gc.disable() for the block; enabled again when the last overlapping capture ends, and
    only if it was enabled before the first one began."""
    global _gc_pauses, _gc_resume
    with _gc_lock:
        if _gc_pauses == 0:
            _gc_resume = gc.isenabled()
            gc.disable()
        _gc_pauses += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pauses -= 1
            if _gc_pauses == 0 and _gc_resume:
                gc.enable()


# Per-collector caps (seconds), inside the overall --timeout. The rest get the whole budget.
TIME_LIMITS = {"host": 10.0, "env": 5.0, "python": 10.0, "sglang": 10.0}


def run_collector(name: str, func: Collector, ctx: CaptureContext, limit: float) -> Section:
    """Run one collector in a daemon thread; return its section, whatever happens."""
    box: Dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = func(ctx)
        except BaseException as exc:  # a collector must never take the capture down
            import traceback  # here: only a failing collector needs it (with textwrap, ~3 ms to import)

            last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
            where = f" at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno}" if last else ""
            box["error"] = f"{type(exc).__name__}: {exc}{where}"

    start = time.monotonic()
    thread = threading.Thread(target=target, name=f"envsnap-{name}", daemon=True)
    thread.start()
    thread.join(limit)
    elapsed = round(time.monotonic() - start, 3)
    if thread.is_alive():
        return {"status": "timeout", "error": f"did not finish within {limit:.1f}s", "elapsed_s": elapsed}
    if "error" in box:
        return {"status": "error", "error": box["error"], "elapsed_s": elapsed}
    return _normalise(box.get("result"), elapsed)


def _normalise(result: Any, elapsed: float) -> Section:
    """A collector's return value as a section: Any, since a forked one's comes unpickled and a
    buggy one's may be anything; only its status is known good here (the schema checks the rest)."""
    if not isinstance(result, dict) or result.get("status") not in snapshot_mod.SECTION_STATUSES:
        return {"status": "error", "error": f"collector returned {type(result).__name__}, not a section", "elapsed_s": elapsed}
    section = cast(Section, dict(result))
    section["elapsed_s"] = elapsed
    if "data" in section and not isinstance(section["data"], dict):
        section = {"status": "error", "error": "collector data is not an object", "elapsed_s": elapsed}
    return section


def _finish_section(name: str, section: Section, redact: bool) -> Section:
    """Scrub a section (secrets, undecodable bytes, NaN) and make sure it will load: a section
    the format refuses (a server answering odd types, a collector bug, nesting no reader can
    walk) becomes an error that says why; the other sections are kept."""
    try:
        content.hold(name, section)  # file text was redacted by the rules for file text already
        section = scrub(section, redact=redact)
        content.release(name, section)
        problem = schema.section_problem(name, section, SECTION_SHAPES.get(name, "dict"))
    except RecursionError:
        problem = "nested too deeply to record"
    if problem is None:
        return section
    return {"status": "error", "elapsed_s": section.get("elapsed_s"),
            "error": f"collector output refused by the snapshot format: {problem}"}


def capture(
    ctx: CaptureContext,
    only: Optional[Sequence[str]] = None,
    collectors: Optional[Sequence[Tuple[str, Collector]]] = None,
    prestarted: Optional[Dict[str, forked.ForkedCollector]] = None,
) -> Dict[str, Any]:
    """Run the collectors (all, or those named in `only`) and return the snapshot dict.
    `prestarted`: collectors already running in a process of their own (forked.prestart)."""
    # The cyclic garbage collector is paused for the capture: a first capture keeps a stat and the
    # digests of every hashed file until the hash cache records them, and each collection walks them
    # all again while holding the GIL (measured: 70-90 ms of an 0.9 s cold capture of 7,000 files,
    # against 27 ms for --no-cache). Collectors make few reference cycles; they are collected after.
    with _gc_paused():
        return _capture(ctx, only, collectors, prestarted or {})


def _capture(
    ctx: CaptureContext,
    only: Optional[Sequence[str]],
    collectors: Optional[Sequence[Tuple[str, Collector]]],
    prestarted: Dict[str, forked.ForkedCollector],
) -> Dict[str, Any]:
    chosen: List[Tuple[str, Collector]] = list(collectors if collectors is not None else COLLECTORS)
    if only:
        chosen = [(n, f) for n, f in chosen if n in only]
    # Collectors work to a soft deadline a little before the hard one the runner enforces
    # (base.wrap_up_reserve); a collector forked before the runner was imported started the clock.
    hard_deadline = ctx.start_clock() + ctx.timeout
    snap = snapshot_mod.new_snapshot(ctx.label, socket.gethostname(), utc_now())
    results: Dict[str, Section] = {}

    # Collectors of OWN_PROCESS first, each forked while no thread runs yet (or in a thread, see forked.py),
    # unless the capture command forked it already.
    names = {name for name, _ in chosen}
    children = {name: child for name, child in prestarted.items() if name in names}
    forked.kill_all([child for name, child in prestarted.items() if name not in names])
    children.update({name: child for name, func in chosen
                     if ctx.own_process and name in forked.OWN_PROCESS and name not in children
                     for child in [forked.start(func, ctx)] if child is not None})
    # All collectors start together; each is joined against its own bound.
    threads = []
    progress = ctx.progress = Progress(names)

    def run_one(name: str, func: Collector, bound: float) -> None:
        try:
            results[name] = run_collector(name, func, ctx, bound)
        finally:
            progress.done(name)

    for name, func in chosen:
        limit = min(ctx.timeout, TIME_LIMITS.get(name, ctx.timeout))
        func = children.get(name, func)
        t = threading.Thread(target=run_one, args=(name, func, limit), name=f"envsnap-run-{name}", daemon=True)
        t.start()
        threads.append((name, t))
    for _name, t in threads:
        t.join(max(0.0, hard_deadline - time.monotonic()) + 0.5)
    forked.kill_all(list(children.values()))  # one the capture gave up on must not run on
    for name, _ in threads:
        if name not in results:
            results[name] = {"status": "timeout", "error": f"did not finish within the capture's {ctx.timeout:.1f}s"}

    # File text over the snapshot's budget, in one fixed order whatever finished first.
    content.enforce_total(results, ctx.content_max_total)
    snap["redaction"] = "on" if ctx.redact else "off"
    snap["sections"] = {name: _finish_section(name, results[name], ctx.redact) for name, _ in chosen}
    if ctx.redact:
        snap["label"] = redact_text(snap["label"])
    return snap
