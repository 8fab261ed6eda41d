"""bisect's hunk deltas: a file's GOOD -> BAD diff cut into hunks, every subset an exact splice, and the
applier journals each mix before writing it, so a restore after a kill -9 puts the file back."""
from __future__ import annotations

import hashlib
import itertools
import json
import os
import shutil
import subprocess

import pytest
from helpers.patches import TOPK, with_edits

from envsnap.bisect import applier as applier_mod, hunks
from envsnap.bisect.files import FileDelta, Version


def _version(data):
    if data is None:
        return Version(False, origin="absent")
    return Version(True, hashlib.sha256(data).hexdigest(), data, "test")


def _delta(path, good, bad, current="bad"):
    return FileDelta(str(path), "git", "test", _version(good), _version(bad), current=current)


def test_every_subset_of_hunks_is_the_file_with_those_edits(tmp_path):
    split, why = hunks.split(_delta(tmp_path / "topk.py", TOPK.encode(), with_edits((1, 2, 3)).encode()))
    assert split is not None and why == ""
    assert [h.name for h in split.hunks] == [f"{tmp_path / 'topk.py'}#hunk{i}" for i in (1, 2, 3)]
    assert [h.header for h in split.hunks] == ["@@ -3,7 +3,7 @@", "@@ -19,7 +19,7 @@", "@@ -36,4 +36,4 @@"]
    for size in range(4):
        for chosen in itertools.combinations((1, 2, 3), size):
            assert split.compose(set(chosen)).decode() == with_edits(chosen)
    assert split.version(set()) is split.delta.good and split.version({1, 2, 3}) is split.delta.bad


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_a_hunks_patch_applies_to_good_with_git(tmp_path):
    target = tmp_path / "topk.py"
    split, _ = hunks.split(_delta(target, TOPK.encode(), with_edits((1, 2, 3)).encode()))
    assert split is not None
    target.write_text(TOPK)
    patch = hunks.patch_text([split.hunks[2], split.hunks[0]]).replace(str(target).lstrip("/"), "topk.py")
    subprocess.run(["git", "apply", "-"], cwd=tmp_path, input=patch.encode(), check=True,
                   env=dict(os.environ, GIT_DIR=os.devnull))
    assert target.read_text() == with_edits((1, 3))


@pytest.mark.parametrize("good, bad, why", [
    (TOPK.encode(), with_edits((2,)).encode(), ""),  # one hunk: the file is the delta
    (None, TOPK.encode(), "created, deleted or binary"),
    (b"\0binary" + TOPK.encode(), b"\0binary" + with_edits((1, 3)).encode(), "created, deleted or binary"),
])
def test_files_that_stay_whole(tmp_path, good, bad, why):
    split, said = hunks.split(_delta(tmp_path / "f", good, bad))
    assert split is None and said.startswith(why)


def test_too_many_hunks_stay_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(hunks, "MAX_HUNKS", 2)
    split, why = hunks.split(_delta(tmp_path / "f", TOPK.encode(), with_edits((1, 2, 3)).encode()))
    assert split is None and "3 hunks (over 2)" in why


def test_a_mix_of_hunks_is_journaled_before_it_is_written_and_restored_after_a_kill(tmp_path):
    target = tmp_path / "topk.py"
    bad = with_edits((1, 2, 3)).encode()
    target.write_bytes(bad)
    os.chmod(target, 0o640)
    before = (target.read_bytes(), os.stat(target).st_mode, os.stat(target).st_mtime_ns)
    delta = _delta(target, TOPK.encode(), bad)
    units, splits, notes = hunks.split_all([delta])
    assert [u.name for u in units] == [f"{target}#hunk{i}" for i in (1, 2, 3)] and "switched hunk by hunk" in notes[0]
    backup = str(tmp_path / "j.jsonl.backup")
    applier = applier_mod.FileApplier(backup, [delta], splits=splits)
    applier.apply([f"{target}#hunk3"])
    assert target.read_text() == with_edits((3,))
    applier.apply([f"{target}#hunk1", f"{target}#hunk2"])
    assert target.read_text() == with_edits((1, 2))
    lines = [json.loads(line) for line in open(os.path.join(backup, "manifest.jsonl"))]
    held = [e["state"] for e in lines if e["type"] == "may_hold"]
    assert held == [hashlib.sha256(with_edits(c).encode()).hexdigest() for c in ((3,), (1, 2))]
    # A kill -9 here: the applier never restores. The next bisect (or --restore) does, from the manifest.
    applier._handle.close()
    report = applier_mod.restore_dir(backup)
    assert report is not None and report.clean and report.restored == [str(target)]
    assert (target.read_bytes(), os.stat(target).st_mode, os.stat(target).st_mtime_ns) == before
    assert not os.path.exists(backup)
