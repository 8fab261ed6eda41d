"""Patches between two snapshots (analysis/compare/patches.py) and the diff text helpers (model/patchtext.py):
checked against real git (`git diff --no-index`, `git apply`) and on real captures of a checkout."""
from __future__ import annotations

import copy
import shutil
import subprocess

import pytest
from helpers.git import git, init_repo

from envsnap.analysis import result as result_mod
from envsnap.analysis.compare import patches as patches_mod, views
from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import git as git_collector
from envsnap.model import patchtext

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")

ENGINE = ('import os\n\n\ndef _set_envs_and_config(server_args):\n    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"\n'
          '    if "NCCL_NVLS_ENABLE" not in os.environ:\n        os.environ["NCCL_NVLS_ENABLE"] = "0"\n'
          '    os.environ["CUDA_DEVICE_MAX_CONNECTIONS"] = "8"\n')
GUARD = '    if "NCCL_NVLS_ENABLE" not in os.environ:\n        os.environ["NCCL_NVLS_ENABLE"] = "0"\n'
EDITED = ENGINE.replace(GUARD, '    os.environ["NCCL_NVLS_ENABLE"] = "0"\n')


# ---------------------------------------------------------------- the diff text itself

@pytest.mark.parametrize("old, new", [
    (ENGINE, EDITED),
    ("a\nb", "a\nc"),  # no newline at the end, on both sides
    ("x\n", "x\ny"),
    ("", "new file\n"),
    ("".join(f"line {i}\n" for i in range(200)),
     "".join(f"line {i}\n" for i in range(200)).replace("line 50\n", "").replace("line 150\n", "LINE\n")),
])
def test_unified_matches_git_line_for_line(tmp_path, old, new):
    (tmp_path / "old").write_text(old)
    (tmp_path / "new").write_text(new)
    real = subprocess.run(["git", "diff", "--no-index", "--no-color", "old", "new"], cwd=tmp_path,
                          capture_output=True, text=True).stdout
    real_body = [line for line in real.split("\n")
                 if not line.startswith(("diff --git", "index ", "new file mode", "deleted file mode"))]
    assert patchtext.unified(old, new, "a/old", "b/new").split("\n") == real_body


def test_reverse_undoes_a_patch_for_git_apply(tmp_path):
    repo = init_repo(tmp_path / "r", {"engine.py": ENGINE})
    (repo / "engine.py").write_text(EDITED)
    forward = git(repo, "diff", "HEAD")
    backward = patchtext.reverse(forward)
    assert "+" + GUARD.split("\n")[0] in backward
    git(repo, "checkout", "--", "engine.py")  # back at HEAD: the reversed patch of HEAD->EDITED is EDITED->HEAD
    (repo / "engine.py").write_text(EDITED)
    subprocess.run(["git", "apply", "-"], cwd=repo, input=backward.encode(), check=True)
    assert (repo / "engine.py").read_text() == ENGINE
    assert patchtext.stats(forward) == (1, 2, 1) and patchtext.stats(backward) == (2, 1, 1)


def test_split_names_every_file_of_a_patch_whatever_its_name(tmp_path):
    names = ["plain.py", "with space.py", "tab\there.py", "quote\"d.py", "ünï.py"]
    repo = init_repo(tmp_path / "r", {n: "1\n" for n in names})
    for name in names:
        (repo / name).write_text("2\n")
    git(repo, "mv", "plain.py", "moved plain.py")
    data = subprocess.run(["git", "-c", "core.quotePath=false", "diff", "HEAD", "--find-renames"], cwd=repo,
                          capture_output=True).stdout
    found = [path for path, _ in patchtext.split_git_patch(data)]
    assert sorted(found) == sorted(names + ["moved plain.py"])  # 1 -> 2 is no rename: a deletion and an addition
    assert b"".join(chunk for _, chunk in patchtext.split_git_patch(data)) == data  # nothing lost


# ---------------------------------------------------------------- patches between two real captures

def _capture(repo, monkeypatch):
    monkeypatch.setattr(git_collector, "editable_source_dirs", lambda: {})
    return runner.capture(CaptureContext(cwd=str(repo), timeout=30.0), only=["git"])


@pytest.fixture
def checkout(tmp_path):
    return init_repo(tmp_path / "sglang", {"engine.py": ENGINE, "scheduler.py": "class Scheduler:\n    pass\n"})


def _only(patches, kind):
    found = [p for p in patches if p["kind"] == kind]
    assert len(found) == 1, patches
    return found[0]


def test_dirty_in_bad_only_is_bads_patch_against_the_same_head(checkout, monkeypatch):
    good = _capture(checkout, monkeypatch)
    (checkout / "engine.py").write_text(EDITED)
    bad = _capture(checkout, monkeypatch)
    patch = _only(patches_mod.build(good, bad), "git")
    assert patch["diff"] == git(checkout, "diff", "HEAD", "--", "engine.py")
    assert patch["basis"].startswith("bad's `git diff HEAD`") and (patch["removed"], patch["added"]) == (2, 1)
    assert patch["good_sha256"] is None and patch["bad_sha256"] == bad["sections"]["git"]["data"]["repos"][
        str(checkout.resolve())]["dirty"]["engine.py"]["sha256"]
    # The other way round (good had the edit): the same patch, reversed, still reads good -> bad.
    back = _only(patches_mod.build(bad, good), "git")
    assert back["basis"].startswith("good's `git diff HEAD`, reversed")
    assert "+" + GUARD.split("\n")[0] in back["diff"] and (back["removed"], back["added"]) == (1, 2)


def test_dirty_on_both_sides_is_working_copy_against_working_copy(checkout, monkeypatch):
    (checkout / "engine.py").write_text(ENGINE + "# one\n")
    good = _capture(checkout, monkeypatch)
    (checkout / "engine.py").write_text(EDITED + "# one\n")
    bad = _capture(checkout, monkeypatch)
    patch = _only(patches_mod.build(good, bad), "git")
    assert patch["basis"] == "good's and bad's working copies"
    assert patch["diff"] == patchtext.unified(ENGINE + "# one\n", EDITED + "# one\n", "a/engine.py", "b/engine.py")


def test_untracked_files_and_a_new_stash_entry(checkout, monkeypatch):
    good = _capture(checkout, monkeypatch)
    (checkout / "scheduler.py").write_text("class Scheduler:\n    split_kv = 4\n")
    git(checkout, "stash", "push", "-q", "-m", "WIP split-kv")
    (checkout / "notes.md").write_text("NVLS: sync engine env handling\n")
    bad = _capture(checkout, monkeypatch)
    patches = patches_mod.build(good, bad)
    note = _only(patches, "untracked")
    assert note["diff"] == "--- /dev/null\n+++ b/notes.md\n@@ -0,0 +1 @@\n+NVLS: sync engine env handling\n"
    stash = _only(patches, "stash")
    assert stash["basis"].startswith("stash entry only in bad (stash@{0}: On main: WIP split-kv)")
    assert "+    split_kv = 4" in stash["diff"] and stash["key"] == f"git.{checkout.resolve()}.stash"
    assert [p["id"] for p in patches] == [f"patch-{i}" for i in range(1, len(patches) + 1)]


def test_snapshots_without_text_give_no_patches_and_equal_files_give_none(checkout, monkeypatch):
    good = _capture(checkout, monkeypatch)
    (checkout / "engine.py").write_text(EDITED)
    bad = _capture(checkout, monkeypatch)
    assert patches_mod.build(bad, copy.deepcopy(bad)) == []  # nothing changed
    old = copy.deepcopy(bad)  # as an envsnap that kept no text would have written it
    for entry in old["sections"]["git"]["data"]["repos"][str(checkout.resolve())]["dirty"].values():
        entry.pop("patch", None)
        entry.pop("content", None)
    assert patches_mod.build(good, old) == []


def test_causes_and_patches_point_at_each_other(checkout, monkeypatch):
    good = _capture(checkout, monkeypatch)
    (checkout / "engine.py").write_text(EDITED)
    bad = _capture(checkout, monkeypatch)
    result = result_mod.analyze(good, bad)
    patch = _only(result["patches"], "git")
    key = f"git.{checkout.resolve()}.dirty.engine.py"
    cause = next(c for c in result["causes"] if c["key"] == key)
    assert patch["causes"] == [key] and cause["patches"] == [patch["id"]]
    assert any(e.startswith(f"{patch['id']} (") and "removes `if \"NCCL_NVLS_ENABLE\" not in os.environ:`" in e
               for e in cause["evidence"])


def test_a_variable_named_by_a_changed_line_links_its_cause():
    patch = {"id": "patch-1", "key": "integrity.x/engine.py", "title": "x 1.0: x/engine.py", "kind": "installed",
             "diff": "--- a/e\n+++ b/e\n@@ -1 +1 @@\n-keep\n+os.environ['NCCL_PROTO'] = 'LL'\n", "removed": 1,
             "added": 1, "hunks": 1, "causes": []}
    causes = [{"key": "workers.env.NCCL_PROTO", "variable": "NCCL_PROTO", "evidence": ["good unset → bad LL"]},
              {"key": "workers.env.NCCL_PROTO_EXTRA", "variable": "NCCL_PROTO_EXTRA", "evidence": ["x"]},
              {"key": "env.HOME", "variable": "HOME", "evidence": ["x"]}]
    patches_mod.link(causes, [patch])
    assert patch["causes"] == ["workers.env.NCCL_PROTO"] and causes[0]["patches"] == ["patch-1"]
    assert "changes lines that name NCCL_PROTO" in causes[0]["evidence"][-1]
    assert causes[1]["patches"] == [] and causes[2]["patches"] == []  # a prefix of a name is not the name


def test_pristine_needs_and_a_one_sided_installed_edit_without_a_pristine_copy():
    def snap(modified):
        return {"sections": {"packages": {"status": "ok", "data": {
            "dists": {"tinypkg": {"name": "tinypkg", "version": "1.0"}},
            "integrity": {"modified": modified}}}}}

    edited = {"dist": "tinypkg", "recorded_sha256": "a" * 64, "actual_sha256": "b" * 64,
              "content": {"status": "text", "text": "TOPK = 4\n", "size": 9, "sha256": "b" * 64}}
    good, bad = snap({}), snap({"tinypkg/core.py": edited, "../../../bin/tool": dict(edited)})
    needs = patches_mod.pristine_needs(good, bad)
    assert needs == [{"key": "tinypkg==1.0:tinypkg/core.py", "dist": "tinypkg", "version": "1.0",
                      "path": "tinypkg/core.py", "sha256": "a" * 64, "side": "bad"}]  # scripts are not looked up
    shown = [p for p in patches_mod.build(good, bad) if p["key"] == "integrity.tinypkg/core.py"][0]
    assert shown["diff"] is None and shown["content"] == "TOPK = 4\n"
    assert "pip download --no-deps tinypkg==1.0" in shown["note"]
    found = {needs[0]["key"]: {"status": "found", "text": "TOPK = 8\n", "source": "w.whl", "sha256": "a" * 64}}
    with_pristine = [p for p in patches_mod.build(good, bad, found) if p["key"] == "integrity.tinypkg/core.py"][0]
    assert with_pristine["diff"].endswith("-TOPK = 8\n+TOPK = 4\n") and "w.whl" in with_pristine["basis"]


def test_pristine_needs_from_the_comparisons_differing_set_and_a_finder_give_the_same_answer():
    """analyze() works out what is needed from compare()'s own pass over the edited files (`differing`)
    and hands it to the caller's finder: the same needs, the same result, as a dict found beforehand."""
    def entry(recorded, actual):
        return {"dist": "tinypkg", "recorded_sha256": recorded * 64, "actual_sha256": actual * 64,
                "content": {"status": "text", "text": f"TOPK = {actual}\n", "size": 9, "sha256": actual * 64}}

    def snap(modified):
        return {"sections": {"packages": {"status": "ok", "data": {
            "dists": {"tinypkg": {"name": "tinypkg", "version": "1.0"}},
            "integrity": {"modified": modified}}}}}

    alike = {f"tinypkg/same_{i}.py": entry("a", "b") for i in range(50)}
    good = snap(dict(alike, **{"tinypkg/good_only.py": entry("a", "c"), "tinypkg/both.py": entry("a", "d")}))
    bad = snap(dict(alike, **{"tinypkg/bad_only.py": entry("a", "e"), "tinypkg/both.py": entry("a", "f")}))
    differing = views.modified_entries_differing(good, bad)
    assert differing == {"tinypkg/good_only.py", "tinypkg/bad_only.py", "tinypkg/both.py"}
    needs = patches_mod.pristine_needs(good, bad)
    # edited on both sides from one installed file: its pristine text names the hunks each side holds
    assert [n["path"] for n in needs] == ["tinypkg/bad_only.py", "tinypkg/both.py", "tinypkg/good_only.py"]
    assert patches_mod.pristine_needs(good, bad, differing) == needs
    asked = []

    def finder(wanted):
        asked.append(wanted)
        return {n["key"]: {"status": "found", "text": "TOPK = 8\n", "source": "w.whl", "sha256": "a" * 64}
                for n in wanted}
    with_finder = result_mod.analyze(good, bad, pristine=finder)
    assert asked == [needs]
    assert with_finder == result_mod.analyze(good, bad, pristine=finder(needs))
    assert any("w.whl" in p["basis"] for p in with_finder["patches"])


def test_patches_are_deterministic(checkout, monkeypatch):
    good = _capture(checkout, monkeypatch)
    (checkout / "engine.py").write_text(EDITED)
    (checkout / "z.md").write_text("z\n")
    (checkout / "a.md").write_text("a\n")
    bad = _capture(checkout, monkeypatch)
    patches = patches_mod.build(good, bad)
    assert patches == patches_mod.build(copy.deepcopy(good), copy.deepcopy(bad))
    assert [p["title"].rsplit(": ", 1)[1] for p in patches] == ["engine.py", "a.md (untracked)", "z.md (untracked)"]


def test_a_patch_against_another_head_says_it_is_not_the_whole_change(checkout, monkeypatch):
    good = _capture(checkout, monkeypatch)
    (checkout / "scheduler.py").write_text("class Scheduler:\n    steps = 2\n")
    git(checkout, "commit", "-qam", "a commit between the two days")
    (checkout / "engine.py").write_text(EDITED)
    bad = _capture(checkout, monkeypatch)
    patch = _only(patches_mod.build(good, bad), "git")
    assert patch["basis"].startswith("bad's `git diff HEAD` (against bad's HEAD")
    assert patch["note"].startswith("the HEADs differ") and patch["diff"] == git(checkout, "diff", "HEAD")


def test_the_patch_that_sets_a_variable_whatever_the_shell_exports():
    """The shell-vs-workers warning points at the edited file that overrides the export (re-exporting in the
    shell was the advice, and the wrong fix): an unconditional set in the side's lines, the file that runs
    before its checkout copy."""
    from envsnap.analysis.compare.patches import setter

    git_patch = {"id": "patch-1", "kind": "git", "title": "/src/sglang: engine.py", "diff": (
        "--- a/engine.py\n+++ b/engine.py\n@@ -1,2 +1,2 @@\n"
        '-    os.environ.setdefault("NCCL_X", "0")\n+    os.environ["NCCL_X"] = "0"\n')}
    installed = {"id": "patch-2", "kind": "installed", "title": "sglang 0.5.5: engine.py", "diff": None,
                 "basis": "edited in bad only; no pristine copy found offline: the edited text is shown",
                 "content": 'import os\nos.environ["NCCL_X"] = "0"\n'}
    assert setter([git_patch], "NCCL_X", "bad") == (git_patch, 'os.environ["NCCL_X"] = "0"')
    assert setter([git_patch], "NCCL_X", "good") is None  # GOOD's line only defaults it: an export wins
    assert setter([git_patch, installed], "NCCL_X", "bad")[0] is installed  # what the interpreter runs first
    assert setter([installed], "NCCL_X", "good") is None  # the edited text is BAD's
    assert setter([git_patch], "NCCL_XY", "bad") is None


def test_a_patch_list_is_counted_by_kind_in_words():
    from envsnap.analysis.compare.patches import counted

    assert counted([]) == "no patches"  # a report of snapshots without patches (it once raised IndexError)
    assert counted([{"kind": "git"}]) == "1 changed file"
    assert counted([{"kind": "stash"}, {"kind": "git"}, {"kind": "git"}, {"kind": "hunk"}]) == \
        "1 recorded patch hunk, 2 changed files and 1 stash entry"
