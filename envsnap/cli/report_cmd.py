"""Commands of this area land here (exported through COMMANDS)."""
from __future__ import annotations

COMMANDS: list = []
