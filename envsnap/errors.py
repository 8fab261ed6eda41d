"""The exception types the CLI turns into one line and an exit code."""
from __future__ import annotations


class EnvsnapError(Exception):
    """A user-fixable problem: the CLI prints it as one line and exits 2."""


class Interrupted(Exception):
    """Ctrl-C, SIGTERM or SIGHUP ended a command: the CLI prints its message as the one line about it and
    exits 130. A command that kept something (a run's finished runs, a bisect's journal) says so in it."""

    def __init__(self, message: str = "interrupted") -> None:
        super().__init__(message)
