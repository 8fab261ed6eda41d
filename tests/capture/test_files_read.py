"""Files the measured processes read (capture/collectors/files_read.py): real files, a real git checkout, a
real FIFO, real processes holding files open; what another section covers is skipped and counted."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
from helpers.workers import clean_env, start, stop, wait_line

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import files_read
from envsnap.measure.maps_sampling import MapsSampler
from envsnap.redact import redact_text

HOLDER = r"""
import sys
kept = open(sys.argv[1])
written = open(sys.argv[2], "w")
print("UP", flush=True)
sys.stdin.read()
"""


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # the hash cache's file: the test's own


@pytest.fixture
def holder(tmp_path):
    kept, written = tmp_path / "held.conf", tmp_path / "held.log"
    kept.write_text("threads=4\n")
    proc = start([sys.executable, "-c", HOLDER, kept, written], env=clean_env())
    wait_line(proc, "UP")
    yield proc, kept, written
    stop(proc)


def _reads(paths, reader="command/python-0"):
    reads = files_read.Reads()
    for path in paths:
        reads.add(str(path), reader, "python")
    return reads


def test_a_read_file_is_hashed_with_its_readers_and_the_covered_ones_are_counted(tmp_path):
    conf = tmp_path / "conf" / "tuning.json"
    conf.parent.mkdir()
    conf.write_text('{"block": 64}')
    site = tmp_path / "site-packages"
    (site / "pkg").mkdir(parents=True)
    (site / "pkg" / "data.json").write_text("{}")
    stdlib = tmp_path / "stdlib"
    stdlib.mkdir()
    (stdlib / "table.txt").write_text("x")
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True, timeout=60)
    (repo / "settings.yaml").write_text("a: 1\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    code = tmp_path / "conf" / "helper.py"
    code.write_text("x = 1\n")
    reads = _reads([conf, site / "pkg" / "data.json", stdlib / "table.txt", repo / "settings.yaml", fifo, code,
                    "/proc/self/status", tmp_path / "gone.json"])
    reads.add(str(conf), "scheduler_TP0", "fd")
    reads.covered, reads.stdlib = [str(site)], [str(stdlib)]
    data = files_read.hash_reads(reads, None)
    import hashlib

    assert data["files"] == {str(conf): {"sha256": hashlib.sha256(b'{"block": 64}').hexdigest(), "size": 13,
                                         "read_by": ["command/python-0", "scheduler_TP0"],
                                         "seen_by": ["python", "fd"]}}
    assert data["skipped"] == {files_read.SKIP_INSTALLED: 1, files_read.SKIP_STDLIB: 1, files_read.SKIP_GIT: 1,
                               files_read.SKIP_SPECIAL: 1, files_read.SKIP_CODE: 1, files_read.SKIP_KERNEL: 1,
                               files_read.SKIP_GONE: 1}


def test_caps_keep_the_same_files_every_time_and_say_what_they_left_out(tmp_path):
    paths = []
    for i in range(5):
        path = tmp_path / f"f{i}.bin"
        path.write_bytes(b"x" * 100)
        paths.append(path)
    by_count = files_read.hash_reads(_reads(paths), None, max_files=3)
    assert sorted(by_count["files"]) == [str(p) for p in paths[:3]]
    assert by_count["skipped"] == {files_read.SKIP_FILES: 2}
    by_bytes = files_read.hash_reads(_reads(reversed(paths)), None, max_bytes=250)
    assert sorted(by_bytes["files"]) == [str(p) for p in paths[:2]]
    assert by_bytes["skipped"] == {files_read.SKIP_BYTES: 3}


def test_paths_are_redacted_and_a_cached_hash_is_the_same_hash(tmp_path):
    secret_dir = tmp_path / "ghp_abcdefghijklmnopqrstuvwxyz0123456789AB"
    secret_dir.mkdir()
    conf = secret_dir / "conf.json"
    conf.write_text("{}")
    first = files_read.hash_reads(_reads([conf]), None)
    assert list(first["files"]) == [redact_text(str(conf))] and "ghp_" not in str(first)
    again = files_read.hash_reads(_reads([conf]), None)
    assert again == first
    conf.write_text('{"changed": true}')
    assert files_read.hash_reads(_reads([conf]), None)["files"] != first["files"]


def test_open_files_of_a_live_process_are_the_read_only_regular_ones(holder):
    proc, kept, written = holder
    found = files_read.open_for_reading(proc.pid)
    assert str(kept) in found and str(written) not in found
    assert not [p for p in found if p.startswith(("/proc/", "/dev/", "socket:", "pipe:"))]


def test_capture_reads_the_open_files_of_the_given_processes(holder):
    proc, kept, _ = holder
    section = files_read.collect(CaptureContext(pids=[proc.pid], no_cache=True))
    assert section["status"] == "ok", section
    from envsnap.capture.collectors import roles

    entry = section["data"]["files"][str(kept)]
    assert entry["read_by"] == [roles.safe_name(os.path.basename(sys.executable))] and entry["seen_by"] == ["fd"]
    assert files_read.collect(CaptureContext())["status"] == "unavailable"


def test_the_runs_sampler_lists_what_a_process_holds_open(holder):
    proc, kept, written = holder
    sampler = MapsSampler()
    sampler.begin_run()
    sampler.sample([proc.pid], 0.05)
    sampler.end_run()
    (entry,) = sampler.runs[0].values()
    assert str(kept) in entry["opened"] and str(written) not in entry["opened"]
    reads = files_read.Reads()
    files_read.from_samples(reads, sampler.runs)
    (key,) = sampler.runs[0]
    assert reads.readers[str(kept)] == {f"command/{key}"} and reads.how[str(kept)] == {"fd"}


# Opens the files named on each line of stdin, in order, and answers with the line; "close N" closes the Nth.
OPENER = r"""
import sys
held = []
print("UP", flush=True)
for line in sys.stdin:
    word = line.split()
    if word[0] == "close":
        held[int(word[1])].close()
    else:
        held.append(open(word[0]))
    print(line.strip(), flush=True)
"""


def test_the_sampler_takes_many_held_files_over_samples_and_looks_at_each_descriptor_once(tmp_path, monkeypatch):
    """A process holding more files than a sample looks at (MAX_NEW_FDS) has them all listed after a few
    samples; a descriptor held since the last sample is not looked at again; a number closed and opened again
    after a sample saw it closed is."""
    from envsnap.measure import maps_sampling

    monkeypatch.setattr(maps_sampling, "MAX_NEW_FDS", 4)
    looked: list = []
    real = files_read.read_only_file
    monkeypatch.setattr(files_read, "read_only_file", lambda pid, fd: looked.append(fd) or real(pid, fd))
    paths = [tmp_path / f"tuning-{i}.json" for i in range(10)]
    for path in paths:
        path.write_text("{}")
    late = tmp_path / "late.conf"
    late.write_text("x")
    proc = start([sys.executable, "-c", OPENER], env=clean_env())

    def say(line):
        proc.stdin.write(line + "\n")
        proc.stdin.flush()
        wait_line(proc, line)

    try:
        wait_line(proc, "UP")
        for path in paths:
            say(str(path))
        held = len(os.listdir(f"/proc/{proc.pid}/fd"))
        sampler = MapsSampler()
        sampler.begin_run()
        per_sample = []
        for at in (0.05, 0.15, 0.3, 0.5):
            looked.clear()
            sampler.sample([proc.pid], at)
            per_sample.append(list(looked))
        assert [len(fds) for fds in per_sample] == [min(4, max(0, held - 4 * i)) for i in range(4)]
        seen = [fd for fds in per_sample for fd in fds]
        assert len(seen) == len(set(seen)) == held  # every descriptor looked at, each once
        say("close 0")
        looked.clear()
        sampler.sample([proc.pid], 0.8)
        assert looked == []  # nothing new held
        say(str(late))  # at the number just closed: the lowest free one
        looked.clear()
        sampler.sample([proc.pid], 1.3)
        assert len(looked) == 1
        sampler.end_run()
    finally:
        stop(proc)
    (entry,) = sampler.runs[0].values()
    assert set(entry["opened"]) == {str(path) for path in paths} | {str(late)}


def test_probe_records_name_the_server_and_the_command_processes(tmp_path):
    probe = {"records": {"scheduler_TP0": {"files_opened": ["/etc/a.conf"], "site_dirs": ["/venv/site"],
                                           "stdlib_dir": "/usr/lib/python3"}},
             "command_records": {"1/python-0": {"files_opened": ["/etc/a.conf"], "files_opened_dropped": 3},
                                 "2/python-0": {"files_opened": ["/etc/b.conf"]}}}
    reads = files_read.Reads()
    files_read.from_probe(reads, probe)
    assert reads.readers == {"/etc/a.conf": {"scheduler_TP0", "command/python-0"}, "/etc/b.conf": {"command/python-0"}}
    assert reads.covered == ["/venv/site"] and reads.stdlib == ["/usr/lib/python3"] and reads.dropped == 3


def test_past_the_deadline_nothing_is_read_and_the_skip_says_so(tmp_path):
    import time

    conf = tmp_path / "tuning.json"
    conf.write_text("{}")
    data = files_read.hash_reads(_reads([conf]), time.monotonic() - 1)
    assert data["files"] == {} and data["skipped"] == {files_read.SKIP_DEADLINE: 1}
