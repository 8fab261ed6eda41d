"""Who installed a file, in words: the libraries section's `owner` record (capture/collectors/libraries.py:
a distribution's RECORD entry, a system package, or nothing known) as `show`, the diff and the report say it."""
from __future__ import annotations

from typing import Any, Mapping


def owner_text(entry: Mapping[str, Any]) -> str:
    """'torch 2.13.0', 'dpkg libgomp1 12.2.0-14', 'unknown'."""
    owner = entry.get("owner")
    owner = owner if type(owner) is dict or isinstance(owner, Mapping) else {}  # dict first: no ABC check
    kind = owner.get("kind")
    if kind == "distribution":
        return f"{owner.get('name')} {owner.get('version')}".strip()
    if kind == "package":
        return f"{owner.get('manager', 'package')} {owner.get('name')} {owner.get('version')}".strip()
    return "unknown"
