"""`--patch`: each hunk of a real patch judged by git apply against a real checkout and a real venv's
installed package; hostile patch files give a recorded status, never a traceback and never a write."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from helpers import run_envsnap
from helpers.bisect_files import tree_state
from helpers.git import git, init_repo
from helpers.patches import CONFLICT, EDITS, TOPK, make_patch, with_edits

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import patches as collector
from envsnap.model import hunks

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
REL = "python/sglang/srt/layers/moe/topk.py"


def _collect(cwd, patch_paths, **options):
    ctx = CaptureContext(cwd=str(cwd), timeout=30.0, patches=[str(p) for p in patch_paths], **options)
    ctx.deadline = time.monotonic() + 30.0
    return collector.collect(ctx)


def _statuses(entry):
    return [entry["hunks"][k]["status"] for k in sorted(entry["hunks"], key=int)]


@pytest.fixture
def checkout(tmp_path):
    repo = init_repo(tmp_path / "sglang", {REL: TOPK, "README.md": "sglang\n"})
    patch = make_patch(repo, REL, tmp_path / "eagle3.patch")
    return repo, patch


@pytest.mark.parametrize("state, expected, overall", [
    ((1, 2, 3), ["applied"] * 3, "applied"),
    ((1, 3), ["applied", "not applied", "applied"], "partly applied"),
    ((), ["not applied"] * 3, "not applied"),
])
def test_each_hunk_of_a_real_patch_against_a_real_checkout(checkout, state, expected, overall):
    repo, patch = checkout
    (repo / REL).write_text(with_edits(state))
    before = tree_state(repo)
    result = _collect(repo, [patch])
    assert result["status"] == "ok", result
    entry = result["data"]["patches"][str(patch)]
    assert _statuses(entry) == expected
    assert entry["status"] == overall
    assert entry["target"] == {"root": str(repo), "kind": "checkout", "strip": 1}
    assert {h["file"] for h in entry["hunks"].values()} == {REL}
    # Each hunk's identity is the one of the same edit in the checkout's own `git diff HEAD`.
    assert [h["edit"] for h in _ordered(entry)] == [hunks.edit_id(["-" + old, "+" + new]) for old, new in EDITS]
    assert entry["targets"][REL]["sha256"] == __import__("hashlib").sha256((repo / REL).read_bytes()).hexdigest()
    assert entry["content"]["status"] == "text" and entry["content"]["text"] == patch.read_text()
    assert tree_state(repo) == before  # --check only: nothing written, .git included


def _ordered(entry):
    return [entry["hunks"][k] for k in sorted(entry["hunks"], key=int)]


def test_a_hunk_whose_lines_hold_another_edit_is_a_conflict(checkout):
    repo, patch = checkout
    (repo / REL).write_text(with_edits((1,)).replace(*CONFLICT))
    entry = _collect(repo, [patch])["data"]["patches"][str(patch)]
    assert _statuses(entry) == ["applied", "conflict", "not applied"]
    assert entry["status"] == "partly applied"
    assert "patch failed" in entry["hunks"]["2"]["why"] or "does not apply" in entry["hunks"]["2"]["why"]


def test_a_repository_around_the_target_does_not_make_git_skip_it(tmp_path):
    """A venv (or any target) inside a checkout: git apply run there without GIT_DIR=/dev/null would take
    the repository's view, skip every path and answer "ok" (an applied patch would read as both ways)."""
    outer = init_repo(tmp_path / "outer", {"README.md": "x\n"})
    inner = outer / "vendor" / "lib"
    inner.mkdir(parents=True)
    (inner / "topk.py").write_text(TOPK)
    repo = init_repo(tmp_path / "patchsrc", {"topk.py": TOPK})
    patch = make_patch(repo, "topk.py", tmp_path / "p.patch")
    (inner / "topk.py").write_text(with_edits((2,)))
    entry = _collect(inner, [patch])["data"]["patches"][str(patch)]
    assert entry["target"] == {"root": str(inner), "kind": "directory", "strip": 1}
    assert _statuses(entry) == ["not applied", "applied", "not applied"]


def test_a_patch_of_the_checkout_layout_finds_the_installed_package(tmp_path, built_venv):
    """A patch written against SGLang's checkout (python/sglang/...) judged against the installed files of
    the described interpreter: the site-packages copy, its distribution named from RECORD."""
    site = built_venv.site
    installed = (site / "tinypkg" / "core.py").read_text()
    repo = init_repo(tmp_path / "src", {"python/tinypkg/core.py": installed})
    target = repo / "python/tinypkg/core.py"
    target.write_text(installed.replace("TOPK = 4  # patched in place\n", "TOPK = 2  # eagle3 patch\n"))
    patch = tmp_path / "tiny.patch"
    patch.write_text(git(repo, "diff", "--no-color"))
    elsewhere = tmp_path / "cwd"
    elsewhere.mkdir()
    result = _collect(elsewhere, [patch], python=str(built_venv.python))
    entry = result["data"]["patches"][str(patch)]
    assert entry["target"]["root"] == str(site) and entry["target"]["kind"] == "site-packages"
    assert entry["target"]["strip"] == 2 and entry["target"]["dist"] == "tinypkg"
    assert entry["target"]["version"] == "1.0"
    assert _statuses(entry) == ["not applied"]
    assert entry["hunks"]["1"]["file"] == "tinypkg/core.py"


def test_hostile_patch_files_each_get_a_recorded_status(tmp_path, checkout, monkeypatch):
    repo, good_patch = checkout
    d = tmp_path / "hostile"
    d.mkdir()
    (d / "empty.patch").write_text("")
    (d / "prose.diff").write_text("This is not a patch.\nJust words.\n")
    outside = good_patch.read_text().replace(f"a/{REL}", "a/../../etc/passwd").replace(f"b/{REL}", "b/../../etc/passwd")
    (d / "escape.patch").write_text(outside)
    (d / "crlf.patch").write_bytes(good_patch.read_bytes().replace(b"\n", b"\r\n"))
    (d / "binary.patch").write_text(
        f"diff --git a/{REL} b/{REL}\nindex 1111111..2222222 100644\nGIT binary patch\nliteral 5\n"
        "McmZ?b0T3(<0RR91\n\nliteral 0\nHcmV?d00001\n\n")
    (d / "truncated.patch").write_text("".join(good_patch.read_text().splitlines(True)[:17]))
    big = d / "huge.patch"
    with open(big, "wb") as handle:
        handle.truncate(100 << 20)  # 100 MB: never parsed, never split into processes
    (d / "notes.txt").write_text("not a *.patch: not read\n")
    before = tree_state(repo)
    calls = []
    real_run = collector.__dict__.get("_judge")
    monkeypatch.setattr(collector, "_judge", lambda *a: calls.append(a) or real_run(*a))
    result = _collect(repo, [d])
    assert result["status"] == "ok", result
    found = {os.path.basename(p): e for p, e in result["data"]["patches"].items()}
    assert sorted(found) == sorted(["empty.patch", "prose.diff", "escape.patch", "crlf.patch", "binary.patch",
                                    "truncated.patch", "huge.patch"])
    assert found["empty.patch"]["status"] == "empty"
    assert found["prose.diff"]["status"] == "not a patch"
    assert _statuses(found["escape.patch"]) == ["unsafe path"] * 3
    assert set(_statuses(found["crlf.patch"])) == {"conflict"}  # CRLF lines do not match an LF file
    assert _statuses(found["binary.patch"]) == ["conflict"]
    assert found["binary.patch"]["hunks"]["1"]["unit"] == "binary"
    assert found["truncated.patch"]["hunks"]["2"]["status"] == "conflict"
    assert found["huge.patch"]["status"] == "too large" and found["huge.patch"]["size"] == 100 << 20
    assert "hunks" not in found["huge.patch"] and found["huge.patch"]["sha256"]
    assert collector.summarize(result["data"])[0] == ("7 patches: 2 conflict, 1 empty, 1 mixed, 1 not a patch, "
                                                       "1 too large, 1 unsafe path")
    assert len(calls) == 3 + 1 + 2  # crlf's three hunks, the binary unit, truncated's two: nothing else ran git
    assert tree_state(repo) == before
    assert not Path("/etc/passwd").read_text().startswith("diff")


def test_hunks_past_the_bound_are_named_not_checked(checkout, monkeypatch):
    repo, patch = checkout
    monkeypatch.setattr(collector, "MAX_CHECKED_HUNKS", 2)
    entry = _collect(repo, [patch])["data"]["patches"][str(patch)]
    assert _statuses(entry) == ["not applied", "not applied", "not checked"]
    assert "bound of 2 hunks" in entry["hunks"]["3"]["why"]


def test_target_missing_and_no_patch_option(tmp_path, checkout):
    repo, patch = checkout
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    entry = _collect(elsewhere, [patch])["data"]["patches"][str(patch)]
    assert entry["status"] == "target missing" and "none of the files it names exists" in entry["note"]
    assert _collect(elsewhere, [])["status"] == "unavailable"


def test_cli_capture_with_patch_and_a_missing_one(tmp_path, checkout):
    repo, patch = checkout
    (repo / REL).write_text(with_edits((1, 3)))
    out = tmp_path / "s.json"
    proc = run_envsnap("capture", "-o", out, "--patch", patch, "--timeout", "60", cwd=repo)
    assert proc.returncode == 0, proc.stderr
    assert "partly applied (2 applied, 1 not applied)" in run_envsnap("show", out).stdout
    shown = run_envsnap("show", "-v", out).stdout
    assert f"hunk 2 ({REL} @@ -19,7 +19,7 @@ def select_experts(scores, k):): not applied" in shown
    missing = run_envsnap("capture", "-o", tmp_path / "t.json", "--patch", tmp_path / "nope.patch")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert len(missing.stderr.strip().splitlines()) <= 3 and "nope.patch" in missing.stderr
