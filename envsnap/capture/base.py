"""The one shape every collector has, and the helpers that build its result.

A collector is `collect(ctx: CaptureContext) -> Section` that returns one of
`ok(data)`, `unavailable(reason, data)` or `failed(error, data)` and never raises.
"Unavailable" (no NVML, not a git repository) is a fact about the machine, not an
error. The runner (runner.py) adds time bounds and catches anything that escapes.
"""
from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, Optional, Protocol

from envsnap.model.rules import SectionRules
from envsnap.model.types import Section

# Bounds on the file text a capture keeps (content records, see collectors/content.py): a file's
# first DEFAULT_CONTENT_MAX_FILE bytes, DEFAULT_CONTENT_MAX_TOTAL bytes of text per snapshot.
# Measured: the largest .py of sglang 0.5.23 is srt/managers/scheduler.py, 276 KiB (0.5.5: 223 KiB);
# of the 6,594 .py files of a torch 2.13 venv, 22 exceed 256 KiB and 2 exceed 512 KiB (test data).
# 512 KiB keeps every one of those whole (so bisect can restore it); 8 MiB is dozens of edited
# files at once while a snapshot stays a few MB.
DEFAULT_CAPTURE_TIMEOUT = 30.0  # seconds the whole capture may take
DEFAULT_CONTENT_MAX_FILE = 512 << 10
DEFAULT_CONTENT_MAX_TOTAL = 8 << 20


def wrap_up_reserve(timeout: float) -> float:
    """Seconds between the collectors' soft deadline and the capture's hard one: their time to wrap
    up (a files walk stopped at its deadline still has to build 100k entries), so that a slow one
    returns partial data instead of a timeout."""
    return min(2.0, max(0.2, 0.15 * timeout))


class Progress:
    """Which of one capture's collectors still run: the runner marks each one done as it ends, and a collector
    that works for as long as the others do (the neighbours' window) waits on it instead of polling."""

    def __init__(self, names: Iterable[str]) -> None:
        self._running = set(names)
        self._changed = threading.Condition()

    def done(self, name: str) -> None:
        with self._changed:
            self._running.discard(name)
            self._changed.notify_all()

    def wait_for_others(self, name: str, timeout: float) -> bool:
        """Wait up to `timeout` seconds for every collector but `name` to be done; whether they are."""
        with self._changed:
            return self._changed.wait_for(lambda: not self._running - {name}, max(0.0, timeout))


@dataclass
class CaptureContext:
    """Everything a collector may look at: the user's options plus the deadline."""

    label: str = ""
    deep: bool = False
    watch: List[str] = field(default_factory=list)
    repos: List[str] = field(default_factory=list)
    timeout: float = DEFAULT_CAPTURE_TIMEOUT
    redact: bool = True
    cwd: str = field(default_factory=os.getcwd)
    # Worker environments: the processes to read and the in-process probe's records
    pids: List[int] = field(default_factory=list)
    sglang: bool = False
    probe_dir: Optional[str] = None
    logs: List[str] = field(default_factory=list)
    sglang_url: Optional[str] = None
    # Interpreter to describe (python/packages/torch sections); None = the one running envsnap.
    python: Optional[str] = None
    # File text kept (git patches, dirty/untracked files, edited installed files, start-up hooks,
    # watched files): per file and per snapshot, in bytes; over them: truncated / over_budget.
    content_max_file: int = DEFAULT_CONTENT_MAX_FILE
    content_max_total: int = DEFAULT_CONTENT_MAX_TOTAL
    # --patch FILE|DIR (repeatable): unified diffs whose hunks are checked against their targets.
    patches: List[str] = field(default_factory=list)
    # --no-cache: hash every file, neither read nor write the hash cache (hashcache.py).
    no_cache: bool = False
    # Run the collectors of forked.OWN_PROCESS in a forked child (capture/forked.py): set by the
    # one-shot `envsnap capture` command only; library callers, `run` and `bisect` keep threads.
    own_process: bool = False
    # Set by start_clock (the runner, or the capture command's early fork): time.monotonic() values
    # of the capture's start and of the collectors' soft deadline.
    started: float = 0.0
    deadline: float = 0.0
    # The neighbours' CPU window, opened by the one-shot capture command before its imports
    # (neighbours.open_window) so that the window's floor runs beside them; the neighbours collector
    # takes it, else opens its own. Not an option: no collector but that one reads it.
    early_window: Any = None
    # Set by the runner for the capture it runs: which collectors are still at work.
    progress: Optional[Progress] = None

    def start_clock(self) -> float:
        """The capture's start (the first call's time: a collector forked early and the runner share
        one deadline); sets `deadline`, a little before the hard one (wrap_up_reserve)."""
        if not self.started:
            self.started = time.monotonic()
            self.deadline = self.started + self.timeout - wrap_up_reserve(self.timeout)
        return self.started

    def remaining(self, cap: Optional[float] = None) -> float:
        """Seconds left before the capture deadline (at least a sliver), capped at `cap`."""
        left = self.deadline - time.monotonic() if self.deadline else (cap or self.timeout)
        left = max(0.05, left - 0.1)
        return min(left, cap) if cap is not None else left


class Collector(Protocol):
    """What the runner calls: a collector's `collect` (or a forked one's answer), checked by mypy."""

    def __call__(self, ctx: CaptureContext) -> Section: ...


class CollectorModule(Protocol):
    """A collector as the explicit list (capture/collectors/__init__.py) holds it: a module that mypy checks
    against this. Its optional `summarize(data)` (lines for `show`) is looked up by name."""

    SHAPE: Any  # its data's shape, in model/schema.py's shape language
    RULES: SectionRules

    def collect(self, ctx: CaptureContext) -> Section: ...


def ok(data: Dict[str, Any]) -> Section:
    return {"status": "ok", "data": data}


def unavailable(reason: str, data: Optional[Dict[str, Any]] = None) -> Section:
    result: Section = {"status": "unavailable", "reason": reason}
    if data:
        result["data"] = data
    return result


def failed(error: str, data: Optional[Dict[str, Any]] = None) -> Section:
    result: Section = {"status": "error", "error": error}
    if data:
        result["data"] = data
    return result
