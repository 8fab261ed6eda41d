"""A start-up hook of the interpreter (sitecustomize, usercustomize, a .pth file): its kind, its content's hash
and the variables its text names."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"startup"})


def absent(subject: Subject) -> str:
    return "absent"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    text = f"{value.get('kind', 'hook')} sha256 {str(value.get('sha256') or '')[:12]}"
    if value.get("env_mentions"):
        text += "; mentions " + ", ".join(map(str, value["env_mentions"]))
    return text
