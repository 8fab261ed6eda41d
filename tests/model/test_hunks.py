"""model/hunks: unified diffs as git and diff(1) write them, hunk by hunk."""
from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers.git import git, init_repo

from envsnap.model import hunks

PLAIN = ("--- a/x.py\t2025-11-28 10:00:00\n+++ b/x.py\t2025-11-28 10:01:00\n"
         "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
         "@@ -10,2 +10,3 @@ def f():\n k\n+new\n l\n\\ No newline at end of file\n")


def test_plain_unified_diff_with_timestamps_and_no_newline_marker():
    [fp] = hunks.parse("Subject: [PATCH] eagle3\n\n" + PLAIN)
    assert (fp.old, fp.new, fp.line, fp.binary) == ("a/x.py", "b/x.py", 3, False)
    first, second = fp.hunks
    assert (first.old_start, first.old_count, first.new_count, first.added, first.removed) == (1, 3, 3, 1, 1)
    assert second.function == "def f():" and second.lines[-1].startswith("\\") and second.complete


def test_git_headers_new_deleted_renamed_binary_and_quoted_names():
    text = ('diff --git a/new.py b/new.py\nnew file mode 100644\nindex 0000000..1111111\n--- /dev/null\n'
            '+++ b/new.py\n@@ -0,0 +1 @@\n+x = 1\n'
            'diff --git a/old.py b/old.py\ndeleted file mode 100644\n--- a/old.py\n+++ /dev/null\n@@ -1 +0,0 @@\n-y\n'
            'diff --git a/p q.py b/r s.py\nsimilarity index 100%\nrename from p q.py\nrename to r s.py\n'
            'diff --git "a/t\\tu.py" "b/t\\tu.py"\nindex 1..2 100644\nGIT binary patch\nliteral 1\nIcmZPo000310RR91\n\n')
    created, deleted, renamed, binary = hunks.parse(text)
    assert created.creates and created.new == "b/new.py" and len(created.hunks) == 1
    assert deleted.deletes and deleted.old == "a/old.py"
    assert (renamed.old, renamed.new, renamed.hunks) == ("p q.py", "r s.py", ())
    assert binary.binary and binary.new == "b/t\tu.py" and binary.hunks == ()


def test_edit_identity_ignores_context_line_numbers_and_line_endings():
    one = hunks.parse("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+B  \n c\n")[0].hunks[0]
    moved = hunks.parse("--- a/f\r\n+++ b/f\r\n@@ -40,3 +40,3 @@ g\r\n z\r\n-b\r\n+B\r\n y\r\n")[0].hunks[0]
    other = hunks.parse("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n-b\n+C\n c\n")[0].hunks[0]
    assert hunks.edit_id(one.lines) == hunks.edit_id(moved.lines) != hunks.edit_id(other.lines)
    assert len(hunks.edit_id(one.lines)) == hunks.EDIT_ID_CHARS


def test_a_hunk_is_read_by_its_counts_and_a_cut_one_is_incomplete():
    [fp] = hunks.parse("--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n+B\ntrailing prose\n")
    assert fp.hunks[0].lines == (" a\n", "-b\n", "+B\n") and fp.hunks[0].complete
    [cut] = hunks.parse("--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n a\n-b\n")
    assert not cut.hunks[0].complete


def test_strip_and_unsafe():
    assert hunks.strip_components("a/python/sglang/x.py", 2) == "sglang/x.py"
    assert hunks.strip_components("a/x.py", 2) is None
    assert hunks.unsafe("../etc/passwd") and hunks.unsafe("/etc/passwd") and hunks.unsafe("a/../../b")
    assert not hunks.unsafe("sglang/srt/x.py")


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_each_single_hunk_patch_applies_alone_with_git(tmp_path):
    text = "".join(f"line {i}\n" for i in range(40))
    repo = init_repo(tmp_path / "r", {"f.txt": text})
    (repo / "f.txt").write_text(text.replace("line 3\n", "line three\n").replace("line 30\n", "line thirty\n"))
    patch = git(repo, "diff")
    git(repo, "checkout", "-q", "f.txt")
    [fp] = hunks.parse(patch)
    assert len(fp.hunks) == 2
    for hunk in fp.hunks:
        single = hunks.single_hunk_patch(fp, hunk)
        subprocess.run(["git", "apply", "-"], cwd=repo, input=single.encode(), check=True)
    assert (repo / "f.txt").read_text() == text.replace("line 3\n", "line three\n").replace("line 30\n", "line thirty\n")
