"""Which items of two lists of JSON scalars DeepDiff's tree view reports as changed, without DeepDiff.

Why: importing DeepDiff costs 140 ms (it imports cachebox, hence asyncio) and, in a venv that has
them (every SGLang venv), numpy, pandas, polars and pydantic too: a few hundred ms more, most of an
`envsnap diff` whose only changed lists hold scalars (NCCL's algorithms, a CPU set, a load average).
The lists of objects stay with DeepDiff (analysis/compare/diff.py).

What is reproduced, step by step, is DeepDiff 9's ordered-iterable diff for items of its basic types
(deepdiff/diff.py, DeepDiff 9.1.0: `_diff_iterable_in_order`, `_diff_ordered_iterable_by_difflib`,
`_diff_by_forming_pairs_and_comparing_one_by_one`, `_compare_in_order`, with default options):
  1. difflib.SequenceMatcher(None, t1, t2, autojunk=False) opcodes: `delete` reports each t1 index,
     `insert` each t2 index, `replace` pairs the two slices in order (zip_longest);
  2. a pair reports an item added by its t2-side index, and its t1-side index for an item removed,
     for two items equal at different indices (item moved), or for two that differ in type (1 vs
     1.0 vs True: type change) or value;
  3. when that gives more than one report, the whole lists paired index by index are tried too, and
     the pass with fewer reports wins (a tie goes to the index-by-index pass).
A report's path ends with the index of the side the item is on (DiffLevel.path follows t1's child
relationship, t2's where the item is not in t1). tests/analysis/compare/test_scalar_lists.py checks the answer against DeepDiff's
own on random lists.
"""
from __future__ import annotations

from itertools import zip_longest
from typing import Any, List, Optional, Set

_SCALARS = frozenset({str, int, float, bool, type(None)})
_ABSENT = object()


def changed_indices(t1: Any, t2: Any) -> Optional[Set[int]]:
    """The list indices DeepDiff's tree view names for t1 -> t2, or None unless both are lists of JSON
    scalars (the caller then asks DeepDiff)."""
    if type(t1) is not list or type(t2) is not list:
        return None
    if not set(map(type, t1)) <= _SCALARS or not set(map(type, t2)) <= _SCALARS:
        return None
    from difflib import SequenceMatcher  # here: most diffs change no list

    reports: List[int] = []
    for tag, i1, i2, j1, j2 in SequenceMatcher(None, t1, t2, autojunk=False).get_opcodes():
        if tag == "replace":
            reports.extend(_paired(t1, t2, i1, i2, j1, j2))
        elif tag == "delete":
            reports.extend(range(i1, i2))
        elif tag == "insert":
            reports.extend(range(j1, j2))
    if len(reports) > 1:
        index_by_index = _paired(t1, t2, 0, len(t1), 0, len(t2))
        if len(reports) >= len(index_by_index):
            reports = index_by_index
    return set(reports)


def _paired(t1: List[Any], t2: List[Any], i1: int, i2: int, j1: int, j2: int) -> List[int]:
    """The reports of t1[i1:i2] and t2[j1:j2] paired in order: one index per report."""
    out = []
    for offset, (x, y) in enumerate(zip_longest(t1[i1:i2], t2[j1:j2], fillvalue=_ABSENT)):
        index = i1 + offset
        if x is _ABSENT:  # added: named by its t2-side index
            out.append(j1 + offset)
        elif y is _ABSENT:  # removed
            out.append(index)
        elif x == y and index != j1 + offset:  # moved
            out.append(index)
        elif type(x) is not type(y) or x != y:  # type change / value change
            out.append(index)
    return out
