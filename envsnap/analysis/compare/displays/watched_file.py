"""A watched file (`--watch PATH`: the files section): its content's hash and size, or why it could not be
read."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent as absent,
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"files"})


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    if "error" in value:
        return f"error: {value['error']}"
    return f"sha256 {str(value.get('sha256') or '')[:12]} ({value.get('size')} bytes)"
