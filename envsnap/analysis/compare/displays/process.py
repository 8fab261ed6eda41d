"""A measured process's field: one item of its command line (analysis/compare/flags.py), a module it loaded from
another file than the other side's, or one that shadowed an installed module; any other field reads as it is."""
from __future__ import annotations

from typing import Any, Dict

from envsnap import format as fmt
from envsnap.analysis.compare.displays import default
from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model import keys
from envsnap.model.keys import Subject

WHERES = frozenset({"process"})
NOT_GIVEN = "not given"  # a flag or positional the command line does not have
# What a missing item of each kind means, by its aspect's kind (keys.aspect_kind).
_ABSENT = {keys.SHADOWED: "not shadowed", keys.MODULE: "not loaded from elsewhere",
           keys.FLAG: NOT_GIVEN, keys.ARG: NOT_GIVEN}


def absent(subject: Subject) -> str:
    return _ABSENT.get(keys.aspect_kind(subject.aspect), default.absent(subject))


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    if keys.aspect_kind(subject.aspect) == keys.SHADOWED:
        return fmt.clip(f"{keys.aspect_parts(subject.aspect)[1]} loaded from {value.get('file')} instead of "
                        f"{value.get('instead_of')}", 300)
    return default.short(subject, value)
