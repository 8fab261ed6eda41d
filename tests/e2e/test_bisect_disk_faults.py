"""`envsnap bisect` on a checkout that cannot be written: a full disk (a real, small tmpfs filled to the last
page) and a read-only checkout (a real read-only bind mount). Both need root to mount; as any other user
the read-only checkout is a directory without write permission, and the full disk is covered by the
file-size-limit tests of tests/bisect/test_bisect_faults.py (RLIMIT_FSIZE).

What must hold: one line on stderr, exit 2 (never a traceback, never exit 3), and the line true — which
files are still switched (none, when none are) and the command that restores them; following it leaves
every file as it was.
"""
from __future__ import annotations

import contextlib
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers.bench import base_env, run_cli
from helpers.bisect_files import INNOCENT_ENV, mixed_checkout, tree_state

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="git is not installed")

DET_BENCH = '''\
import json, pathlib, time
time.sleep(0.05)
slow = "debug" in pathlib.Path("work.py").read_text()
print(json.dumps({"tok_s": 500.0 if slow else 1000.0}))
'''
IS_ROOT = os.geteuid() == 0


def _env():
    return base_env(PYTHONDONTWRITEBYTECODE="1", **{k: None for k in INNOCENT_ENV})


def _mount(*args) -> bool:
    return subprocess.run(["mount", *map(str, args)], capture_output=True).returncode == 0


@contextlib.contextmanager
def _tmpfs(path: Path, size: str):
    path.mkdir()
    if not (IS_ROOT and _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", path)):
        pytest.skip("a tmpfs cannot be mounted here (not root): the full disk is simulated with RLIMIT_FSIZE in "
                    "tests/bisect/test_bisect_faults.py")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def _fill(directory: Path) -> Path:
    """Write until the filesystem says ENOSPC: the disk is full."""
    filler = directory / "filler"
    with open(filler, "wb", buffering=0) as handle:
        chunk = b"\0" * 65536
        try:
            while True:
                handle.write(chunk)
        except OSError:
            pass
    with contextlib.suppress(OSError):
        with open(directory / "filler2", "wb", buffering=0) as handle:
            while True:
                handle.write(b"\0")
    return filler


def _bisect(co, journal):
    return subprocess.run([sys.executable, "-m", "envsnap", "bisect", str(co.good), str(co.bad), "--journal",
                           str(journal), "--repeat", "2", "--", sys.executable, "bench.py"], cwd=co.repo, env=_env(),
                          capture_output=True, text=True, timeout=300)


def _check_true_and_restorable(result, co, before, journal):
    """Exit 2 with one error line that tells the truth about the files; its command (if any) restores them."""
    assert result.returncode == 2, result.stdout + result.stderr
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("envsnap: error:")]
    assert len(errors) == 1, result.stderr
    line = errors[0]
    print("\n" + line)
    match = re.search(r"still switched: (.*): run `(envsnap bisect --restore --journal [^`]+)`", line)
    if match is None:
        assert "no file is left switched" in line or "switched file restored" in line \
            or "switched files restored" in line or "no file was switched" in line, line
        assert tree_state(co.repo) == before
        return line, None
    named = sorted(match.group(1).split(", "))
    now = tree_state(co.repo)
    changed = sorted(os.path.realpath(co.repo / rel) for rel in set(before) | set(now)
                     if before.get(rel) != now.get(rel) and "file" in (before.get(rel, ("",))[0], now.get(rel, ("",))[0]))
    assert named == changed, line  # exactly the files that are not as they were
    return line, shlex.split(match.group(2))[1:]


def test_full_disk_under_the_checkout_is_one_true_line_and_exit_2(tmp_path):
    with _tmpfs(tmp_path / "disk", "48m") as disk:
        co = mixed_checkout(disk, bench=DET_BENCH)
        before = tree_state(co.repo)
        filler = _fill(disk)
        journal = tmp_path / "j.jsonl"  # the journal and backups on a disk with room
        result = _bisect(co, journal)
        line, restore = _check_true_and_restorable(result, co, before, journal)
        assert "No space left on device" in line, line
        for name in ("filler", "filler2"):
            with contextlib.suppress(OSError):
                (filler.parent / name).unlink()
        if restore is not None:
            fixed = run_cli("bisect", *restore, cwd=tmp_path, env=_env())
            assert fixed.returncode == 0, fixed.stdout + fixed.stderr
        assert tree_state(co.repo) == before
        assert not Path(str(journal) + ".backup").exists()


def test_journal_on_a_full_disk_is_one_line_and_exit_2(tmp_path):
    co = mixed_checkout(tmp_path / "co", bench=DET_BENCH)
    before = tree_state(co.repo)
    with _tmpfs(tmp_path / "disk", "1m") as disk:
        _fill(disk)
        result = _bisect(co, disk / "j.jsonl")
        line, restore = _check_true_and_restorable(result, co, before, disk / "j.jsonl")
        assert "No space left on device" in line and restore is None, line


def test_read_only_checkout_is_one_true_line_and_exit_2(tmp_path):
    co = mixed_checkout(tmp_path / "co", bench=DET_BENCH)
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    if IS_ROOT and _mount("--bind", co.repo, co.repo):
        try:
            assert _mount("-o", "remount,bind,ro", co.repo)
            result = _bisect(co, journal)
        finally:
            subprocess.run(["umount", "-l", str(co.repo)], capture_output=True)
        why = "Read-only file system"
    else:
        dirs = [Path(d) for d, _, _ in os.walk(co.repo) if ".git" not in Path(d).parts]
        for d in dirs:
            os.chmod(d, 0o555)
        try:
            result = _bisect(co, journal)
        finally:
            for d in dirs:
                os.chmod(d, 0o755)
        why = "Permission denied"
    line, restore = _check_true_and_restorable(result, co, before, journal)
    assert why in line and restore is None, line
    assert tree_state(co.repo) == before
    assert not Path(str(journal) + ".backup").exists()
