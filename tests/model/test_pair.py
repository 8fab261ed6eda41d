"""model/pair.py and cli/options.analyze_pair: a big pair is analysed while a forked child validates it.

Whatever the files hold, the answer must be the sequential one's (store.load of GOOD, then of BAD,
then the analysis): the same result, or the same one-line error. Tests force the parallel path on
small files (min_bytes=0 / PARALLEL_MIN_BYTES=0); one CLI test crosses the real threshold.
"""
from __future__ import annotations

import json
import os
import random
import threading

import pytest
from helpers.hardening import mutate_bytes, rich_snapshot, run_cli

from envsnap.analysis import result as result_mod
from envsnap.capture.collectors import SECTION_SHAPES
from envsnap.cli import options
from envsnap.errors import EnvsnapError
from envsnap.model import pair, store

pytest.importorskip("orjson")


def _write(path, snap):
    path.write_text(json.dumps(snap, sort_keys=True))
    return str(path)


@pytest.fixture()
def files(tmp_path):
    good = _write(tmp_path / "good.json", rich_snapshot("good", seed=1, integrity=200, workers=3))
    bad = _write(tmp_path / "bad.json", rich_snapshot("bad", seed=2, integrity=200, workers=3))
    return good, bad


def _sequential(good, bad):
    try:
        g, b = store.load(good, SECTION_SHAPES), store.load(bad, SECTION_SHAPES)
        return "ok", result_mod.analyze(g, b, good_file=good, bad_file=bad)
    except EnvsnapError as exc:
        return "refused", str(exc)


def _parallel(good, bad, monkeypatch):
    monkeypatch.setattr(pair, "PARALLEL_MIN_BYTES", 0)
    try:
        result = options.analyze_pair(
            good, bad, lambda g, b: result_mod.analyze(g, b, good_file=good, bad_file=bad))
        return "ok", result
    except EnvsnapError as exc:
        return "refused", str(exc)


def test_a_valid_pair_is_parsed_at_once_and_confirmed_by_the_child(files):
    good, bad = files
    with pair.read(good, bad, SECTION_SHAPES, min_bytes=0) as snaps:
        assert not snaps.validated  # the child's answer is pending
        assert snaps.confirmed() and snaps.validated
        assert snaps.good == store.load(good, SECTION_SHAPES)
        assert snaps.bad == store.load(bad, SECTION_SHAPES)


def test_analyze_pair_gives_the_sequential_answer_for_valid_and_damaged_files(files, tmp_path, monkeypatch):
    good, bad = files
    assert _parallel(good, bad, monkeypatch) == _sequential(good, bad)
    seeds = {side: open(path, "rb").read() for side, path in (("good", good), ("bad", bad))}
    targeted = {
        # a wrong type deep in the integrity map, a duplicate key, a 2^70 integer, a NaN, an escaped colon
        "good": seeds["good"].replace(b'"recorded_size": ', b'"recorded_size": "x", "y": ', 1),
        "bad": seeds["bad"].replace(b'"schema_version": 1', b'"schema_version": 1, "label": "a", "label": "b"', 1),
    }
    cases = [("good", targeted["good"]), ("bad", targeted["bad"]),
             ("bad", seeds["bad"].replace(b'"recorded_size": ', b'"recorded_size": 1180591620717411303424, "z": ', 1)),
             ("good", seeds["good"].replace(b'"recorded_size": ', b'"recorded_size": NaN, "z": ', 1)),
             ("bad", seeds["bad"].replace(b'"label": "bad"', b'"label": "b\\u003ad"', 1))]
    rnd = random.Random(7)
    cases += [(side, mutate_bytes(seeds[side], rnd)) for side in ("good", "bad") * 12]
    refused = 0
    for i, (side, data) in enumerate(cases):
        path = tmp_path / f"case-{i}.json"
        path.write_bytes(data)
        g, b = (str(path), bad) if side == "good" else (good, str(path))
        expected = _sequential(g, b)
        assert _parallel(g, b, monkeypatch) == expected, (i, side)
        refused += expected[0] == "refused"
    assert refused >= len(cases) // 3  # the cases do exercise refusals, not only valid files


def test_good_is_judged_first_when_bad_cannot_be_read(files, tmp_path, monkeypatch):
    good, _ = files
    broken = tmp_path / "broken.json"
    broken.write_text('{"schema_version": 1, "label": 3}')
    absent = str(tmp_path / "absent.json")
    for g, message in ((good, f"{absent}: no such file"), (str(broken), f"{broken}: 'label' must be a string")):
        assert _parallel(g, absent, monkeypatch) == ("refused", message) == _sequential(g, absent)


def test_an_abandoned_check_is_killed_and_reaped(files):
    good, bad = files
    snaps = pair.read(good, bad, SECTION_SHAPES, min_bytes=0)
    pid = snaps._checker[0]
    snaps.close()
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # reaped: not a child any more
    assert snaps._checker is None


def test_no_fork_while_another_thread_runs(files):
    good, bad = files
    stop = threading.Event()
    worker = threading.Thread(target=stop.wait)
    worker.start()
    try:
        with pair.read(good, bad, SECTION_SHAPES, min_bytes=0) as snaps:
            assert snaps.validated and snaps._checker is None  # loaded the sequential way
    finally:
        stop.set()
        worker.join()


@pytest.mark.slow  # two CLI runs on 2 MiB+ files
def test_cli_on_a_pair_above_the_threshold_answers_as_the_sequential_load(tmp_path):
    good_snap = rich_snapshot("good", seed=1, integrity=6000, workers=8, worker_vars=60)
    bad_snap = rich_snapshot("bad", seed=2, integrity=6000, workers=8, worker_vars=60)
    good, bad = _write(tmp_path / "good.json", good_snap), _write(tmp_path / "bad.json", bad_snap)
    assert os.path.getsize(good) + os.path.getsize(bad) >= pair.PARALLEL_MIN_BYTES
    out = run_cli("diff", good, bad, "--format", "json")
    assert out.returncode == 1, out.stderr
    g, b = store.load(good, SECTION_SHAPES), store.load(bad, SECTION_SHAPES)
    assert json.loads(out.stdout) == json.loads(json.dumps(result_mod.analyze(g, b, good_file=good, bad_file=bad,
                                                                                   tables=True)))
    # One entry of BAD's integrity map with a wrong type: the strict reading's line, exit 2.
    bad_snap["sections"]["packages"]["data"]["integrity"]["modified"]["zz/last.py"] = {"recorded_size": "big"}
    _write(tmp_path / "bad.json", bad_snap)
    out = run_cli("diff", good, bad)
    with pytest.raises(EnvsnapError) as sequential:
        store.load(bad, SECTION_SHAPES)
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr == f"envsnap: error: {sequential.value}\n"


def test_without_orjson_a_big_pair_is_read_the_strict_way_with_the_same_answer(files, monkeypatch):
    # orjson is a dependency, but envsnap must read the same where it cannot be installed.
    good, bad = files
    expected = _sequential(good, bad)
    monkeypatch.setattr(store, "_orjson", None)
    assert not store.has_fast_parser()
    with pair.read(good, bad, SECTION_SHAPES, min_bytes=0) as snaps:
        assert snaps.validated and snaps._checker is None  # no child: nothing to parse fast
        assert snaps.good == store._parse_exact(open(good).read(), good, SECTION_SHAPES)
    assert _parallel(good, bad, monkeypatch) == expected == _sequential(good, bad)
