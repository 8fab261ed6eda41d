"""Fixtures shared by every test layer: real git repositories, a real tampered venv, the CLI.

Helpers (paths, run_envsnap, builders of real venvs, process trees and benchmarks) are the
package tests/helpers; tests import them from there, and their fixtures are declared here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import run_envsnap
from helpers.venv import built_venv  # noqa: F401  (a session fixture: the tampered venv, built once)


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


@pytest.fixture(scope="session", autouse=True)
def _private_hash_cache(tmp_path_factory):
    """Captures made by the tests keep their hash cache (envsnap/capture/hashcache.py) in a
    directory of this session, never in the user's ~/.cache; subprocesses inherit it."""
    old = os.environ.get("XDG_CACHE_HOME")
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))
    yield
    if old is None:
        os.environ.pop("XDG_CACHE_HOME", None)
    else:
        os.environ["XDG_CACHE_HOME"] = old


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
