"""`capture --python OTHER`: the git section follows OTHER's editable installs, not envsnap's own.

The user's steps: a venv of the server with `pip install -e` of an SGLang-like checkout that has
a `git stash` and uncommitted edits; envsnap installed elsewhere (here: the test interpreter, where
envsnap itself is an editable install of this repository); `envsnap capture --python VENV/bin/python`
from a directory that is no repository.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
from helpers import REPO_ROOT, run_envsnap
from helpers.git import git, init_repo, sha256_of

pytestmark = [pytest.mark.slow, pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")]


def _server_checkout(where):
    """A real git checkout of a package, with one stash entry, an edited file and an untracked one."""
    repo = init_repo(where, {
        "pyproject.toml": textwrap.dedent("""\
            [build-system]
            requires = ["setuptools"]
            build-backend = "setuptools.build_meta"
            [project]
            name = "fastserve"
            version = "0.1"
            [tool.setuptools]
            packages = ["fastserve"]
            """),
        "fastserve/__init__.py": "",
        "fastserve/topk.py": "TOPK = 8\n",
    })
    (repo / "fastserve" / "topk.py").write_text("TOPK = 2  # tried and stashed\n")
    git(repo, "stash", "push", "-q", "-m", "try eagle3 patch")
    (repo / "fastserve" / "topk.py").write_text("TOPK = 4  # uncommitted edit\n")
    (repo / "notes.txt").write_text("left here\n")
    return repo


def _venv_with_editable(where, source):
    """A real venv (no pip inside: fast) with a real `pip install -e` of `source`, made by this pip."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   capture_output=True, timeout=120)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--disable-pip-version-check", "--prefix", str(where), "-e", str(source)],
                   check=True, capture_output=True, text=True, timeout=180, cwd=str(where.parent))
    return where / "bin" / "python"


def test_capture_with_python_records_the_targets_editable_checkout_not_envsnaps(tmp_path):
    repo = _server_checkout(tmp_path / "fastserve-src")
    python = _venv_with_editable(tmp_path / "server-venv", repo)
    elsewhere = tmp_path / "not-a-repo"
    elsewhere.mkdir()
    out = tmp_path / "snap.json"

    result = run_envsnap("capture", "-o", out, "--python", python, "--timeout", "60", cwd=elsewhere)
    assert result.returncode == 0, result.stderr

    snap = json.loads(out.read_text())
    section = snap["sections"]["git"]
    assert section["status"] == "ok", section
    repos = section["data"]["repos"]
    top = os.path.realpath(repo)
    assert top in repos, f"the target's editable checkout was not recorded: {sorted(repos)}"
    recorded = repos[top]
    assert recorded["roles"] == ["editable:fastserve"]
    assert recorded["dirty"]["fastserve/topk.py"]["status"] == "M"
    assert recorded["dirty"]["fastserve/topk.py"]["sha256"] == sha256_of(repo / "fastserve" / "topk.py")
    assert list(recorded["untracked"]) == ["notes.txt"]
    assert [entry["message"] for entry in recorded["stash"].values()] == ["On main: try eagle3 patch"]
    # envsnap's own checkout is an editable install of the interpreter running envsnap, not of the target.
    assert os.path.realpath(REPO_ROOT) not in repos
    assert not any(role == "editable:envsnap" for entry in repos.values() for role in entry["roles"])
    # The packages section describes the same interpreter: the two agree on what is editable.
    dists = snap["sections"]["packages"]["data"]["dists"]
    assert dists["fastserve"]["origin"]["kind"] == "editable"
    assert "envsnap" not in dists

    shown = run_envsnap("show", "-v", out)
    assert shown.returncode == 0, shown.stderr
    assert "fastserve-src" in shown.stdout and "try eagle3 patch" in shown.stdout


def test_unreachable_target_keeps_the_cwd_repo_and_says_why(tmp_path, git_repo):
    # An executable that is no Python (a missing one is bad input: tests/cli/test_cli_bad_input.py).
    broken = tmp_path / "not-a-python"
    broken.write_text("#!/bin/sh\necho 'not a python' >&2\nexit 1\n")
    broken.chmod(0o755)
    out = tmp_path / "snap.json"
    result = run_envsnap("capture", "-o", out, "--python", broken, "--timeout", "30", cwd=git_repo)
    assert result.returncode == 0, result.stderr
    git_section = json.loads(out.read_text())["sections"]["git"]
    assert git_section["status"] == "ok"
    assert list(git_section["data"]["repos"]) == [os.path.realpath(git_repo)]
    assert git_section["data"]["errors"]["editable installs"]
