"""The benchmark command `envsnap run` ran: its program and one item of its command line each (analysis/compare/
flags.py)."""
from __future__ import annotations

from envsnap.analysis.compare.displays import default, process
from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
    short as short,
)
from envsnap.model import keys
from envsnap.model.keys import Subject

WHERES = frozenset({"command"})


def absent(subject: Subject) -> str:
    if keys.aspect_kind(subject.aspect) in (keys.FLAG, keys.ARG):
        return process.NOT_GIVEN
    return default.absent(subject)
