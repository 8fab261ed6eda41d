"""An installed distribution: its version, its build where the sides are compared at one version, and where it
came from when not from an index."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis import knowledge
from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"packages"})


def absent(subject: Subject) -> str:
    return "not installed"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    text = str(value.get("version"))
    if isinstance(value.get("build"), dict):  # compared only at one version (views.comparable_builds)
        text += f" [{knowledge.build_summary(value['build'])}]"
    origin = value.get("origin") or {}
    kind = origin.get("kind") if isinstance(origin, dict) else None
    if kind and kind != "index":
        url = origin.get("url") or ""
        commit = origin.get("commit")
        text += f" ({kind}{' ' + url if url else ''}{' @' + str(commit)[:10] if commit else ''})"
    return text
