"""bisect's file applier on real files: every state a kill -9 can leave is restorable.

The applier writes in this order: backup copy (fsync) -> manifest line (fsync) -> [mkdir journaled,
then made] -> temp file beside the target (fsync) -> rename. These tests stop it at each of
those points (by building exactly what a kill there leaves) and check that a restore puts every
file back byte for byte, with its mode and mtime, and removes what bisect created.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat

import pytest

from envsnap.bisect import applier as applier_mod
from envsnap.bisect.files import FileDelta, Version
from envsnap.errors import EnvsnapError


def _version(data):
    if data is None:
        return Version(False, origin="absent")
    return Version(True, hashlib.sha256(data).hexdigest(), data, "test")


def _delta(path, good, bad, current="bad"):
    return FileDelta(str(path), "git", "test", _version(good), _version(bad), current=current)


def _state(root):
    out = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode):
                with open(path, "rb") as handle:
                    out[os.path.relpath(path, root)] = (handle.read(), stat.S_IMODE(st.st_mode), st.st_mtime_ns)
            else:
                out[os.path.relpath(path, root)] = ("dir", stat.S_IMODE(st.st_mode))
    return out


@pytest.fixture
def tree(tmp_path):
    root = tmp_path / "tree"
    root.mkdir()
    (root / "edited.py").write_bytes(b"x = 'bad'\n")
    (root / "run.sh").write_bytes(b"#!/bin/sh\necho bad\n")
    os.chmod(root / "run.sh", 0o750)
    (root / "added.txt").write_bytes(b"only in BAD\n")
    os.utime(root / "edited.py", ns=(1_600_000_000_123_456_789, 1_600_000_000_123_456_789))
    deltas = [
        _delta(root / "edited.py", b"x = 'good'\n", b"x = 'bad'\n"),
        _delta(root / "run.sh", b"#!/bin/sh\necho good\n", b"#!/bin/sh\necho bad\n"),
        _delta(root / "added.txt", None, b"only in BAD\n"),  # GOOD: absent
        _delta(root / "new" / "deep" / "gone.py", b"GONE = 1\n", None),  # BAD deleted it (and its directories)
    ]
    return root, deltas, tmp_path / "j.jsonl.backup"


def test_apply_then_restore_is_byte_mode_and_mtime_identical(tree):
    root, deltas, backup = tree
    before = _state(root)
    applier = applier_mod.FileApplier(str(backup), deltas)
    applier.apply([])  # GOOD: every file at GOOD's version
    assert (root / "edited.py").read_bytes() == b"x = 'good'\n"
    assert not (root / "added.txt").exists()
    assert (root / "new" / "deep" / "gone.py").read_bytes() == b"GONE = 1\n"
    assert stat.S_IMODE(os.stat(root / "run.sh").st_mode) == 0o750  # the mode is kept
    applier.apply([str(root / "edited.py")])
    assert (root / "edited.py").read_bytes() == b"x = 'bad'\n"
    report = applier.restore()
    assert report.clean and not backup.exists()
    assert _state(root) == before  # the created directories are gone too


def test_mtimes_of_successive_writes_differ_by_whole_seconds(tree):
    root, deltas, backup = tree
    applier = applier_mod.FileApplier(str(backup), deltas)
    seen = []
    for switched in ([], [str(root / "edited.py")], [], [str(root / "edited.py")]):
        applier.apply(switched)
        seen.append(os.stat(root / "edited.py").st_mtime_ns // 1_000_000_000)
    assert all(b > a for a, b in zip(seen, seen[1:])), seen
    applier.restore()


def _manifest(backup):
    return [json.loads(line) for line in (backup / "manifest.jsonl").read_text().splitlines()]


@pytest.mark.parametrize("cut", ["after_backup_line", "temp_left_behind", "manifest_line_cut", "after_mkdir_line"])
def test_every_state_a_kill_leaves_is_restored(tree, cut):
    root, deltas, backup = tree
    before = _state(root)
    applier = applier_mod.FileApplier(str(backup), deltas)
    applier.apply([])  # everything switched once: a real manifest with every kind of line
    entries = _manifest(backup)
    assert {e["type"] for e in entries} == {"header", "backup", "mkdir"}
    applier._handle.close()  # the process "dies" here: nothing else happens
    applier._handle = None
    target = root / "edited.py"
    if cut == "after_backup_line":
        pass  # files switched, manifest complete: the plain kill -9
    elif cut == "temp_left_behind":
        with open(applier_mod.temp_name(str(target)), "wb") as handle:
            handle.write(b"half a version")  # killed between the temp file and the rename
    elif cut == "manifest_line_cut":
        with open(backup / "manifest.jsonl", "a") as handle:
            handle.write('{"type": "backup", "path": "/never/touched", "sta')  # the file after it was not touched
    elif cut == "after_mkdir_line":
        with open(backup / "manifest.jsonl", "a") as handle:  # journaled, the directory not made yet
            handle.write(json.dumps({"type": "mkdir", "path": str(root / "not-made")}) + "\n")
    report = applier_mod.restore_dir(str(backup))
    assert report.clean, report.lines()
    assert _state(root) == before
    assert not backup.exists()
    assert applier_mod.restore_dir(str(backup)) is None  # nothing left to do


def test_a_file_someone_else_changed_is_left_and_its_original_kept(tree):
    root, deltas, backup = tree
    applier = applier_mod.FileApplier(str(backup), deltas)
    applier.apply([])
    (root / "edited.py").write_bytes(b"x = 'the user'\n")
    with pytest.raises(applier_mod.FileChanged, match="edited.py was changed while bisect was running"):
        applier.apply([str(root / "edited.py")])
    report = applier.restore()
    assert [path for path, _ in report.left] == [str(root / "edited.py")]
    assert (root / "edited.py").read_bytes() == b"x = 'the user'\n"  # never overwritten
    assert (root / "run.sh").read_bytes() == b"#!/bin/sh\necho bad\n"  # the others restored
    kept = report.kept_dir
    assert kept and os.path.isdir(kept) and not backup.exists()
    copies = [name for name in os.listdir(kept) if name != "manifest.jsonl"]
    assert [open(os.path.join(kept, name), "rb").read() for name in copies] == [b"x = 'bad'\n"]
    assert "NOT restored" in report.lines()[0] and kept in report.lines()[0]


def test_a_running_bisect_holds_its_backups(tree):
    root, deltas, backup = tree
    applier = applier_mod.FileApplier(str(backup), deltas)
    applier.apply([])
    try:
        with pytest.raises(EnvsnapError, match="in use by another envsnap bisect"):
            applier_mod.restore_dir(str(backup))
    finally:
        applier.restore()
