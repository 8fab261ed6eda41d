"""The signals that end a bisect, and the restore that no signal may cut short.

SIGINT, SIGTERM, SIGHUP and SIGQUIT end a bisect as Ctrl-C does: the first one raises `Interrupted` (a
KeyboardInterrupt, so every `finally` runs) wherever the bisect is, and the handler blocks all four
before it raises (pthread_sigmask), so the unwinding — the restore of every switched file included —
runs to its end; a second signal stays pending until then instead of cutting the restore in the middle.
The restore at a normal end runs with the four blocked as well (`held`). A signal that arrived while they
were blocked is acted on once they are unblocked: the bisect stops, its files already back.

Exit status: 130 for SIGINT, 128 + the signal's number for the others (the shell's convention: SIGTERM
143, SIGHUP 129, SIGQUIT 131).
"""
from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from typing import Any, Callable, Dict, Iterator, List, Optional, Union

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)

_Handler = Union[Callable[[int, Any], Any], int, signal.Handlers, None]


class Interrupted(KeyboardInterrupt):
    """A bisect ended by a signal; `signum` says which."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _block() -> None:
    if _in_main_thread():
        signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)


class Guard:
    """The handlers of one bisect (see the module docstring); `signum` is the first signal received."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self.previous: Dict[int, _Handler] = {}
        self.mask: Optional[Any] = None

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None:
            return  # already stopping: the restore goes on
        self.signum = signum
        _block()
        raise Interrupted(signum)

    def install(self) -> "Guard":
        if not _in_main_thread():  # signals reach the main thread only (tests call main() in others)
            return self
        self.mask = signal.pthread_sigmask(signal.SIG_BLOCK, [])
        for signum in SIGNALS:
            try:
                self.previous[signum] = signal.signal(signum, self._handle)
            except (ValueError, OSError):
                pass
        return self

    def uninstall(self) -> List[str]:
        """Put the previous handlers and mask back; the names of signals that were still pending (a second
        Ctrl-C during the restore), which are consumed, not acted on: this bisect already stopped."""
        if not self.previous:
            return []
        late: List[str] = []
        if self.signum is not None:
            pending = signal.sigpending() & set(SIGNALS)
            for signum in sorted(pending):
                if signal.sigtimedwait([signum], 0) is not None:
                    late.append(signal.Signals(signum).name)
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)
        self.previous = {}
        if self.mask is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)
        return late


@contextmanager
def installed() -> Iterator[Guard]:
    """The bisect's handlers for the duration of the block."""
    guard = Guard().install()
    try:
        yield guard
    finally:
        guard.uninstall()


@contextmanager
def held() -> Iterator[None]:
    """The four signals blocked for the block (a restore): one that arrives waits until it ends."""
    if not _in_main_thread():
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        # Back to the mask from before: still blocked when a handler had blocked them (the bisect is
        # stopping); else a signal that waited is delivered now, and its handler stops the bisect.
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
