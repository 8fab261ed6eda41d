"""The files collector (--watch) on real trees: nesting, .git, links and loops, FIFOs, unreadable files."""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
import tracemalloc

import pytest
from helpers import run_envsnap

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import files


def _collect(*watch, cwd=None, timeout=30.0):
    ctx = CaptureContext(watch=[str(w) for w in watch], cwd=str(cwd or os.getcwd()), timeout=timeout)
    ctx.deadline = time.monotonic() + timeout
    return files.collect(ctx)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hashed(data: bytes) -> dict:
    """A watched text file's entry: size, sha256 and its text (a content record)."""
    return {"size": len(data), "sha256": _sha(data),
            "content": {"status": "text", "text": data.decode(), "size": len(data), "sha256": _sha(data)}}


def test_nested_tree_hashed_and_git_metadata_skipped(tmp_path):
    root = tmp_path / "patches"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "patch_kimik25_eagle3.py").write_bytes(b"print('patch')\n")
    (root / "a" / "b" / "c" / "deep.py").write_bytes(b"deep\n")
    (root / "a" / "empty.txt").write_bytes(b"")
    (root / "with space é.txt").write_bytes(b"x")
    (root / ".git" / "objects").mkdir(parents=True)
    (root / ".git" / "config").write_text("[core]\n")
    (root / "a" / ".git").write_text("gitdir: ../.git/modules/a\n")  # a submodule's pointer file

    result = _collect(root)
    assert result["status"] == "ok"
    data = result["data"]
    r = str(root)
    assert data["roots"] == [r]
    assert data["entries"] == {
        f"{r}/patch_kimik25_eagle3.py": _hashed(b"print('patch')\n"),
        f"{r}/a/b/c/deep.py": _hashed(b"deep\n"),
        f"{r}/a/empty.txt": _hashed(b""),
        f"{r}/with space é.txt": _hashed("x".encode()),
    }
    assert data["skipped"] == {f"{r}/.git": "git metadata", f"{r}/a/.git": "git metadata"}
    assert (data["hashed"], data["total_bytes"], data["problems"]) == (4, 21, 0)
    assert files.summarize(data)[0] == "1 root: 4 files hashed (21 B), 0 links, 0 problems"


def test_single_files_relative_paths_and_overlapping_roots(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "f.py").write_bytes(b"f")
    # The same file named twice (directly and through its directory) is recorded once, relative to cwd.
    result = _collect("d/f.py", "d", cwd=tmp_path)
    assert result["data"]["roots"] == [str(tmp_path / "d"), str(tmp_path / "d" / "f.py")]
    assert result["data"]["entries"] == {str(tmp_path / "d" / "f.py"): _hashed(b"f")}


def test_symlinks_loops_dangling_links_and_fifos_are_recorded_not_fatal(tmp_path):
    root = tmp_path / "w"
    (root / "real").mkdir(parents=True)
    (root / "real" / "target.py").write_bytes(b"target\n")
    os.symlink("real/target.py", root / "file_link.py")
    os.symlink("real", root / "dir_link")
    os.symlink(".", root / "real" / "self_loop")           # a directory link back to its own parent
    os.symlink("loop_b", root / "loop_a")                    # a <-> b: resolving never ends (ELOOP)
    os.symlink("loop_a", root / "loop_b")
    os.symlink("nowhere.py", root / "dangling.py")
    os.mkfifo(root / "pipe")                                 # opening it for reading would block

    start = time.monotonic()
    result = _collect(root, timeout=10)
    assert time.monotonic() - start < 5
    e = result["data"]["entries"]
    r = str(root)
    assert e[f"{r}/file_link.py"] == {"link": "real/target.py", **_hashed(b"target\n")}
    assert e[f"{r}/real/target.py"]["sha256"] == _sha(b"target\n")
    assert e[f"{r}/dir_link"] == {"link": "real", "type": "dir", "followed": False}
    assert e[f"{r}/real/self_loop"] == {"link": ".", "type": "dir", "followed": False, "loop": True}
    assert e[f"{r}/loop_a"] == {"link": "loop_b", "error": "symlink loop"}
    assert e[f"{r}/loop_b"] == {"link": "loop_a", "error": "symlink loop"}
    assert e[f"{r}/dangling.py"] == {"link": "nowhere.py", "error": "dangling link"}
    assert e[f"{r}/pipe"] == {"type": "fifo"}
    assert not any(k.startswith(f"{r}/dir_link/") for k in e), "a directory link was followed"
    assert result["data"]["links"] == 6 and result["data"]["problems"] == 3


def test_unreadable_file_and_directory_are_recorded(tmp_path):
    """Permission denied for real: as root (tests here run as root) the collector runs in a forked
    child that has dropped to uid nobody, because root reads through chmod 000."""
    base = tempfile.mkdtemp(prefix="envsnap-unreadable-")  # /tmp: traversable by nobody
    try:
        os.chmod(base, 0o755)
        with open(os.path.join(base, "ok.py"), "wb") as handle:
            handle.write(b"ok\n")
        secret = os.path.join(base, "secret.py")
        with open(secret, "wb") as handle:
            handle.write(b"s\n")
        os.chmod(secret, 0)
        closed = os.path.join(base, "closed")
        os.mkdir(closed)
        with open(os.path.join(closed, "inside.py"), "wb") as handle:
            handle.write(b"i\n")
        os.chmod(closed, 0)
        result = _collect_as_unprivileged(base) if os.geteuid() == 0 else _collect(base)
    finally:
        os.chmod(os.path.join(base, "closed"), 0o755)
        import shutil

        shutil.rmtree(base)
    assert result["status"] == "ok"
    entries = result["data"]["entries"]
    assert entries[f"{base}/ok.py"] == _hashed(b"ok\n")
    assert entries[f"{base}/secret.py"] == {"error": "permission denied"}
    assert result["data"]["errors"] == {f"{base}/closed": "cannot list: permission denied"}
    assert any("permission denied" in line for line in files.summarize(result["data"]))


def _collect_as_unprivileged(path: str) -> dict:
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: drop root, run the collector, send the result back
        status = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            payload = json.dumps(_collect(path)).encode()
            with os.fdopen(write_fd, "wb") as out:
                out.write(payload)
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as handle:
        payload = handle.read()
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, "the unprivileged child failed"
    return json.loads(payload)


def test_proc_file_that_fails_on_read_is_an_error_entry():
    # /proc/self/mem at offset 0 answers EIO to everyone, root included: a real unreadable file.
    result = _collect("/proc/self/mem")
    assert result["data"]["entries"]["/proc/self/mem"] == {"error": "I/O error"}


def test_deadline_records_what_was_not_reached_and_memory_stays_bounded(tmp_path):
    root = tmp_path / "w"
    root.mkdir()
    big = root / "big.bin"
    with open(big, "wb") as handle:  # sparse: 16 GiB of zeros without using the disk, too big to finish
        handle.truncate(16 << 30)
    for i in range(300):
        (root / f"s{i}.py").write_bytes(b"%d" % i)
    tracemalloc.start()
    try:
        result = _collect(root, timeout=1.0)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    entries = result["data"]["entries"]
    assert len(entries) == 301, "a file was silently left out"
    assert "skipped" in entries[str(big)] and "sha256" not in entries[str(big)]
    assert entries[str(big)]["skipped"].startswith(files.DEADLINE_NOTE)
    for path, entry in entries.items():
        assert "sha256" in entry or "skipped" in entry, path
    assert peak < 32 * 2**20, f"hashing held {peak} bytes"  # chunks of 1 MiB per thread, never the file


def test_missing_paths_and_no_watch(tmp_path):
    assert _collect()["status"] == "unavailable"
    result = _collect(tmp_path / "nope")
    assert result["status"] == "error" and result["data"]["errors"] == {str(tmp_path / "nope"): "does not exist"}


def test_parallel_map_keeps_order_and_reports_unfinished():
    results, missed = files.parallel_map(lambda x: x * 2, list(range(1000)), time.monotonic() + 10, workers=4, batch=7)
    assert results == [x * 2 for x in range(1000)] and missed == []
    results, missed = files.parallel_map(lambda x: time.sleep(0.05), list(range(50)), time.monotonic() + 0.2,
                                         workers=2, batch=1)
    assert 0 < len(missed) < 50


@pytest.mark.slow
def test_capture_cli_with_watch_and_show(tmp_path):
    (tmp_path / "p.py").write_text("patched = True\n")
    out = tmp_path / "snap.json"
    proc = run_envsnap("capture", "-o", out, "--watch", tmp_path / "p.py", "--timeout", "60", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    section = json.loads(out.read_text())["sections"]["files"]
    assert section["data"]["entries"][str(tmp_path / "p.py")]["sha256"] == _sha(b"patched = True\n")
    shown = run_envsnap("show", out, cwd=tmp_path)
    assert "1 root: 1 files hashed" in shown.stdout


def test_map_by_size_runs_big_items_in_the_pool_and_small_ones_inline():
    import threading

    seen = {}

    def where(item):
        seen[item] = threading.current_thread().name
        return item

    sizes = [10, files.BIG_FILE, None, 0]
    results, missed = files.map_by_size(where, ["a", "b", "c", "d"], sizes, time.monotonic() + 10)
    assert results == ["a", "b", "c", "d"] and missed == []
    assert seen["a"] == seen["d"] == threading.current_thread().name
    assert seen["b"] == seen["c"] == "envsnap-hash"


def test_big_items_are_hashed_concurrently():
    import threading

    both_inside = threading.Barrier(2, timeout=5)  # passes only if two items are in flight at once
    met = []

    def work(item):
        both_inside.wait()
        met.append(item)

    files.map_by_size(work, ["a", "b"], [files.BIG_FILE] * 2, time.monotonic() + 10)
    assert sorted(met) == ["a", "b"]  # one after the other would have broken the barrier
