"""Shared fixtures: real git repositories, real processes, the envsnap CLI as a subprocess."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data" / "h200"
TEST_DATA = Path(__file__).resolve().parent / "data"


def _has_nvml_gpu() -> bool:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            return pynvml.nvmlDeviceGetCount() > 0
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return False


def pytest_collection_modifyitems(config, items):
    if _has_nvml_gpu():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with NVML (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def run_envsnap(*args, env=None, cwd=None, timeout=120, input_text=None):
    """Run the real CLI in a subprocess: exit codes and stderr are part of what we test."""
    full_env = dict(os.environ)
    full_env.pop("ENVSNAP_DEBUG", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "envsnap", *map(str, args)],
        capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout, input=input_text,
    )


@pytest.fixture
def envsnap_cli():
    return run_envsnap


@pytest.fixture
def git_repo(tmp_path):
    """A real git repository with one commit."""
    if not shutil.which("git"):
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}

    def git(*args):
        return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True,
                              env={**os.environ, **env}).stdout

    git("init", "-q", "-b", "main")
    (repo / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("commit", "-q", "-m", "first")
    repo = _RepoPath(repo)
    repo.git = git  # type: ignore[attr-defined]
    return repo


class _RepoPath(type(Path())):
    """A Path that can carry the repo's git() helper (plain Path instances have __slots__)."""


def load_json(path):
    return json.loads(Path(path).read_text())
