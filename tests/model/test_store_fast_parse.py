"""The orjson fast path of store.parse/load gives exactly what the strict json reading gives.

orjson is optional: where it is installed, every document here is read both ways (the fast path
alone, and the reference `_parse_exact`) and the answers must be the same, value for value (types
included) and message for message. Documents: the example snapshots, a real capture, and edge
cases for each difference between the two parsers (duplicate keys, \\u003a escapes, integers
beyond 64 bits where validation looks and where it does not, NaN, lone surrogates, depth).
"""
from __future__ import annotations

import json
import random

import pytest
from helpers import REPO_ROOT
from helpers.hardening import mutate_bytes, rich_snapshot

from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.errors import EnvsnapError
from envsnap.model import store

orjson = pytest.importorskip("orjson")

NUMBERS = ["9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
           "18446744073709551615", "18446744073709551616", "123456789012345678901234567890", "9.3e18", "1e19",
           "1e308", "5e-324", "1E400", "-0", "-0.0", "100000000000000000000.0", "12345678901234567"]
PLACES = [
    '{"schema_version": 1, "x": %s}',
    '{"schema_version": 1, "sections": {"env": {"status": "ok", "extra": %s, "data": {}}}}',
    '{"schema_version": 1, "sections": {"host": {"status": "ok", "data": {"cpu": {"mhz": %s}}}}}',
    '{"schema_version": 1, "sections": {"packages": {"status": "ok", "data": {"count": %s}}}}',
    '{"schema_version": 1, "runs": [{"metrics": {"tok_s": %s}}]}',
    '{"schema_version": 1, "sections": {"env": {"status": "ok", "elapsed_s": %s}}}',
    '{"schema_version": %s}',
    '{"schema_version": 1, "nodes": {"h": {"sections": {"env": {"status": "ok", "w": [%s]}}, "x": %s}}}',
]
ODD = [
    '{"schema_version": 1, "a": 1, "a": 2}', '{"schema_version": 1, "s": {"k": "x:y", "k": "z"}}',
    '{"schema_version": 1, "s": {"k\\u003a": 1, "k\\u003a": 2}}', '{"schema_version": 1, "s": {"k": "\\u003a", "k": 2}}',
    '{"schema_version": 1, "sections": {"env": {"status": "ok", "status": "ok"}}}',
    '{"schema_version" : 1 , "x" : { "a" : 1 , "a" : 1 } }', '{"schema_version": 1, "x": "\\\\u003a", "y": 1}',
    '{"schema_version": 1, "x": "\\u0000\\u001f\\b\\f\\n\\r\\t\\/\\"\\\\"}', '{"schema_version": 1, "label": "a\\udcffb"}',
    '{"schema_version": 1, "label": "\\ud800\\udc00"}', '{"schema_version": 1, "label": "\\udc00\\ud800"}',
    '{"schema_version": 1, "x": NaN}', '{"schema_version": 1, "x": -Infinity}', "[" * 3000 + "]" * 3000,
    '{"schema_version": 1, "x": ' + "[" * 300 + "]" * 300 + "}", '\ufeff{"schema_version": 1}', "", "  ",
    '{"schema_version": 1}{}', '{"schema_version": 1, "x": "\x01"}', '{"schema_version":1}\r\n',
]


def _outcome(call, doc):
    try:
        return "ok", repr(call(doc, "doc.json"))
    except EnvsnapError as exc:
        return "refused", str(exc)


def _documents():
    docs = [place % ((n,) * place.count("%s")) for place in PLACES for n in NUMBERS] + ODD
    for name in ("eagle3-tp8-good.json", "eagle3-tp8-bad.json"):
        path = REPO_ROOT / "snapshots" / name
        if path.exists():
            docs.append(path.read_text())
    docs.append(json.dumps(rich_snapshot(packages=20, env_vars=30, integrity=10, workers=3, worker_vars=10)))
    rnd = random.Random(16)
    seeds = [d.encode() for d in docs[-3:]]
    for _ in range(300):
        try:
            docs.append(mutate_bytes(rnd.choice(seeds), rnd).decode("utf-8"))
        except UnicodeDecodeError:
            continue
    return docs


def test_fast_path_answers_exactly_as_the_strict_reading():
    fast_answers = 0
    for doc in _documents():
        reference = _outcome(store._parse_exact, doc)
        assert _outcome(store.parse, doc) == reference, doc[:200]
        fast = store._fast_parse(doc, "doc.json", SECTION_SHAPES)
        if fast is not None:
            fast_answers += 1
            assert ("ok", repr(fast)) == reference, doc[:200]
        raw = doc.encode("utf-8", "surrogatepass")
        fast_raw = store._fast_parse(raw, "doc.json", SECTION_SHAPES)
        if fast_raw is not None:
            assert ("ok", repr(fast_raw)) == reference, doc[:200]
    assert fast_answers > 50  # the fast path is really taken, not always declined


def test_load_of_a_big_snapshot_takes_the_fast_path_and_equals_the_reference(tmp_path):
    snap = rich_snapshot(packages=200, env_vars=300, integrity=2000, workers=8, worker_vars=100)
    path = tmp_path / "big.json"
    store.save(snap, str(path))
    text = path.read_text()
    assert store._fast_parse(path.read_bytes(), str(path), SECTION_SHAPES) is not None
    assert repr(store.load(str(path), SECTION_SHAPES)) == repr(store._parse_exact(text, str(path), SECTION_SHAPES))


def test_duplicate_keys_hidden_by_the_fast_parser_are_still_refused(tmp_path):
    path = tmp_path / "dup.json"
    snap = rich_snapshot(packages=5, env_vars=8, integrity=3, workers=2, worker_vars=5)
    text = store.dumps(snap).replace('"schema_version": 1', '"schema_version": 1, "schema_version": 1', 1)
    path.write_text(text)
    with pytest.raises(EnvsnapError, match="duplicate key 'schema_version'"):
        store.load(str(path))
