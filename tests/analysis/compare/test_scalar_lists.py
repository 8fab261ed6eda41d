"""analysis/compare/scalar_lists.py names the same list items as DeepDiff's tree view, for lists of JSON scalars.

Reference: DeepDiff itself (the version installed, with the options analysis/compare/diff.py passes), on
random lists drawn from small alphabets so that runs of equal items, insertions, deletions, moves
and the 1 / 1.0 / True type changes all occur.
"""
from __future__ import annotations

import random

from hypothesis import given, settings, strategies as st

from envsnap.analysis.compare.scalar_lists import changed_indices

_ITEMS = st.sampled_from([0, 1, 2, 3, 1.0, 2.5, True, False, None, "a", "b", "NVLS", "Ring", ""])


def _deepdiff_indices(t1, t2):
    from deepdiff import DeepDiff

    tree = DeepDiff({"k": t1}, {"k": t2}, view="tree", cache_size=0, threshold_to_diff_deeper=0)
    found = set()
    for levels in tree.values():
        for level in levels:
            path = level.path(output_format="list")
            assert path[0] == "k"
            if len(path) == 1:
                return None  # the whole list reported (not a list-item answer)
            found.add(path[1])
    return found


@settings(max_examples=400, deadline=None)
@given(st.lists(_ITEMS, max_size=9), st.lists(_ITEMS, max_size=9))
def test_changed_items_are_deepdiffs(t1, t2):
    assert changed_indices(t1, t2) == _deepdiff_indices(t1, t2)


def test_edits_of_longer_lists_are_deepdiffs():
    rnd = random.Random(16)
    for _ in range(300):
        t1 = [rnd.choice([1, 2, 3, 4, 1.0, "x", "y", None, True]) for _ in range(rnd.randint(0, 40))]
        t2 = list(t1)
        for _ in range(rnd.randint(1, 5)):
            roll = rnd.random()
            if roll < 0.3 and t2:
                t2.pop(rnd.randrange(len(t2)))
            elif roll < 0.6:
                t2.insert(rnd.randint(0, len(t2)), rnd.choice([1, 5, "z", 2.0]))
            elif t2:
                t2[rnd.randrange(len(t2))] = rnd.choice([0, 9, "w", False])
        assert changed_indices(t1, t2) == _deepdiff_indices(t1, t2), (t1, t2)


def test_lists_holding_objects_are_left_to_deepdiff():
    assert changed_indices([{"a": 1}], [{"a": 2}]) is None
    assert changed_indices([[1]], [[2]]) is None
    assert changed_indices((1, 2), [1, 2]) is None
    assert changed_indices(["NVLS"], ["Ring"]) == {0}
