"""A map of thousands of objects (integrity entries, processes, GPUs) is checked field by field over all
entries at once when the types settle it (schema._compile_object's pass_by_type), entry by entry
otherwise. Whatever path answers, the verdict and the message must be those of the entry-by-entry
walk: every wrong entry anywhere in a large map is refused and named, every right one passes.
"""
from __future__ import annotations

import copy
import json
import random

import pytest

from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.errors import EnvsnapError
from envsnap.model import schema, store

N_ENTRIES = 3000


def _entry(i: int) -> dict:
    return {"dist": f"pkg-{i % 40}", "recorded_sha256": f"{i:064x}", "actual_sha256": f"{i + 1:064x}",
            "recorded_size": 1000 + i, "actual_size": 1001 + i}


def _snapshot(entries: dict) -> dict:
    return {"schema_version": 1, "sections": {"packages": {"status": "ok", "data": {
        "count": 1, "integrity": {"mode": "fast", "checked_files": len(entries), "modified": entries}}}}}


def _modified(snap: dict) -> dict:
    return snap["sections"]["packages"]["data"]["integrity"]["modified"]


def _verdict(snap: dict, limit: float) -> str:
    try:
        schema.validate(snap, "s.json", float_limit=limit, shapes=SECTION_SHAPES)
    except EnvsnapError as exc:
        return str(exc)
    return "ok"


ENTRY_SPEC = SECTION_SHAPES["packages"]["integrity"]["modified"][1]


def _walk_refuses(snap: dict, limit: float) -> bool:
    """The entry-by-entry walk's answer: each entry through the checker of one entry object."""
    check = schema._checker(ENTRY_SPEC, limit)
    for entry in _modified(snap).values():
        try:
            check(entry, 0)
        except schema._ShapeError:
            return True
    return False


BAD_VALUES = [("recorded_size", "12"), ("recorded_size", True), ("recorded_size", [1]), ("actual_size", {"a": 1}),
              ("actual_size", float("inf")), ("actual_size", float("nan")), ("actual_size", 2 ** 70),
              ("actual_size", 1e19), ("dist", 3), ("dist", 1.5), ("dist", False), ("dist", ["x"]),
              ("content", "text"), ("content", {"status": 3}), ("content", {"text": ["a"]}),
              ("content", {"size": "big"}), ("unknown_field", float("inf")), ("unknown_field", 2 ** 70),
              ("unknown_field", {"deep": json.loads("[" * 60 + "]" * 60)})]
GOOD_VARIANTS = [("content", {"status": "full", "text": "x = 1\n", "size": 6, "sha256": "ab", "redacted": False}),
                 ("dist", None), ("recorded_size", None), ("recorded_size", 2.5),
                 ("unknown_field", {"any": [1, "two", None]}), ("unknown_field", "text"), ("unknown_field", 7)]


@pytest.mark.parametrize("limit", [schema.FAST_PARSER_FLOAT_LIMIT, float("inf")], ids=["fast-parser", "exact"])
def test_one_wrong_entry_anywhere_in_a_large_map_is_refused_as_the_walk_refuses_it(limit):
    rng = random.Random(16)
    base = _snapshot({f"pkg-{i % 40}/mod_{i}.py": _entry(i) for i in range(N_ENTRIES)})
    assert _verdict(base, limit) == "ok"
    keys = list(_modified(base))
    for field, value in BAD_VALUES:
        for position in (0, 1, rng.randrange(2, N_ENTRIES - 1), N_ENTRIES - 1):
            if value == 2 ** 70 and limit == schema.FAST_PARSER_FLOAT_LIMIT:
                continue  # never in the fast parser's data (it reads such a literal as a float; see below)
            entry = _modified(base)[keys[position]]
            kept = dict(entry)
            entry[field] = value  # one wrong entry, put back after (a copy of 3,000 entries each time cost seconds)
            try:
                got = _verdict(base, limit)
                assert (got != "ok") == _walk_refuses(base, limit), (field, value, position)
                if got != "ok":
                    # the message names the entry and the field, as the walk's path does
                    assert f"modified.{keys[position]}.{field}" in got, got
            finally:
                entry.clear()
                entry.update(kept)


@pytest.mark.parametrize("limit", [schema.FAST_PARSER_FLOAT_LIMIT, float("inf")], ids=["fast-parser", "exact"])
def test_uneven_entries_and_nested_values_pass_where_the_walk_passes_them(limit):
    base = _snapshot({f"f{i}.py": _entry(i) for i in range(N_ENTRIES)})
    for field, value in GOOD_VARIANTS:
        snap = copy.deepcopy(base)
        for i, entry in enumerate(_modified(snap).values()):
            if i % 7 == 0:
                entry[field] = value
            if i % 11 == 0:
                entry.pop("dist")  # a field some entries lack
        assert _verdict(snap, limit) == "ok" and not _walk_refuses(snap, limit), field
    # As many fields in every entry, not the same ones: each field is still checked where it is.
    snap = copy.deepcopy(base)
    for i, entry in enumerate(_modified(snap).values()):
        if i % 2:
            entry["odd_size"] = entry.pop("actual_size")
    assert _verdict(snap, limit) == "ok"
    list(_modified(snap).values())[-1]["odd_size"] = float("nan")
    assert "odd_size' must be a number within range, not nan" in _verdict(snap, limit)
    assert _walk_refuses(snap, limit)


@pytest.mark.parametrize("literal, message", [
    ('"1000"', "must be a number, not a string"),
    ("1180591620717411303424", "must be a number within range, not 1180591620717411303424"),  # 2 ** 70
    ("1e400", "must be a number within range, not inf"),
])
def test_a_large_map_read_from_a_file_is_refused_with_the_entry_named(tmp_path, literal, message):
    entries = {f"f{i}.py": _entry(i) for i in range(N_ENTRIES)}
    entries["f2999.py"]["recorded_size"] = 123454321
    path = tmp_path / "s.json"
    path.write_text(json.dumps(_snapshot(entries)).replace("123454321", literal))
    with pytest.raises(EnvsnapError, match=message) as refused:
        store.load(str(path), SECTION_SHAPES)
    assert "'sections.packages.data.integrity.modified.f2999.py.recorded_size'" in str(refused.value)
