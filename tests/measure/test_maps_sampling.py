"""What the run command's own processes mapped: sampled while they live, short-lived ones included."""
from __future__ import annotations

import json
import sys

import pytest
from helpers import run_envsnap
from helpers.workers import clean_env, start, stop, wait_line

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import libraries
from envsnap.measure.maps_sampling import MapsSampler

LATE_LOADER = r"""
import ctypes, ctypes.util, sys
print("UP", flush=True)
sys.stdin.readline()
ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")
print("LOADED", flush=True)
sys.stdin.read()
"""


@pytest.fixture
def late_loader():
    import ctypes.util

    if not ctypes.util.find_library("gomp"):
        pytest.skip("no system libgomp")
    proc = start([sys.executable, "-c", LATE_LOADER], env=clean_env(OMP_NUM_THREADS="2", RANK="3"))
    wait_line(proc, "UP")
    yield proc
    stop(proc)


def _names(run_entry):
    return {m.path.rsplit("/", 1)[-1] for m in run_entry["files"]}


@pytest.mark.parametrize("kept", ["after the run", "as read"])
def test_a_library_loaded_later_is_seen_when_the_process_is_read_again(late_loader, kept, monkeypatch):
    if kept == "as read":  # more maps text than a run keeps unparsed: each read parsed as it comes, in order
        from envsnap.measure import maps_sampling

        monkeypatch.setattr(maps_sampling, "MAX_PENDING_BYTES", 0)
    sampler = MapsSampler(min_reread_s=0.25)
    sampler.begin_run()
    sampler.sample([late_loader.pid], 0.05)
    assert sampler.reads == 1
    sampler.sample([late_loader.pid], 0.1)  # too soon: not read again
    assert sampler.reads == 1
    late_loader.stdin.write("go\n")
    late_loader.stdin.flush()
    wait_line(late_loader, "LOADED")
    sampler.sample([late_loader.pid], 0.4)
    assert sampler.reads == 2
    sampler.end_run()
    (key, entry), = sampler.runs[0].items()
    assert key == "rank3"  # a torchrun-style RANK gives the key, as in the processes section
    assert any(name.startswith("libgomp") for name in _names(entry))
    assert "OMP_NUM_THREADS" in sampler.env_names()
    # Loaded after the first read: marked late (an early read elsewhere would not have seen it), the rest not.
    assert [p.rsplit("/", 1)[-1] for p in entry["late"]] and all("gomp" in p for p in entry["late"])
    assert not any("libc.so" in p for p in entry["late"])


def test_a_process_seen_once_before_it_exits_still_counts():
    proc = start([sys.executable, "-c", "import sys; print('UP', flush=True); sys.stdin.read()"], env=clean_env())
    wait_line(proc, "UP")
    sampler = MapsSampler()
    sampler.begin_run()
    sampler.sample([proc.pid], 0.05)
    stop(proc)
    sampler.sample([proc.pid], 5.0)  # gone: nothing new, nothing lost
    sampler.end_run()
    (key, entry), = sampler.runs[0].items()
    assert key.startswith("python") and entry["files"] and entry["status"] == "ok"


def test_runs_merge_by_key_and_say_what_varied(late_loader):
    sampler = MapsSampler()
    sampler.begin_run()
    sampler.sample([late_loader.pid], 0.05)
    sampler.end_run()
    late_loader.stdin.write("go\n")
    late_loader.stdin.flush()
    wait_line(late_loader, "LOADED")
    sampler.begin_run()
    sampler.sample([late_loader.pid], 0.05)
    sampler.end_run()
    ctx = CaptureContext(timeout=30)
    ctx.start_clock()
    before = {"status": "unavailable", "reason": "not requested"}
    result = libraries.collect_after_runs(ctx, before, sampler.runs, [1, 2], extra_names=["T_FROM_PROBE"])
    assert result["status"] == "ok"
    data = result["data"]
    entry = data["run_processes"]["rank3"]
    assert entry["runs"] == [1, 2] and entry["pids"] == [late_loader.pid] * 2
    gomp = [p for p in entry["objects"].values() if "libgomp" in p]
    assert gomp and entry["varies"]["2"]["added"] == gomp and entry["varies"]["2"]["removed"] == []
    assert "OMP_NUM_THREADS" in data["objects"][gomp[0]]["mentions"]
    assert {"OMP_NUM_THREADS", "T_FROM_PROBE"} <= set(data["checked_names"])


@pytest.mark.slow
def test_envsnap_run_records_what_the_command_mapped(tmp_path):
    import ctypes.util

    if not ctypes.util.find_library("gomp"):
        pytest.skip("no system libgomp")
    out = tmp_path / "run.json"
    code = ("import ctypes, ctypes.util, json, time; ctypes.CDLL(ctypes.util.find_library('gomp')); "
            "time.sleep(0.4); print(json.dumps({'tokens_per_s': 1.0}))")
    result = run_envsnap("run", "-o", out, "-n", "1", "--", sys.executable, "-c", code,
                         env={"OMP_NUM_THREADS": "4"}, timeout=300)
    assert result.returncode == 0, result.stderr
    section = json.loads(out.read_text())["sections"]["libraries"]
    assert section["status"] == "ok", section
    data = section["data"]
    (key, entry), = data["run_processes"].items()
    gomp = [p for name, p in entry["objects"].items() if name.startswith("libgomp")]
    assert key.startswith("python") and entry["runs"] == [1] and gomp
    assert "OMP_NUM_THREADS" in data["objects"][gomp[0]]["mentions"]


def test_a_sampled_command_line_is_redacted():
    secret = "sk-" + "a1b2c3d4e5f6" * 3
    proc = start([sys.executable, "-c", "import sys; print('UP', flush=True); sys.stdin.read()", "--api-key", secret],
                 env=clean_env())
    wait_line(proc, "UP")
    sampler = MapsSampler()
    sampler.begin_run()
    sampler.sample([proc.pid], 0.05)
    sampler.end_run()
    stop(proc)
    ctx = CaptureContext(timeout=30)
    ctx.start_clock()
    data = libraries.collect_after_runs(ctx, {}, sampler.runs, [1])["data"]
    (entry,) = data["run_processes"].values()
    assert "--api-key" in entry["title"] and secret not in entry["title"] and secret not in json.dumps(data)


POOL = """\
import multiprocessing as mp, sys, time
if __name__ == "__main__":
    with mp.get_context("fork").Pool(2) as pool:
        print("UP", flush=True)
        sys.stdin.read()
"""


def test_forked_workers_with_their_parents_maps_text_are_parsed_once(monkeypatch):
    """A pool's workers, forked from one parent after it started its threads, map the same objects at the same
    addresses: the kernel's text is the same bytes, and is parsed once a run. What each worker gets is what a
    parse of its own gives."""
    import os

    from envsnap.capture.collectors import maps

    parses: list = []
    real = maps.parse
    monkeypatch.setattr(maps, "parse", lambda raw: parses.append(len(raw)) or real(raw))
    proc = start([sys.executable, "-c", POOL], env=clean_env())
    try:
        wait_line(proc, "UP")
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as handle:
            workers = [int(p) for p in handle.read().split()]
        assert len(workers) == 2
        texts = [maps.read_raw(pid).raw for pid in workers]
        assert texts[0] == texts[1]  # the premise: the workers' maps are the same bytes
        parses.clear()
        sampler = MapsSampler()
        sampler.begin_run()
        sampler.sample([proc.pid] + workers, 0.05)
        assert sampler.reads == 3 and parses == []  # read while the run goes on, parsed once it is over
        tracked = {t.seen.pid: t for t in sampler._current.values()}
        sampler.end_run()
        assert len(parses) == 2  # the parent's text, and the workers' once
        for pid in workers:
            assert sorted(tracked[pid].files.values()) == sorted(maps.from_raw(maps.read_raw(pid)).files)
        assert sampler._parsed == {} and sampler._pending_bytes == 0  # nothing kept past its run
        assert os.path.exists(f"/proc/{proc.pid}")
    finally:
        stop(proc)


def test_a_sample_lists_the_descriptors_of_the_processes_it_reads_and_of_four_others_in_turn(monkeypatch):
    """Eight known processes that map nothing new: each sample lists the descriptors of MAX_FD_LISTINGS of them,
    those listed longest ago first, so all eight are listed every two samples; a sample that reads them all
    lists them all."""
    from envsnap.measure import maps_sampling

    listed: list = []
    real = maps_sampling._note_opened
    monkeypatch.setattr(maps_sampling, "_note_opened", lambda tracked, pid: listed.append(pid) or real(tracked, pid))
    procs = [start([sys.executable, "-c", "import sys; print('UP', flush=True); sys.stdin.read()"], env=clean_env())
             for _ in range(8)]
    try:
        for proc in procs:
            wait_line(proc, "UP")
        pids = [proc.pid for proc in procs]
        sampler = MapsSampler()
        sampler.begin_run()
        rounds = []
        for at in (0.05, 0.06, 0.07, 0.08):  # too soon after the first read for any to be read again
            listed.clear()
            sampler.sample(pids, at)
            rounds.append(sorted(listed))
        sampler.end_run()
    finally:
        for proc in procs:
            stop(proc)
    assert rounds[0] == sorted(pids)  # all read at first sight, and listed
    assert [len(r) for r in rounds[1:]] == [maps_sampling.MAX_FD_LISTINGS] * 3
    assert sorted(rounds[1] + rounds[2]) == sorted(pids) and rounds[3] == rounds[1]
