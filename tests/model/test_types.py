"""The snapshot's TypedDicts (model/types.py) and the validation table (model/schema.py) name the
same fields: a field added to one and not the other fails here."""
from __future__ import annotations

import json

from helpers import REPO_ROOT

from envsnap.model import schema, store
from envsnap.model.types import Run, Section, Snapshot


def test_run_fields_are_the_schema_run_fields():
    assert set(Run.__annotations__) == set(schema._RUN)


def test_section_fields_are_the_schema_section_fields():
    assert set(Section.__annotations__) == set(schema._SECTION_FIELDS)


def test_snapshot_fields_cover_the_schema_top_level():
    assert set(schema._TOP) <= set(Snapshot.__annotations__)
    assert {"schema_version", "sections", "nodes"} <= set(Snapshot.__annotations__)


def test_a_shipped_snapshot_uses_only_typed_top_level_fields():
    snap = store.load(str(REPO_ROOT / "snapshots" / "eagle3-tp8-bad.json"))
    assert set(snap) <= set(Snapshot.__annotations__), set(snap) - set(Snapshot.__annotations__)
    for run in snap["runs"]:
        assert set(run) <= set(Run.__annotations__), set(run) - set(Run.__annotations__)
    for section in snap["sections"].values():
        assert set(section) <= set(Section.__annotations__)
    json.dumps(snap)  # plain data
