"""The libraries section on real processes: what each mapped, who installed it, which names it can read.

Real processes (a Python child that loads libgomp through ctypes and imports numpy), real files
(copies of a system library under hostile names, replaced while they are read), the real cache.
"""
from __future__ import annotations

import ctypes.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest
from helpers.workers import clean_env, start, stop, wait_line

from envsnap.capture import filestat, libcache
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import elf, lib_objects, libraries, libstrings, maps, processes


def _gomp_path():
    """A libgomp this machine has: the system's (libgomp1), else the one torch bundles."""
    name = ctypes.util.find_library("gomp")
    if name:
        child = subprocess.run([sys.executable, "-c", f"import ctypes, os; ctypes.CDLL({name!r}); "
                                "print([l.split()[-1] for l in open('/proc/self/maps') if 'libgomp' in l][0])"],
                               capture_output=True, text=True, timeout=60)
        if child.returncode == 0:
            return child.stdout.strip()
    try:
        import torch
    except ImportError:
        pytest.skip("no libgomp on this machine (neither libgomp1 nor torch)")
    path = os.path.join(os.path.dirname(torch.__file__), "lib", "libgomp.so.1")
    if not os.path.exists(path):
        pytest.skip("no libgomp on this machine")
    return os.path.realpath(path)


GOMP = None


@pytest.fixture(scope="module")
def gomp():
    global GOMP
    if GOMP is None:
        GOMP = _gomp_path()
    return GOMP


LOADER = r"""
import ctypes, sys
for path in sys.argv[1:]:
    ctypes.CDLL(path)
import numpy
print("LOADED", flush=True)
sys.stdin.read()
"""


def _ctx(**kw):
    ctx = CaptureContext(timeout=30, **kw)
    ctx.start_clock()
    return ctx


@pytest.fixture
def loader(gomp):
    proc = start([sys.executable, "-c", LOADER, gomp], env=clean_env(OMP_NUM_THREADS="3", MY_OWN_SETTING="1"))
    wait_line(proc, "LOADED")
    yield proc
    stop(proc)


def _readelf(path):
    if not shutil.which("readelf"):
        return None
    out = subprocess.run(["readelf", "-n", "-d", "-W", path], capture_output=True, text=True, timeout=60).stdout
    build = re.search(r"Build ID: ([0-9a-f]+)", out)
    soname = re.search(r"Library soname: \[(.*?)\]", out)
    return (build.group(1) if build else None, soname.group(1) if soname else None)


# --- ELF headers and strings ---

def test_elf_facts_match_readelf(gomp):
    expected = _readelf(gomp)
    if expected is None:
        pytest.skip("readelf is not installed")
    fd = os.open(gomp, os.O_RDONLY)
    try:
        facts = elf.read_elf(fd, os.fstat(fd).st_size)
    finally:
        os.close(fd)
    assert (facts.build_id, facts.soname) == expected
    assert facts.soname.startswith("libgomp.so") and facts.string_ranges and not facts.note


def test_hostile_and_truncated_files_are_not_elf_or_noted(tmp_path, gomp):
    data = open(gomp, "rb").read()
    cases = {"magic-only": b"\x7fELF" + b"\xff" * 60, "truncated": data[:200], "text": b"not a library\n" * 10,
             "huge-tables": data[:64] + b"\0" * 64}
    for name, content in cases.items():
        path = tmp_path / name
        path.write_bytes(content)
        fd = os.open(path, os.O_RDONLY)
        try:
            facts = elf.read_elf(fd, os.fstat(fd).st_size)
        except elf.NotElf:
            continue
        finally:
            os.close(fd)
        # A header that still parses must say what it could not read, and claim no strings outside the file.
        assert all(offset + size <= len(content) for offset, size in facts.string_ranges), name


def test_names_scan_is_the_same_whatever_the_chunk_size(tmp_path):
    content = (b"lower text\0OMP_NUM_THREADS\0" + b"A" * 300 + b"\0NCCL_ALGO=%s\0x9_NOT\0HOME\0"
               + b"B" * 129 + b"\0PYTHONPATH\0ok")
    path = tmp_path / "blob"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        results = {tuple(libstrings.scan(fd, [(0, len(content))], chunk=chunk)[0]) for chunk in (1, 3, 7, 64, 200, 1 << 20)}
    finally:
        os.close(fd)
    assert results == {("HOME", "NCCL_ALGO", "OMP_NUM_THREADS", "PYTHONPATH")}  # "9_NOT" starts with a digit


def test_a_name_stored_as_the_tail_of_a_longer_literal_counts_as_contained():
    found = lib_objects.mentions({"/a.so": "OMP_NUM_THREADS PYTHONPATH", "/b.so": "HOME"},
                               {"OMP_NUM_THREADS", "PATH", "HOME", "NOT_THERE"})
    assert found == {"/a.so": (["OMP_NUM_THREADS"], ["PATH"]), "/b.so": (["HOME"], [])}


# --- /proc/PID/maps ---

def test_maps_of_a_process_that_exited_and_of_a_zombie_say_gone():
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    assert maps.read(done.pid).status == "gone"
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and open(f"/proc/{zombie.pid}/stat").read().split(")")[1].split()[0] != "Z":
            time.sleep(0.02)
        found = maps.read(zombie.pid)
        assert found.status == "gone" and not found.files
    finally:
        zombie.wait()


def test_huge_maps_are_read_up_to_the_limit():
    found = maps.read(os.getpid(), limit=4096)
    assert found.status == "truncated" and found.files and "MiB" in found.note


def test_another_users_process_is_denied_never_a_crash():
    if os.geteuid() != 0:
        others = [p for p in os.listdir("/proc") if p.isdigit() and os.stat(f"/proc/{p}").st_uid != os.geteuid()]
        if not others:
            pytest.skip("no process of another user to read")
        assert maps.read(int(others[0])).status in ("denied", "gone")
        return
    # As root: a child that drops to nobody asks for this (root) process's maps.
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(read_fd)
            os.setgid(65534)
            os.setuid(65534)
            found = maps.read(os.getppid())
            os.write(write_fd, json.dumps([found.status, found.note, len(found.files)]).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        status, note, count = json.loads(pipe.read())
    os.waitpid(pid, 0)
    assert (status, count) == ("denied", 0) and "another user" in note


# --- the collector on a real process ---

def test_a_process_that_loads_libgomp_shows_omp_num_threads_mentioned_by_it(loader, gomp):
    result = libraries.collect(_ctx(pids=[loader.pid]))
    assert result["status"] == "ok", result
    data = result["data"]
    walked = processes.collect(_ctx(pids=[loader.pid]))["data"]["processes"]
    assert set(data["processes"]) == set(walked)  # keyed as the processes section keys them
    (key, proc), = data["processes"].items()
    assert proc["pid"] == loader.pid == walked[key]["pid"] and proc["status"] == "ok"
    gomp_entry = data["objects"][gomp]
    assert proc["objects"][gomp_entry["name"]] == gomp
    assert "OMP_NUM_THREADS" in gomp_entry["mentions"] and "MY_OWN_SETTING" not in gomp_entry.get("mentions", [])
    assert {"OMP_NUM_THREADS", "MY_OWN_SETTING"} <= set(data["checked_names"])
    assert gomp_entry["getenv"] is True and gomp_entry["build_id"] == (_readelf(gomp) or [gomp_entry["build_id"]])[0]
    if os.path.exists("/var/lib/dpkg/info") and gomp.startswith(("/usr/lib", "/lib")):
        assert gomp_entry["owner"]["kind"] == "package" and gomp_entry["owner"]["manager"] == "dpkg"
    # numpy's extension module: a Python extension counts, and its owner is the numpy distribution.
    import numpy

    umath = [p for p in data["objects"] if "_multiarray_umath" in p]
    assert umath and data["objects"][umath[0]]["owner"] == {"kind": "distribution", "name": "numpy",
                                                            "version": numpy.__version__}
    assert data["scan"]["complete"] is True and not data["scan"]["unscanned"]
    # The section validates against its own shape and stays small.
    from envsnap.model import schema

    assert schema.section_problem("libraries", result, libraries.SHAPE) is None
    assert len(json.dumps(data)) < 200_000


def test_a_warm_capture_reads_no_library(loader):
    first = libraries.collect(_ctx(pids=[loader.pid]))["data"]
    second = libraries.collect(_ctx(pids=[loader.pid]))["data"]
    assert first["objects"] == second["objects"]
    # System libraries are older than the racy window: every one comes from the cache, none is read.
    old = [p for p in second["objects"] if p.startswith(("/usr/", "/lib"))]
    assert old and second["scan"]["read"] == 0 and second["scan"]["bytes_read"] == 0, second["scan"]
    assert second["cache"]["used"] is True and second["cache"]["misses"] == 0


def test_no_cache_reads_everything_and_writes_nothing(loader):
    data = libraries.collect(_ctx(pids=[loader.pid], no_cache=True))["data"]
    assert data["scan"]["from_cache"] == 0 and data["scan"]["read"] > 0
    assert data["cache"]["path"] is None and "--no-cache" in data["cache"]["note"]


def test_hostile_file_names_are_read_through_the_kernels_escapes(tmp_path, gomp):
    hostile = tmp_path / "lib with spaces\nand a newline.so.1"
    shutil.copyfile(gomp, hostile)
    link = tmp_path / "link.so"
    link.symlink_to(hostile)
    proc = start([sys.executable, "-c", LOADER, str(link)], env=clean_env(OMP_NUM_THREADS="2"))
    try:
        wait_line(proc, "LOADED")
        data = libraries.collect(_ctx(pids=[proc.pid]))["data"]
    finally:
        stop(proc)
    entry = data["objects"][str(hostile)]
    assert entry["status"] == "ok" and entry["strings"] == "read" and "OMP_NUM_THREADS" in entry["mentions"]


def test_a_library_replaced_while_it_is_read_is_read_again_never_stale(tmp_path, gomp):
    copy = tmp_path / "libcopy.so.1"
    shutil.copyfile(gomp, copy)
    proc = start([sys.executable, "-c", LOADER, str(copy)], env=clean_env())
    try:
        wait_line(proc, "LOADED")
        mapped = next(m for m in maps.read(proc.pid).files if m.path == str(copy))
        cache = libcache.LibCache(None)
        describer = lib_objects.Describer(cache, deadline=time.monotonic() + 30)
        passes = []

        def grow(path, done):  # the first pass finds the file growing under it (an in-place write)
            passes.append(done)
            if len(passes) == 1:
                with open(path, "ab") as handle:
                    handle.write(b"\0ENVSNAP_APPENDED_NAME\0")

        describer.on_chunk = grow
        entry = describer.describe(mapped)
        assert entry["status"] == "ok" and len(passes) >= 2  # read again after the change
        assert entry["size"] == os.path.getsize(copy)

        # Changed on every pass: no names are claimed.
        describer = lib_objects.Describer(cache, deadline=time.monotonic() + 30)
        describer.on_chunk = lambda path, done: open(path, "ab").write(b"x")
        entry = describer.describe(mapped)
        assert entry["status"] == "changing" and "not known" in entry["note"]

        # Replaced by a rename over it (as pip does): the process runs the old file, which the section says.
        shutil.copyfile(gomp, tmp_path / "new")
        os.replace(tmp_path / "new", copy)
        data = libraries.collect(_ctx(pids=[proc.pid]))["data"]
        deleted = [k for k, v in data["objects"].items() if v.get("status") == "deleted"]
        assert deleted == [str(copy) + " (deleted)"] and deleted[0] in data["scan"]["unscanned"]
        assert data["scan"]["complete"] is False
    finally:
        stop(proc)


def test_a_cache_entry_is_not_trusted_after_the_file_changes(tmp_path, gomp, monkeypatch):
    copy = tmp_path / "libold.so.1"
    shutil.copyfile(gomp, copy)
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", 0)  # a fresh copy counts as settled
    proc = start([sys.executable, "-c", LOADER, str(copy)], env=clean_env())
    try:
        wait_line(proc, "LOADED")
        first = libraries.collect(_ctx(pids=[proc.pid]))["data"]
        assert str(copy) in first["objects"]
        again = libraries.collect(_ctx(pids=[proc.pid]))["data"]
        assert again["scan"]["read"] == 0
        with open(copy, "ab") as handle:  # same inode, new content: the cached entry must not be used
            handle.write(b"\0OMP_APPENDED\0")
        changed = libraries.collect(_ctx(pids=[proc.pid]))["data"]
        assert changed["scan"]["read"] == 1 and changed["objects"][str(copy)]["size"] == os.path.getsize(copy)
    finally:
        stop(proc)


def test_a_process_that_exits_during_the_walk_is_gone_and_the_rest_is_kept(loader):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    describer = lib_objects.Describer(libcache.LibCache(None), deadline=time.monotonic() + 30)
    objects = {}
    found = libraries.describe_processes({"python-0": loader.pid, "python-1": gone.pid}, describer, objects)
    assert found["python-1"]["status"] == "gone" and "objects" not in found["python-1"]
    assert found["python-0"]["status"] == "ok" and found["python-0"]["objects"]


def test_not_requested_costs_nothing():
    result = libraries.collect(_ctx())
    assert result["status"] == "unavailable" and "--pid" in result["reason"]


def test_a_deadline_leaves_objects_unscanned_not_silent(loader, monkeypatch):
    # The deadline passes after the process was found and before any of its objects is read. Set on
    # the capture context it would also bound the process walk, which on a busy machine can pass it
    # before reading the one process: the section is then "unavailable", with no objects to leave.
    def past_deadline(cache, deadline):
        return lib_objects.Describer(cache, deadline=time.monotonic() - 1)

    monkeypatch.setattr(libraries, "Describer", past_deadline)
    ctx = _ctx(pids=[loader.pid], no_cache=True)
    data = libraries.collect(ctx)["data"]
    assert data["processes"]["python-0"]["objects"]
    assert data["scan"]["complete"] is False and data["scan"]["unscanned"]
    assert all("deadline" in reason for reason in data["scan"]["unscanned"].values())


def test_summary_says_what_was_read(loader):
    lines = libraries.summarize(libraries.collect(_ctx(pids=[loader.pid]))["data"])
    assert lines[0].startswith("1 process, ") and "strings complete" in lines[0]
    assert any(line.startswith("python-0: pid") for line in lines)


def test_probe_records_name_the_processes_to_read(tmp_path):
    from helpers.workers import make_venv

    from envsnap.capture.collectors import probe
    from envsnap.probe import install as install_mod

    venv = make_venv(tmp_path / "venv", with_deps=True)
    install_mod.install(str(venv["site"]))
    probe_dir = tmp_path / "records"
    code = "import os; os.environ.get('T_READ_BY_PYTHON'); print('UP', flush=True); import sys; sys.stdin.read()"
    proc = start([str(venv["python"]), "-c", code], env=clean_env(ENVSNAP_PROBE_DIR=str(probe_dir)))
    try:
        wait_line(proc, "UP")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not list(probe_dir.glob("*.json")):
            time.sleep(0.05)
        data = libraries.collect(_ctx(probe_dir=str(probe_dir)))["data"]
        keys = set(probe.collect(_ctx(probe_dir=str(probe_dir)))["data"]["records"])
    finally:
        stop(proc)
    (key, entry), = data["processes"].items()
    assert key in keys and entry["source"] == "probe" and entry["pid"] == proc.pid and entry["objects"]


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="POSIX only")
def test_the_collector_never_raises_on_a_vanishing_tree(loader):
    child = start([sys.executable, "-c", "import time; time.sleep(30)"], env=clean_env())
    os.kill(child.pid, signal.SIGKILL)
    result = libraries.collect(_ctx(pids=[loader.pid, child.pid]))
    assert result["status"] == "ok"
    stop(child)


def test_a_damaged_cache_file_is_ignored_with_a_note_and_replaced(loader):
    libraries.collect(_ctx(pids=[loader.pid]))  # makes sure the file exists
    path = libcache.LibCache.open().path
    with open(path, "r+b") as handle:  # flip bytes in the middle: the checksum no longer matches
        handle.seek(os.path.getsize(path) // 2)
        handle.write(b"\xff\xfe\xfd")
    damaged = libraries.collect(_ctx(pids=[loader.pid]))["data"]
    assert "cache ignored" in damaged["cache"]["note"] and damaged["scan"]["read"] > 0
    again = libraries.collect(_ctx(pids=[loader.pid]))["data"]
    assert again["cache"].get("note") is None and again["cache"]["hits"] > 0


@pytest.mark.parametrize("how", ["truncated", "rewritten"])
def test_a_mapped_library_changed_in_place_is_kept_and_the_scan_incomplete(tmp_path, gomp, how):
    """Found on main: a library a process had mapped, then truncated or rewritten in place (same inode: `cp`
    over it, a crashed install), was no ELF object when read, so it was counted as a non-code file and left
    out, and the scan still said complete. The process maps it executable: it is kept, with its path, the
    stat identity of what is on disk now and the reason, and the scan says which object it could not read."""
    copy = tmp_path / "libchanged.so.1"
    shutil.copyfile(gomp, copy)
    proc = start([sys.executable, "-c", LOADER, str(copy)], env=clean_env())
    try:
        wait_line(proc, "LOADED")
        inode = os.stat(copy).st_ino
        with open(copy, "r+b") as handle:  # in place: the same inode the process mapped
            if how == "truncated":
                handle.truncate(40)
            else:
                handle.write(b"#!/bin/sh\necho not a library any more\n")
        assert os.stat(copy).st_ino == inode
        data = libraries.collect(_ctx(pids=[proc.pid], no_cache=True))["data"]
        entry = data["objects"][str(copy)]
        assert entry["status"] == "changed" and "in place" in entry["note"]
        assert entry["inode"] == inode and entry["on_disk"]["size"] == os.path.getsize(copy)
        assert str(copy) in data["processes"]["python-0"]["objects"].values()
        assert data["scan"]["complete"] is False and str(copy) in data["scan"]["unscanned"]
        assert "strings incomplete" in libraries.summarize(data)[0]
    finally:
        stop(proc)


def test_maps_tell_executable_mappings_from_data_ones():
    raw = (b"7f00-7f01 r--p 00000000 08:01 11 /usr/lib/x/libz.so.1\n"
           b"7f01-7f02 r-xp 00001000 08:01 11 /usr/lib/x/libz.so.1\n"
           b"7f03-7f04 r--p 00000000 08:01 12 /usr/lib/locale/locale-archive\n"
           b"7f05-7f06 r--s 00000000 08:01 13 /models/weights.safetensors\n")
    found = {m.path: m.executable for m in maps.parse(raw)}
    assert found == {"/usr/lib/x/libz.so.1": True, "/usr/lib/locale/locale-archive": False,
                     "/models/weights.safetensors": False}
