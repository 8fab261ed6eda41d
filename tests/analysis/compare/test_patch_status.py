"""Recorded patches in the analysis: real captures (git and patches sections) of a real checkout, diffed."""
from __future__ import annotations

import json
import shutil

import pytest
from helpers import causes_by_key
from helpers.git import git, init_repo
from helpers.patches import EDITS, TOPK, make_patch, with_edits
from helpers.result_types import mismatches

from envsnap.analysis.compare import patch_status
from envsnap.analysis.result import analyze
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.model import hunks
from envsnap.model.result_types import DiffResult, HunkEdits, HunkStatus, PatchSide, PatchStatus
from envsnap.render.html import render_report
from envsnap.render.text import render_diff

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
REL = "srt/layers/moe/topk.py"


def _capture(repo, patches):
    ctx = CaptureContext(cwd=str(repo), timeout=30.0, patches=[str(p) for p in patches])
    return runner.capture(ctx, only=["git", "patches"])


@pytest.fixture
def checkout(tmp_path):
    repo = init_repo(tmp_path / "sglang", {REL: TOPK, "README.md": "x\n"})
    return repo, make_patch(repo, REL, tmp_path / "eagle3.patch")


def _factors(cause):
    return [f["factor"] for f in cause["factors"]]


def test_a_hunk_reverted_on_bad_is_a_cause_with_its_text_and_the_dirty_file_defers(checkout):
    repo, patch = checkout
    (repo / REL).write_text(with_edits((1, 2, 3)))
    good = _capture(repo, [patch])
    (repo / REL).write_text(with_edits((1, 3)))
    bad = _capture(repo, [patch])
    result = analyze(good, bad, tables=True)
    top = result["causes"][0]
    assert top["key"] == "patches.eagle3.patch.hunk.2" and (top["good"], top["bad"]) == ("applied", "not applied")
    assert top["why"] == (f"hunk 2 of eagle3.patch ({REL} @@ -19,7 +19,7 @@ def select_experts(scores, k):): "
                          "applied on GOOD, not applied on BAD")
    # A capture of the checkout alone records no process: whether the checkout runs is not known, and not
    # called "not what runs" (a checkout is that when the measured processes ran elsewhere: test_ranking_evidence.py).
    assert _factors(top) == ["prior", "hunk_code_changed", "no_runs"]
    assert f"whether {repo} is code that runs is not known: no measured process was recorded " \
           "(--pid, --probe-dir or envsnap run show where they ran)" in top["evidence"]
    # One change, one cause: the dirty file is the same edit as the hunk, folded into it.
    assert not [c for c in result["causes"] if c["key"] == f"git.{repo}.dirty.{REL}"]
    [dirty] = [f for f in top["folded"] if f["key"] == f"git.{repo}.dirty.{REL}"]
    assert dirty["relation"] == "the same edit, as a whole file" and "shown_by_hunk" in _factors(dirty)
    old, new = EDITS[1]
    # GOOD has the edit, BAD lost it: read good -> bad, the hunk is undone (issue 36: it read the other way).
    assert any(f"good \u2192 bad replaces `{new.strip()}` with `{old.strip()}`; hunk 2 of eagle3.patch: applied on "
               "GOOD, not applied on BAD; shown undone: BAD lacks the edit GOOD has" in e for e in top["evidence"]), \
        top["evidence"]
    hunk_patch = next(p for p in result["patches"] if p["kind"] == "hunk")
    assert f"-{new}+{old}" in hunk_patch["diff"] and hunk_patch["diff"].startswith(f"diff --git a/{REL} b/{REL}\n")
    [row] = [r for r in result["patch_status"][0]["hunks"] if r["changed"]]
    assert row["rank"] == 1 and row["text"].startswith(f"diff --git a/{REL} b/{REL}\n")
    assert f"-{old}+{new}" in row["text"]
    assert row["also_in"] == {"good": [f"git.{repo}.dirty.{REL}"]}  # the reverted edit was in good's diff only
    assert [h["same_edit"] for h in result["patch_status"][0]["hunks"]] == [True, True, True]
    # The table as serialised has its types (model/result_types: no golden output has recorded patches).
    met: set = set()
    assert mismatches(json.loads(json.dumps(result)), DiffResult, met=met) == []
    assert {PatchStatus, PatchSide, HunkStatus, HunkEdits} <= met
    # The dirty file's own patch says, hunk by hunk, what both sides share.
    git_patch = next(p for p in result["patches"] if p["kind"] == "git")
    assert git_patch["hunk_edits"]["same"] == [hunks.edit_id(["-" + EDITS[0][0], "+" + EDITS[0][1]]),
                                               hunks.edit_id(["-" + EDITS[2][0], "+" + EDITS[2][1]])]
    assert git_patch["note"] == "hunk by hunk against HEAD: 2 the same edit on both sides, 1 only in good"
    # Text and HTML say the same.
    text = render_diff(result)
    assert "eagle3.patch: GOOD applied, BAD partly applied (2 applied, 1 not applied)" in text
    assert "patches: 1 recorded patch hunk and 1 changed file whose text the snapshots hold (good \u2192 bad)" in text
    assert f"*hunk   2 {REL} @@ -19,7 +19,7 @@ def select_experts(scores, k):: applied \u2192 not applied  (cause #1)" in text
    html = render_report(result)
    assert 'href="#cause-1">cause #1</a>' in html and new.strip() in html
    assert "1 recorded patch hunk and 1 changed file whose text the snapshots hold, read good \u2192 bad" in html
    # Where the patch was checked: one wording, in both outputs.
    target = result["patch_status"][0]["bad"]["target"]
    where = patch_status.target_text(target)
    assert where.startswith(f"{target['root']} (") and where.endswith(f", -p{target['strip']})")
    assert f"; against {where}" in text and where in html


def test_only_the_patch_changed_not_the_code(checkout, tmp_path):
    repo, patch = checkout
    (repo / REL).write_text(with_edits((1,)))
    good = _capture(repo, [patch])
    # The same file, a patch whose hunk 1 is another edit: its status changes, the code does not.
    (repo / REL).write_text(with_edits((1,)).replace("# eagle3: keep the top-k order", "# other"))
    other = tmp_path / "other"
    other.mkdir()
    changed = other / "eagle3.patch"
    changed.write_text(git(repo, "diff", "--no-color"))
    (repo / REL).write_text(with_edits((1,)))
    bad = _capture(repo, [changed])
    result = analyze(good, bad)
    keys = causes_by_key(result["causes"])
    assert keys["patches.eagle3.patch.file"]["why"].startswith("the patch file eagle3.patch itself changed")
    cause = keys["patches.eagle3.patch.hunk.1"]
    assert (cause["good"], cause["bad"]) == ("applied", "conflict")
    assert "hunk_code_same" in _factors(cause)
    assert not [k for k in keys if k.startswith("git.")]  # the code is the same


def test_a_patch_given_on_one_side_only_and_two_of_one_name(checkout, tmp_path):
    repo, patch = checkout
    copy_dir = tmp_path / "copy"
    copy_dir.mkdir()
    twin = copy_dir / "eagle3.patch"
    twin.write_bytes(patch.read_bytes())
    good = _capture(repo, [patch])
    bad = _capture(repo, [patch, twin])
    names = patch_status.names([str(patch), str(twin)])
    assert names == {str(patch): str(patch), str(twin): str(twin)}
    result = analyze(good, bad)
    keys = [c["key"] for c in result["causes"]]
    # good's eagle3.patch and bad's two (named by path) are different patches: whole entities, no hunk keys.
    assert sorted(k for k in keys if k.startswith("patches.")) == sorted(
        ["patches.eagle3.patch", f"patches.{patch}", f"patches.{twin}"])
    assert not any(k.endswith((".file",)) or ".hunk." in k for k in keys)
    assert {p["name"] for p in result["patch_status"]} == {"eagle3.patch", str(patch), str(twin)}


def test_no_patches_no_table_and_older_snapshots_compare_as_before(checkout):
    repo, _ = checkout
    (repo / REL).write_text(with_edits((1,)))
    good = _capture(repo, [])
    (repo / REL).write_text(with_edits((1, 2)))
    bad = _capture(repo, [])
    for entry in good["sections"]["git"]["data"]["repos"][str(repo)]["dirty"].values():
        entry.pop("hunks")  # an older envsnap's snapshot: no hunk identities
    result = analyze(good, bad)
    assert "patch_status" not in result
    assert [c["key"] for c in result["causes"]] == [f"git.{repo}.dirty.{REL}"]
    assert "hunk_edits" not in result["patches"][0]  # not known on good's side: nothing claimed
    git(repo, "status")  # untouched and readable


@pytest.mark.parametrize("target,words", [
    ({}, ""),
    ({"root": "/r", "kind": "git", "strip": 1}, "/r (git, -p1)"),
    ({"root": "/sp", "kind": "installed", "dist": "sglang", "version": "0.5.5", "strip": 0},
     "/sp (installed sglang 0.5.5, -p0)"),
    ({"root": "/sp", "kind": "installed", "dist": "sglang", "strip": 0}, "/sp (installed sglang, -p0)")])
def test_where_a_patch_was_checked_in_words(target, words):
    assert patch_status.target_text(target) == words


def test_a_patch_given_on_bad_only_lists_its_hunks_and_the_patches_are_counted_by_kind(checkout):
    """Issue 36's trial: GOOD captured without --patch, BAD with it partly re-applied and a stash. Nothing
    is compared, so no hunk has 'the same status on both sides'; a stash entry is no changed file."""
    repo, patch = checkout
    good = _capture(repo, [])
    (repo / "README.md").write_text("stashed\n")
    git(repo, "stash")
    (repo / REL).write_text(with_edits((1,)))
    bad = _capture(repo, [patch])
    result = analyze(good, bad, tables=True)
    text = render_diff(result)
    assert "same status on both sides" not in text
    assert "eagle3.patch: GOOD not given, BAD partly applied (1 applied, 2 not applied)" in text
    for n, status in ((1, "applied"), (2, "not applied"), (3, "not applied")):
        assert any(line.startswith(f"    hunk   {n} {REL} ") and line.endswith(f": {status} (BAD only)")
                   for line in text.splitlines()), (n, text)
    assert "patches: 1 changed file and 1 stash entry whose text the snapshots hold (good \u2192 bad)" in text
    html = render_report(result)
    assert "1 changed file and 1 stash entry whose text the snapshots hold, read good \u2192 bad" in html
