"""A setting of NCCL's own config files, as the variable it sets: the view keeps its file beside its value
({"value", "file"}: analysis/compare/views._nccl_conf_view)."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent as absent,
    absent_in as absent_in,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"nccl_conf"})


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    return f"{value.get('value')} from {value.get('file')}"


def setting_value(subject: Subject, value: Any) -> Any:
    """The setting's value itself, without its file."""
    if isinstance(value, dict):
        return value.get("value")
    return value
