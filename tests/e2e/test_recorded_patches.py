"""Recorded patches end to end: `envsnap run --patch` on both sides of a real change, then `envsnap diff`.

A real venv has a package (`tinymoe`) installed by pip; a real checkout of its source holds four patches
made by `git diff` in its own layout (python/tinymoe/...), as a patch script carries them:
  eagle3.patch   three hunks of topk.py: hunks 1-2 applied on GOOD with hunk 3 reverted (partly
                 applied), all three on BAD; hunk 3 makes the benchmark's step ten times the work;
  router.patch   applied on both sides;  sampler.patch  applied on neither;
  kernels.patch  its lines hold another edit on both sides (conflict);
  notes.patch    against the checkout envsnap runs in (its working directory; the benchmark's code is
                 elsewhere): not applied on GOOD, applied on BAD.
Besides, 18 shell variables, a watched file and an untracked file change. The hunk whose status changed in
the code the benchmark runs must rank first, for its evidence: its file changed with it, and it is
installed in the interpreter that ran (notes.patch's hunk changed too, in a checkout whose code never ran).
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from helpers import causes_by_key, run_envsnap
from helpers.git import git, init_repo
from helpers.patches import BENCH, TOPK, install_package, make_patch, with_edits

pytestmark = pytest.mark.slow

ROUTER = "def route(x):\n    return x\n"
SAMPLER = "def sample(p):\n    return max(p)\n"
KERNELS = "BLOCK = 64\n"
INNOCENT_ENV = {"EDITOR": "nvim", "PAGER": "less", "LESS": "-FRX", "HISTSIZE": "10000", "HISTCONTROL": "ignoredups",
                "TERM_PROGRAM": "tmux", "TERM_PROGRAM_VERSION": "3.5", "COLORTERM": "truecolor",
                "DEPLOY_ENV": "staging", "TEAM": "inference", "TICKET": "PERF-1234", "GIT_PAGER": "cat",
                "MANPAGER": "less -R", "PS4": "+ ", "VISUAL": "nvim", "BROWSER": "none", "DOCKER_BUILDKIT": "1",
                "EXPERIMENT": "b"}


def _patch_of(repo: Path, rel: str, new: str, out: Path) -> Path:
    old = (repo / rel).read_text()
    (repo / rel).write_text(new)
    out.write_text(git(repo, "diff", "--no-color", "--", rel))
    (repo / rel).write_text(old)
    return out


def _env():
    env = {k: v for k, v in os.environ.items() if k not in INNOCENT_ENV}
    env.pop("PYTEST_CURRENT_TEST", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def _run(tmp_path, cwd, python, name, env, patches):
    out = tmp_path / f"{name}.json"
    args = [str(python), "-m", "envsnap", "run", "-o", str(out), "--label", name, "--repeat", "3",
            "--watch", str(tmp_path / "watched")]
    for patch in patches:
        args += ["--patch", str(patch)]
    proc = subprocess.run(args + ["--", str(python), str(tmp_path / "bench.py")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_the_hunk_whose_status_changed_ranks_first_among_innocent_differences(tmp_path, git_repo):
    modules = {"topk.py": TOPK, "router.py": ROUTER, "sampler.py": SAMPLER, "kernels.py": KERNELS}
    python, site = install_package(tmp_path, "tinymoe", modules)
    src = init_repo(tmp_path / "tinymoe-checkout", {f"python/tinymoe/{k}": v for k, v in modules.items()})
    pdir = tmp_path / "patches"
    pdir.mkdir()
    make_patch(src, "python/tinymoe/topk.py", pdir / "eagle3.patch")
    _patch_of(src, "python/tinymoe/router.py", ROUTER.replace("return x", "return list(x)"), pdir / "router.patch")
    _patch_of(src, "python/tinymoe/sampler.py", SAMPLER.replace("max(p)", "max(p, default=0)"), pdir / "sampler.patch")
    _patch_of(src, "python/tinymoe/kernels.py", "BLOCK = 128\n", pdir / "kernels.patch")
    (git_repo / "a.py").write_text("x = 1\nmode = 'fast'\n")
    git(git_repo, "commit", "-qam", "a")
    notes_patch = _patch_of(git_repo, "a.py", "x = 1\nmode = 'debug'\n", tmp_path / "notes.patch")
    (tmp_path / "bench.py").write_text(BENCH.format(package="tinymoe"))
    (tmp_path / "watched").mkdir()
    (tmp_path / "watched" / "serve.yaml").write_text("max_batch: 64\n")
    installed = {name: site / "tinymoe" / name for name in modules}

    # GOOD: eagle3 partly applied (hunk 3 reverted), router applied, kernels.py holding another edit.
    installed["topk.py"].write_text(with_edits((1, 2)))
    installed["router.py"].write_text(ROUTER.replace("return x", "return list(x)"))
    installed["kernels.py"].write_text("BLOCK = 256  # tuned by hand\n")
    patches = [pdir, notes_patch]
    good = _run(tmp_path, git_repo, python, "good", _env(), patches)
    # BAD: the whole of eagle3 applied, notes.patch applied in the checkout, and innocent changes.
    installed["topk.py"].write_text(with_edits((1, 2, 3)))
    (git_repo / "a.py").write_text("x = 1\nmode = 'debug'\n")
    (git_repo / "notes.txt").write_text("try the new kernel\n")
    (tmp_path / "watched" / "serve.yaml").write_text("max_batch: 64\n# tuned 2025-11-28\n")
    bad = _run(tmp_path, git_repo, python, "bad", dict(_env(), **INNOCENT_ENV), patches)

    proc = run_envsnap("diff", good, bad, "--format", "json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    assert result["verdict"]["change_pct"] < -50, result["verdict"]["summary"]  # the hunk really slows it
    keys = [c["key"] for c in result["causes"]]
    faces = list(causes_by_key(result["causes"]))  # one change, one cause: a variable's other keys are folded
    innocent = [k for k in faces if k.startswith(("env.", "workers.env.", "files.", "git."))
                or k == "patches.notes.patch.hunk.1"]
    assert len(innocent) >= 20, faces
    top = result["causes"][0]
    assert top["key"] == "patches.eagle3.patch.hunk.3", keys[:6]
    assert (top["good"], top["bad"]) == ("not applied", "applied")
    assert top["why"].startswith("hunk 3 of eagle3.patch (tinymoe/topk.py @@ ")
    factors = {f["factor"] for f in top["factors"]}
    assert {"hunk_code_changed", "patch_target_installed"} <= factors
    # The other changed hunk: its file changed too, in the checkout the benchmark ran in (its working directory),
    # but the benchmark's code came from elsewhere (bench.py): never "not what runs", and not what ran either.
    notes = next(c for c in result["causes"] if c["key"] == "patches.notes.patch.hunk.1")
    factors = {f["factor"] for f in notes["factors"]}
    assert "checkout_code_elsewhere" in factors and not {"checkout_runs", "checkout_not_running"} & factors
    assert notes["rank"] > 1
    # The same edit found by RECORD is the hunk's change: folded into it.
    twin = causes_by_key(result["causes"])["integrity.tinymoe/topk.py"]
    assert "shown_by_hunk" in {f["factor"] for f in twin["factors"]} and twin["folded_into"] == top["key"]
    # Every patch, every hunk, each side.
    table = {p["name"]: p for p in result["patch_status"]}
    assert (table["eagle3.patch"]["good"]["status"], table["eagle3.patch"]["bad"]["status"]) == ("partly applied", "applied")
    assert [(h["good"], h["bad"]) for h in table["eagle3.patch"]["hunks"]] == [
        ("applied", "applied"), ("applied", "applied"), ("not applied", "applied")]
    assert table["router.patch"]["good"]["status"] == table["router.patch"]["bad"]["status"] == "applied"
    assert table["sampler.patch"]["bad"]["status"] == "not applied"
    assert table["kernels.patch"]["bad"]["status"] == "conflict"
    target = table["eagle3.patch"]["bad"]["target"]
    assert target == {"root": str(site), "kind": "site-packages", "strip": 2, "dist": "tinymoe", "version": "1.0"}
    assert table["notes.patch"]["bad"]["target"]["kind"] == "checkout"
    hunk3 = table["eagle3.patch"]["hunks"][2]
    assert hunk3["rank"] == 1 and "+    return sum(i * i for i in range(n * 10))" in hunk3["text"]
    # The hunk's text is in the cause's evidence, and the text and HTML outputs say the same.
    assert any("good \u2192 bad replaces `return sum(i * i for i in range(n))`" in e for e in top["evidence"])
    text = run_envsnap("diff", good, bad).stdout
    assert "1. [" in text and "patches.eagle3.patch.hunk.3  not applied \u2192 applied" in text
    assert "*hunk   3 tinymoe/topk.py @@" in text and "not applied \u2192 applied  (cause #1)" in text
    report = tmp_path / "r.html"
    assert run_envsnap("report", good, bad, "-o", report).returncode in (0, 1)
    html = report.read_text()
    assert 'id="patch-status"' in html and "cause #1</a>" in html
    assert "range(n * 10))  # eagle3: full sweep" in html
