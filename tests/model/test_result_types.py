"""The diff result's types (model/result_types.py) against the results themselves: every golden output of
`envsnap diff --format json` (tests/data/golden) has every required field of its TypedDict, no field the type
does not name, and values of the named types, so the types cannot drift from the data."""
from __future__ import annotations

import copy
import json
import typing
from pathlib import Path
from typing import Any, Set

import pytest
from helpers.result_types import is_typed_dict, mismatches

from envsnap.model import result_types
from envsnap.model.result_types import DiffResult

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden"
GOLDEN_RESULTS = sorted(GOLDEN.glob("*.json"))


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
        if is_typed_dict(tp):
            if tp in seen:
                return
            seen.add(tp)
            for hint in typing.get_type_hints(tp).values():
                visit(hint)
        for arg in typing.get_args(tp):
            visit(arg)

    visit(DiffResult)
    public = {v for k, v in vars(result_types).items() if is_typed_dict(v) and not k.startswith("_")}
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


# Declared types the data here does not reach, met by data elsewhere: no golden pair recorded run counters
# (tests/analysis/runs/test_mechanism.py checks the mechanism's factors), and the recorded patches' table and
# a patch's hunk edits need captures of a checkout (tests/analysis/compare/test_patch_status.py); a workers
# cell's later stages need a probed process that changed its os.environ (tests/probe/test_probe.py); a cause's
# size needs profiler traces or a neighbour beside runs (tests/analysis/runs/test_trace_diff.py).
NOT_MET_HERE = {"MechanismFactor", "PatchStatus", "PatchSide", "HunkStatus", "HunkEdits", "StageValue", "SizeInfo"}


def test_every_type_is_met_by_the_data():
    """Not only declared: each TypedDict is checked against some value of a golden output or of the multi-node
    result, itself or through a type that extends it (RankedCause through Cause)."""
    met: Set[Any] = set()
    for path in GOLDEN_RESULTS:
        mismatches(json.loads(path.read_text(encoding="utf-8")), DiffResult, met=met)
    mismatches(_multi_node_result(), DiffResult, met=met)
    public = {v for k, v in vars(result_types).items() if is_typed_dict(v) and not k.startswith("_")}
    fields = {tp: set(typing.get_type_hints(tp).items()) for tp in public | met}
    unmet = {tp.__name__ for tp in public - met if not any(fields[tp] <= fields[m] for m in met)}
    assert sorted(unmet - NOT_MET_HERE) == []
