"""What ran, read back from real captures: who loaded what, who can read a variable, what changed per process."""
from __future__ import annotations

import ctypes.util
import shutil
import sys

import pytest
from helpers.workers import clean_env, start, stop, wait_line

from envsnap.analysis.compare import libraries as libs
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext

LOADER = r"""
import ctypes, sys
for path in sys.argv[1:]:
    ctypes.CDLL(path)
print("LOADED", flush=True)
sys.stdin.read()
"""


def _gomp():
    name = ctypes.util.find_library("gomp")
    if not name:
        pytest.skip("no system libgomp")
    return name


def _snapshot(libraries, **env):
    """A real capture (libraries and python sections) of a process that loaded `libraries`."""
    proc = start([sys.executable, "-c", LOADER, *libraries], env=clean_env(**env))
    try:
        wait_line(proc, "LOADED")
        return runner.capture(CaptureContext(pids=[proc.pid], timeout=30), only=["libraries", "python"])
    finally:
        stop(proc)


def test_who_loaded_and_who_can_read_omp_num_threads():
    snap = _snapshot([_gomp()], OMP_NUM_THREADS="4")
    found = libs.loaded(snap, "libgomp.so*")
    assert [(f.process, f.name) for f in found] == [("python-0", "libgomp.so.1")] and found[0].version
    assert libs.loaded(snap, "libnccl.so*") == []  # "no measured process loaded libnccl"
    evidence = libs.who_can_read(snap, "OMP_NUM_THREADS")
    gomp = [r for r in evidence.readers if r.name == "libgomp.so.1"]
    assert evidence.checked and gomp and gomp[0].how == "mentions" and gomp[0].processes == ("python-0",)
    # Nothing the process loaded names this one; but the process runs Python code the probe did not
    # watch, so the absence proves nothing: the gap says so.
    other = libs.who_can_read(snap, "ENVSNAP_TEST_NOBODY_READS_THIS")
    assert other.readers == () and not other.checked
    assert any("not looked up" in gap for gap in other.gaps)
    assert any("runs Python code" in gap for gap in other.gaps)


def test_the_same_soname_from_another_file_is_a_change_of_that_process(tmp_path):
    gomp = _gomp()
    good = _snapshot([gomp])
    other_dir = tmp_path / "other"
    other_dir.mkdir()
    real = libs.loaded(good, "libgomp.so*")[0].path
    shutil.copyfile(real, other_dir / "libgomp.so.1.0.0")
    bad = _snapshot([str(other_dir / "libgomp.so.1.0.0")])
    changes = libs.library_changes(good, bad)
    gomp_changes = [c for c in changes if c.name == "libgomp.so.1"]
    assert len(gomp_changes) == 1 and gomp_changes[0].kind == "changed"
    change = gomp_changes[0]
    assert change.good.path == real and change.bad.path == str(other_dir / "libgomp.so.1.0.0")
    assert change.summary.startswith("python-0 maps libgomp.so.1 from ") and "instead of " + real in change.summary
    assert change.bad.owner == "unknown"
    # Nothing else differs between the two processes.
    assert [c for c in changes if c.name != "libgomp.so.1"] == []


def test_an_object_missing_on_one_side_is_added_or_removed():
    gomp = _gomp()
    with_gomp, without = _snapshot([gomp]), _snapshot([])
    assert [(c.kind, c.name) for c in libs.library_changes(without, with_gomp)] == [("added", "libgomp.so.1")]
    assert [(c.kind, c.name) for c in libs.library_changes(with_gomp, without)] == [("removed", "libgomp.so.1")]


def test_an_object_mapped_in_some_runs_only_is_no_key_of_any_side():
    """Which side 'has' an object mapped in only some runs of one side followed when the maps were sampled: the
    comparison of two snapshots and the association over several drop it from every view compared."""
    from envsnap.analysis.compare import views

    def snap(objects, varies=None):
        proc = {"objects": objects, "runs": [1, 2], "status": "ok"}
        if varies:
            proc["varies"] = varies
        table = {path: {"status": "ok", "build_id": "ab" * 20, "owner": {"kind": "unknown"}} for path in objects.values()}
        return {"schema_version": 1, "sections": {"libraries": {"status": "ok", "data": {
            "processes": {}, "objects": table, "run_processes": {"python-0": proc}}}}}

    stable = {"libc.so.6": "/lib/libc.so.6"}
    late = dict(stable, **{"_json.so": "/py/_json.so"})
    good = snap(late, varies={"2": {"added": [], "removed": ["/py/_json.so"]}})  # run 2 was read before the import
    bad = snap(stable)
    built = [views.build_view(s, {"libraries"}) for s in (good, bad)]
    assert "libraries.run/python-0._json.so" in built[0].unstable
    views.drop_unstable(built)
    assert [sorted(v.values["libraries"]) for v in built] == [["libraries.run/python-0.libc.so.6"]] * 2


def test_a_mapped_process_finds_its_probe_record_by_key_or_any_of_its_pids():
    """A run command's process is seen once per run (a pid each): a record of any of those runs is its own."""
    records = {"python-0": {"pid": 10}, "1/python-0": {"pid": 21}, "2/python-0": {"pid": 22}}
    assert libs.probe_record_of(records, {"probe_key": "python-0", "pid": 99}) is records["python-0"]
    assert libs.probe_record_of(records, {"pid": 20, "pids": [20, 22]}) is records["2/python-0"]
    assert libs.probe_record_of(records, {"pid": 30, "pids": [30, 31]}) is None
    assert libs.probe_record_of(records, {"probe_key": "gone", "pid": 10}) is records["python-0"]


def test_an_object_loaded_late_on_one_side_and_missing_on_the_other_is_no_key():
    """A short benchmark process read once, early, on GOOD and later on BAD: what BAD's process loaded after its
    first read is missing on GOOD because of when the reads came. Loaded from the start (not late), a presence on
    one side only is a difference; late but mapped on both sides, it is compared as ever."""
    from envsnap.analysis.compare import views

    def snap(objects, late=()):
        proc = {"objects": objects, "runs": [1], "status": "ok", "late": list(late)}
        table = {path: {"status": "ok", "build_id": "ab" * 20, "owner": {"kind": "unknown"}} for path in objects.values()}
        return {"schema_version": 1, "sections": {"libraries": {"status": "ok", "data": {
            "processes": {}, "objects": table, "run_processes": {"python-0": proc}}}}}

    base = {"libc.so.6": "/lib/libc.so.6"}
    with_math = dict(base, **{"math.so": "/py/math.so"})
    early, later = snap(base), snap(with_math, late=["/py/math.so"])
    built = [views.build_view(s, {"libraries"}) for s in (early, later)]
    views.drop_unstable(built)
    assert [sorted(v.values["libraries"]) for v in built] == [["libraries.run/python-0.libc.so.6"]] * 2
    built = [views.build_view(s, {"libraries"}) for s in (early, snap(with_math))]  # mapped from its first read
    views.drop_unstable(built)
    assert "libraries.run/python-0.math.so" in built[1].values["libraries"]
    built = [views.build_view(s, {"libraries"}) for s in (snap(with_math), later)]  # on both sides
    views.drop_unstable(built)
    assert all("libraries.run/python-0.math.so" in v.values["libraries"] for v in built)
