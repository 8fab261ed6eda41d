"""diff names changed leaves by a plain walk where DeepDiff used to: the same differences, always.

The walk covers dicts and scalars and hands values holding a changed list to DeepDiff, so
DeepDiff (numpy and asyncio come with it) is imported only then. Reference: the same compare()
with the walk switched off, i.e. DeepDiff for everything, on many mutated snapshot pairs
(types changed, keys added and removed, lists edited, nested dicts replaced).
"""
from __future__ import annotations

import json
import random

import pytest
from helpers.hardening import rich_snapshot

from envsnap.analysis.compare import diff as diff_mod
from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.errors import EnvsnapError
from envsnap.model import store


def _mutate(node, rnd, depth=0):
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            roll = rnd.random()
            if roll < 0.03:
                continue
            out[key] = _mutate(value, rnd, depth + 1) if roll < 0.6 else value
        if rnd.random() < 0.05:
            out[f"new{rnd.randint(0, 9)}"] = rnd.choice([1, 1.0, "x", None, True, {"a": 1, "b": {"c": 2}}, [1, 2], {}])
        return out
    if isinstance(node, list):
        items = [_mutate(v, rnd, depth + 1) if rnd.random() < 0.2 else v for v in node]
        if rnd.random() < 0.2 and items:
            items.pop(rnd.randrange(len(items)))
        if rnd.random() < 0.2:
            items.insert(rnd.randint(0, len(items)), rnd.choice(["x", 3]))
        return items
    roll = rnd.random()
    if roll < 0.05 and depth > 3:
        return rnd.choice([None, 1, 1.0, True, "s", 0, False, {"k": 1}, [1]])
    if roll < 0.1 and isinstance(node, (int, float)) and not isinstance(node, bool):
        return node + 1
    if roll < 0.1 and isinstance(node, str):
        return node + "!"
    return node


def _differences(good, bad, walk):
    saved = diff_mod._changed_leaves
    if not walk:
        diff_mod._changed_leaves = lambda *args: False  # every changed value goes to DeepDiff
    try:
        return [d.to_json() for d in diff_mod.compare(good, bad).differences]
    finally:
        diff_mod._changed_leaves = saved


@pytest.mark.slow  # ~5 s of CPU: 1,500 mutated pairs, each compared twice
def test_walk_and_deepdiff_name_the_same_changed_leaves():
    rnd = random.Random(11)
    bases = [rich_snapshot("a", seed=1, packages=8, env_vars=10, integrity=5, workers=3, worker_vars=6, metric=80.0),
             rich_snapshot("b", seed=2, packages=8, env_vars=10, integrity=5, workers=3, worker_vars=6, metric=60.0)]
    pairs = differences = nested = 0
    for _ in range(1500):
        base = rnd.choice(bases)
        try:
            good = store.parse(json.dumps(_mutate(base, rnd)), shapes=SECTION_SHAPES)
            bad = store.parse(json.dumps(_mutate(base, rnd)), shapes=SECTION_SHAPES)
        except EnvsnapError:
            continue
        walked = _differences(good, bad, walk=True)
        assert walked == _differences(good, bad, walk=False)
        pairs += 1
        differences += len(walked)
        nested += sum(1 for d in walked if any(f.count(".") > 3 for f in d["flat_keys"]))
    assert pairs >= 100 and differences >= 500 and nested >= 100, (pairs, differences, nested)
