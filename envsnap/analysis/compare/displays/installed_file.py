"""An installed file that no longer matches its distribution's RECORD (packages.integrity): edited, missing, or
a rewritten script."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"integrity"})


def absent(subject: Subject) -> str:
    return "as installed"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    state = value.get("state", "modified")
    if state == "modified":
        sha = value.get("actual_sha256") or ""
        size = value.get("actual_size")
        return f"modified (sha256 {sha[:12]}{f', {size} bytes' if size is not None else ''})"
    return state
