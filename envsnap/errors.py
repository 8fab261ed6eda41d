"""The one exception type for problems the user can fix (bad input, refused overwrite)."""
from __future__ import annotations


class EnvsnapError(Exception):
    """A user-fixable problem: the CLI prints it as one line and exits 2."""
