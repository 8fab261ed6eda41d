"""What every part of the report shares: the caps on rows and values, and the formatting of values
(envsnap/format.py) as the page shows them."""
from __future__ import annotations

import re
from typing import Any, Callable, Dict, List, Optional, Union

from envsnap import format as fmt
from envsnap.analysis.compare.diff import value_text
from envsnap.model.result_types import Cause, Difference, SectionStatus

ROWS_SHOWN = 40          # rows of a long table shown before "N more"
ROWS_MORE = 400          # further rows inside the closed "N more" <details>; beyond: counted only
CELL_CHARS = 24          # a workers-matrix cell; the full value is in the cell's tooltip
TOOLTIP_CHARS = 600

# ids become anchors: only envsnap's own form is used
PATCH_ID = re.compile(r"patch-[0-9]{1,6}")


def capped(rows: List[Any], row_format: Optional[Callable[[Any], Dict[str, Any]]] = None) -> Dict[str, Any]:
    """Split a long list for display: shown, more (closed details), hidden count.

    `row_format` turns a raw item into a display row; it runs only on the rows that are displayed,
    so a 20,000-entry table costs what its 440 displayed rows cost.
    """
    shape = row_format or (lambda row: row)
    return {
        "shown": [shape(r) for r in rows[:ROWS_SHOWN]],
        "more": [shape(r) for r in rows[ROWS_SHOWN:ROWS_SHOWN + ROWS_MORE]],
        "hidden": max(0, len(rows) - ROWS_SHOWN - ROWS_MORE),
        "total": len(rows),
    }


def missing_words(raw: Union[Cause, Difference], side: str) -> Union[bool, str]:
    """False when the side has a value, else the analysis's words for it ("not captured", "clean", ...)."""
    if (raw["good"] if side == "good" else raw["bad"]) is not None:
        return False
    return value_text(raw["change"] or "changed", side, None, fmt.value(raw["absent"] or "absent", 40))


def change_words(raw: Difference) -> str:
    return fmt.value(raw["change"] or "changed", 10)


def status_text(status: SectionStatus) -> str:
    reason = status["reason"]
    return f"{status['status']}: {fmt.value(reason, 160)}" if reason else status["status"]


