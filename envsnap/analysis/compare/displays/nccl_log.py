"""What NCCL's log said: a variable NCCL read and what it did (transports, channels, algorithms), agreed by every
rank or not. NCCL logs a variable only when it reads it: a missing line is "not logged", never "unset"."""
from __future__ import annotations

from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
    short as short,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"nccl"})


def absent(subject: Subject) -> str:
    return "not logged"
