"""What the table builders share: safe access to snapshot data, sides, and row capping."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Sequence, Tuple, TypeVar

from envsnap.format import natural_key
from envsnap.model.keys import at_or_below
from envsnap.model.result_types import CompareRow, SectionStatus
from envsnap.model.snapshot import as_dict

Row = TypeVar("Row", bound=Mapping[str, Any])

# Rows that are the same on both sides, listed before the rest are only counted.
SAME_ROWS = 440


def sections(snap: Dict[str, Any]) -> Dict[str, Any]:
    """The snapshot's sections (a node's own, for a node of a merged snapshot: tables/__init__.py pairs them)."""
    return as_dict(snap.get("sections"))


def data(sections_: Dict[str, Any], name: str) -> Dict[str, Any]:
    return as_dict(as_dict(sections_.get(name)).get("data"))


def section_status(snap: Dict[str, Any], name: str) -> SectionStatus:
    """{"status": ok|unavailable|error|timeout|not captured, "reason": ...} of one section."""
    section = as_dict(sections(snap).get(name))
    if not section:
        return {"status": "not captured", "reason": None}
    return {"status": str(section.get("status") or "?"), "reason": section.get("reason") or section.get("error")}


def capped(rows: Sequence[Row]) -> Tuple[List[Row], int, int, int]:
    """Every differing row; same-on-both-sides rows up to SAME_ROWS, the rest counted: (rows kept, total,
    differing, same_not_listed), the fields of a capped table (model/result_types._Capped)."""
    differing = [r for r in rows if r.get("differs")]
    same = [r for r in rows if not r.get("differs")]
    return differing + same[:SAME_ROWS], len(rows), len(differing), max(0, len(same) - SAME_ROWS)


def compare_rows(good: Dict[str, Any], bad: Dict[str, Any], pinned: Sequence[str] = (),
                 skip: Any = None) -> List[CompareRow]:
    """{label, good, bad, good_set, bad_set, differs, pinned} for two flat dicts, in natural order."""
    rows: List[CompareRow] = []
    for key in sorted(set(good) | set(bad), key=natural_key):
        if skip is not None and skip(key):
            continue
        g, b = good.get(key), bad.get(key)
        rows.append({"label": key, "good": g, "bad": b, "good_set": key in good, "bad_set": key in bad,
                     "differs": (key in good, g) != (key in bad, b),
                     "pinned": any(at_or_below(key, p) for p in pinned)})
    return rows
