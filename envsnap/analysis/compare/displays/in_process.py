"""A variable a process changed in its own environment after it started (the probe saw os.environ written):
what it was at start and what it was set to, in order."""
from __future__ import annotations

from typing import Any, Dict

from envsnap import format as fmt
from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"in_process"})


def absent(subject: Subject) -> str:
    return "not changed in-process"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    after = ", then ".join("unset" if v is None else str(v) for v in value.get("after") or []) or "?"
    start = value.get("start")
    return fmt.clip(f"{after} in-process (was {'unset' if start is None else start} at start)")
