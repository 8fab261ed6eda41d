"""The one median of analysis, bisect and rendering, below every analysis sub-package.

statistics.median's value, as a float, without importing statistics (it would load fractions
and decimal into every diff). It lives here, not in runs/stats.py (which re-exports it), so that
analysis/compare, which sits above runs, can use it too.
"""
from __future__ import annotations

from typing import Sequence


def median(values: Sequence[float]) -> float:
    """statistics.median's value, as a float (raises ValueError for no values)."""
    ordered = sorted(values)
    if not ordered:
        raise ValueError("median of no values")
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return float(ordered[mid])
    return (ordered[mid - 1] + ordered[mid]) / 2.0
