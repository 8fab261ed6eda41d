"""The diff result's types (model/result_types.py) against the results themselves: every golden output of
`envsnap diff --format json` (tests/data/golden) has every required field of its TypedDict, no field the type
does not name, and values of the named types, so the types cannot drift from the data."""
from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any, List, Optional, Set, Union

import pytest

from envsnap.model import result_types
from envsnap.model.result_types import DiffResult

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
GOLDEN_RESULTS = sorted(GOLDEN.glob("*.json"))


def _is_typed_dict(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__required_keys__")


def mismatches(value: Any, tp: Any, path: str = "$", met: Optional[Set[Any]] = None) -> List[str]:
    """Where `value` does not have type `tp` (a TypedDict, List, Dict, Optional/Union, Any or a scalar);
    `met` collects every TypedDict some value was checked against."""
    if tp is Any:
        return []
    if _is_typed_dict(tp):
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not {tp.__name__}"]
        if met is not None:
            met.add(tp)
        hints = typing.get_type_hints(tp)
        out = [f"{path}: {tp.__name__} lacks {k!r}" for k in sorted(tp.__required_keys__ - set(value))]
        out += [f"{path}: {tp.__name__} has no field {k!r}" for k in sorted(set(value) - set(hints))]
        for key, item in value.items():
            if key in hints:
                out += mismatches(item, hints[key], f"{path}.{key}", met)
        return out
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin is Union:
        found = [mismatches(value, arg, path, met) for arg in args]
        return [] if any(not f for f in found) else [f"{path}: {value!r:.80} is none of {tp}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        return [m for i, item in enumerate(value) for m in mismatches(item, args[0], f"{path}[{i}]", met)]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a dict"]
        return [m for key, item in value.items()
                for m in mismatches(key, args[0], f"{path} key") + mismatches(item, args[1], f"{path}.{key}", met)]
    if tp is type(None):
        return [] if value is None else [f"{path}: {value!r:.80} is not None"]
    if tp is float:  # JSON writes a whole float as an int
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{path}: {value!r:.80} is not {tp.__name__}"]


@pytest.mark.parametrize("path", GOLDEN_RESULTS, ids=lambda p: p.name)
def test_golden_results_have_the_types(path):
    result = json.loads(path.read_text(encoding="utf-8"))
    assert mismatches(result, DiffResult) == []


def test_the_checker_sees_a_drift():
    result = json.loads(GOLDEN_RESULTS[0].read_text(encoding="utf-8"))
    result["causes"][0]["score"] = "high"
    result["causes"][0]["surprise"] = 1
    del result["verdict"]["summary"]
    found = mismatches(result, DiffResult)
    assert "$.causes[0]: Cause has no field 'surprise'" in found
    assert "$.verdict: Verdict lacks 'summary'" in found
    assert any(m.startswith("$.causes[0].score:") for m in found)


def test_every_type_is_reached_by_the_goldens():
    """Each TypedDict of the module is checked against data, itself or through a type that extends it
    (RankedCause through Cause): none is declared but never met."""
    seen = set()

    def visit(tp: Any) -> None:
        if _is_typed_dict(tp):
            if tp in seen:
                return
            seen.add(tp)
            for hint in typing.get_type_hints(tp).values():
                visit(hint)
        for arg in typing.get_args(tp):
            visit(arg)

    visit(DiffResult)
    public = {v for k, v in vars(result_types).items() if _is_typed_dict(v) and not k.startswith("_")}
    fields = {tp: set(typing.get_type_hints(tp).items()) for tp in public | seen}
    assert [tp.__name__ for tp in public - seen if not any(fields[tp] <= fields[s] for s in seen)] == []


def _multi_node_result() -> Any:
    """A single-node snapshot against a merged one (as tests/render/test_report.py builds it): the goldens are
    all single-node, so the per-node tables and the node pairing are met here."""
    from helpers.browser import contract_result, eagle3_pair

    good, bad = eagle3_pair()
    merged = {k: v for k, v in bad.items() if k != "sections"}
    merged["sections"] = {}
    merged["nodes"] = {"node-b2": {"sections": copy.deepcopy(good["sections"])}, "node-b1": {"sections": bad["sections"]}}
    return json.loads(json.dumps(contract_result(good, merged)))


def test_a_multi_node_result_has_the_types():
    assert mismatches(_multi_node_result(), DiffResult) == []


# Declared types no data here reaches yet: no golden pair recorded run counters (runs/mechanism.compare).
NOT_MET_YET = {"MechanismFactor"}


def test_every_type_is_met_by_the_data():
    """Not only declared: each TypedDict is checked against some value of a golden output or of the multi-node
    result, itself or through a type that extends it (RankedCause through Cause)."""
    met: Set[Any] = set()
    for path in GOLDEN_RESULTS:
        mismatches(json.loads(path.read_text(encoding="utf-8")), DiffResult, met=met)
    mismatches(_multi_node_result(), DiffResult, met=met)
    public = {v for k, v in vars(result_types).items() if _is_typed_dict(v) and not k.startswith("_")}
    fields = {tp: set(typing.get_type_hints(tp).items()) for tp in public | met}
    unmet = {tp.__name__ for tp in public - met if not any(fields[tp] <= fields[m] for m in met)}
    assert sorted(unmet - NOT_MET_YET) == []
