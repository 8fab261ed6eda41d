"""Fixtures shared by every test layer: real git repositories, a real tampered venv, the CLI.

Helpers (paths, run_envsnap, builders of real venvs, process trees and benchmarks) are the
package tests/helpers; tests import them from there, and their fixtures are declared here.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
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


# Imports every module of envsnap (and so what they import at their top level) in a child that writes
# their bytecode to the session's cache.
_WARM_BYTECODE = """
import importlib, pkgutil, envsnap
for module in pkgutil.walk_packages(envsnap.__path__, "envsnap."):
    if module.name != "envsnap.__main__":
        try:
            importlib.import_module(module.name)
        except Exception:
            pass
"""


@pytest.fixture(scope="session", autouse=True)
def _private_bytecode_cache(tmp_path_factory):
    """Where the environment turns bytecode caching off (PYTHONDONTWRITEBYTECODE, as this container
    does), every Python the tests start -- several hundred `python -m envsnap`, benchmarks, probes --
    compiles envsnap from source again (~0.2 s of each CLI run on 2 cores). They share a bytecode
    cache of this session instead: PYTHONPYCACHEPREFIX, a directory of its own, so nothing is written
    beside any source file (the checkout, a test's directories, site-packages). It starts filled with
    envsnap's modules and what they import, so that a child a test keeps from writing bytecode
    (PYTHONDONTWRITEBYTECODE=1 in its environment) reads them from there too. Where bytecode caching
    is on already, or a cache directory is set, nothing changes."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE") or os.environ.get("PYTHONPYCACHEPREFIX"):
        yield
        return
    saved = os.environ.pop("PYTHONDONTWRITEBYTECODE")
    os.environ["PYTHONPYCACHEPREFIX"] = str(tmp_path_factory.mktemp("pycache"))
    subprocess.run([sys.executable, "-c", _WARM_BYTECODE], capture_output=True, timeout=300, check=False)
    yield
    os.environ["PYTHONDONTWRITEBYTECODE"] = saved
    os.environ.pop("PYTHONPYCACHEPREFIX", None)


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
