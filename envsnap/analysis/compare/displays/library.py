"""A shared object a process mapped (analysis/compare/libraries.py): its file, its version and its identity."""
from __future__ import annotations

from typing import Any, Dict

from envsnap import format as fmt
from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"library"})


def absent(subject: Subject) -> str:
    return "not mapped"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    identity = str(value.get("identity") or "")
    shown = identity[:19] if identity.startswith("sha256:") else (f"build-id {identity[:12]}" if identity else "")
    parts = [str(p) for p in (value.get("version"), shown) if p]
    return fmt.clip(f"{value.get('path')} ({', '.join(parts)})" if parts else str(value.get("path")), 300)
