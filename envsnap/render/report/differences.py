"""All differences, by category (volatile ones apart), each category's rows capped."""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List

from envsnap import format as fmt
from envsnap.analysis.compare.view_model import category_key
from envsnap.model.result_types import Difference, DiffResult
from envsnap.render.report.common import capped, change_words, missing_words


def differences_view(result: DiffResult) -> Dict[str, Any]:
    groups: Dict[str, List[Difference]] = {}
    volatile: List[Difference] = []
    for raw in result["differences"]:
        if raw["volatile"]:
            volatile.append(raw)
        else:
            groups.setdefault(raw["category"] or "other", []).append(raw)

    def row(raw: Difference) -> Dict[str, Any]:
        return {"key": fmt.value(raw["key"], 240), "change": change_words(raw),
                "good": fmt.value(raw["good"]), "bad": fmt.value(raw["bad"]),
                "good_absent": missing_words(raw, "good"), "bad_absent": missing_words(raw, "bad")}
    categories = []
    for name in sorted(groups, key=category_key):
        rows = groups[name]
        counts = Counter(change_words(r) for r in rows)
        categories.append({"name": fmt.value(name, 60), "rows": capped(rows, row), "counts": sorted(counts.items())})
    total = sum(len(r) for r in groups.values())
    return {"categories": categories, "volatile": capped(volatile, row), "total": total, "open": total <= 60}
