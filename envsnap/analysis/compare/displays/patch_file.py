"""A recorded patch (analysis/compare/patch_status.py): the patch file itself, given or not, its hash and
whether it applies; its hunks' values are their statuses, plain text."""
from __future__ import annotations

from typing import Any, Dict

from envsnap.analysis.compare.displays.default import (  # noqa: F401 (the Protocol's defaults)
    absent_in as absent_in,
    setting_value as setting_value,
)
from envsnap.model.keys import Subject

WHERES = frozenset({"patches"})


def absent(subject: Subject) -> str:
    return "not in the patch"


def short(subject: Subject, value: Dict[str, Any]) -> Any:
    if "name" in value:
        return "given"
    sha = str(value.get("sha256") or "")
    return f"sha256 {sha[:12]}" + (f" ({value['status']})" if value.get("status") else "") if sha else \
        str(value.get("status") or "unreadable")
