"""The torch collector: static facts read from real installed files (never importing
torch), the real CPU torch installed here, and --deep's bounded subprocess."""
from __future__ import annotations

import json
import subprocess
import sys
import time
from importlib import metadata

import pytest
from helpers import REPO_ROOT

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import torch as torch_collector

HAS_TORCH = any(True for _ in metadata.distributions(name="torch"))
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


def _ctx(timeout: float, deep: bool = False, cwd: str = ".") -> CaptureContext:
    ctx = CaptureContext(timeout=timeout, deep=deep, cwd=cwd)
    ctx.deadline = time.monotonic() + timeout
    return ctx


def _dist_info(site, name: str, version: str, requires=()) -> None:
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True)
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {req}" for req in requires]
    (info / "METADATA").write_text("\n".join(lines) + "\n")


def _sentinel(site):
    return site.parent / "torch-was-imported"


@pytest.fixture
def h200_site(tmp_path):
    """A site-packages laid out like the H200's pip-installed torch 2.11.0+cu130.

    Versions from tests/data/nvidia/torch-collect-env.txt (torch 2.11.0+cu130, CUDA 13.0,
    nvidia-nccl-cu13 2.28.9, nvidia-cudnn-cu13 9.19.0.56, nvidia-cublas 13.1.0.3); the
    version.py layout is that of the torch wheel installed here (annotated assignments);
    the git hash is a placeholder (collect_env does not print it).
    """
    site = tmp_path / "site-packages"
    pkg = site / "torch"
    pkg.mkdir(parents=True)
    sentinel = _sentinel(site)
    # If anything executed the package, this file would appear.
    (pkg / "__init__.py").write_text(f"open({str(sentinel)!r}, 'w').close()\n")
    (pkg / "version.py").write_text(
        "from typing import Optional\n\n"
        "__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']\n"
        "__version__ = '2.11.0+cu130'\n"
        "debug = False\n"
        "cuda: Optional[str] = '13.0'\n"
        "git_version = '0123456789abcdef0123456789abcdef01234567'\n"
        "hip: Optional[str] = None\n"
        "rocm: Optional[str] = None\n"
        "xpu: Optional[str] = None\n")
    _dist_info(site, "torch", "2.11.0+cu130", requires=[
        "filelock",
        'nvidia-nccl-cu13==2.28.9; platform_system == "Linux"',
        'nvidia-cudnn-cu13==9.19.0.56; platform_system == "Linux"',
        'nvidia-cublas==13.1.0.3; platform_system == "Linux"',
        'opt-einsum>=3.3; extra == "opt-einsum"',
    ])
    _dist_info(site, "nvidia-nccl-cu13", "2.28.9")
    _dist_info(site, "nvidia-cudnn-cu13", "9.19.0.56")
    _dist_info(site, "nvidia-cublas", "13.1.0.3")
    return site


def test_static_facts_of_a_cuda_torch_are_read_from_files(h200_site):
    data = torch_collector.inspect_torch([str(h200_site)])
    assert data["installed"] is True
    assert data["version"] == data["dist_version"] == "2.11.0+cu130"
    assert data["cuda"] == "13.0"
    assert data["git_version"] == "0123456789abcdef0123456789abcdef01234567"
    assert data["nccl"] == "2.28.9" and data["nccl_source"] == "nvidia-nccl-cu13 (dist required by torch)"
    assert data["cudnn"] == "9.19.0.56"
    assert data["nvidia_libs"] == {"nvidia-cublas": "13.1.0.3", "nvidia-cudnn-cu13": "9.19.0.56",
                                   "nvidia-nccl-cu13": "2.28.9"}
    assert data["location"] == str(h200_site / "torch")
    assert "errors" not in data
    assert not _sentinel(h200_site).exists(), "torch/__init__.py was executed"
    assert torch_collector.summarize(data) == [
        f"torch 2.11.0+cu130 (CUDA 13.0, cuDNN 9.19.0.56, NCCL 2.28.9) at {h200_site / 'torch'}"]


def test_a_required_library_that_is_missing_is_said_so(h200_site):
    import shutil

    shutil.rmtree(h200_site / "nvidia_cudnn_cu13-9.19.0.56.dist-info")
    data = torch_collector.inspect_torch([str(h200_site)])
    assert data["cudnn"] is None
    assert data["cudnn_source"] == "nvidia-cudnn-cu13 required but not installed"
    assert data["nvidia_libs"]["nvidia-cudnn-cu13"] is None


def test_unreadable_version_py_is_recorded_not_raised(h200_site):
    (h200_site / "torch" / "version.py").write_text("__version__ = (\n")
    data = torch_collector.inspect_torch([str(h200_site)])
    assert data["version"] == "2.11.0+cu130"  # falls back to the distribution's metadata
    assert "SyntaxError" in data["errors"]["version_py"]
    (h200_site / "torch" / "version.py").write_text("import os\n__version__ = os.environ['X']\ncuda = '12.8'\n")
    data = torch_collector.inspect_torch([str(h200_site)])
    assert data["cuda"] == "12.8" and data["version"].startswith("Subscript(")


def test_not_installed_is_unavailable(tmp_path, monkeypatch):
    assert torch_collector.inspect_torch([str(tmp_path)]) is None
    monkeypatch.setattr(sys, "path", [str(tmp_path)])
    result = torch_collector.collect(_ctx(5))
    assert result == {"status": "unavailable", "reason": "torch is not installed", "data": {"installed": False}}
    assert torch_collector.summarize(result["data"]) == ["torch is not installed"]


@needs_torch
def test_installed_torch_is_read_without_importing_it():
    """The default capture runs in a fresh interpreter: torch must not enter sys.modules."""
    code = ("import json, sys\n"
            "from envsnap.capture.runner import capture\n"
            "from envsnap.capture.base import CaptureContext\n"
            "snap = capture(CaptureContext(timeout=60))\n"
            "print(json.dumps({'torch_imported': 'torch' in sys.modules,\n"
            "                  'section': snap['sections']['torch']}))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          cwd=str(REPO_ROOT))
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["section"]["status"] == "ok"
    assert report["section"]["data"]["version"] == metadata.version("torch")
    assert report["torch_imported"] is False


def test_deep_import_is_bounded_by_the_deadline(tmp_path):
    if not HAS_TORCH:
        pytest.skip("torch is not installed")
    ctx = _ctx(0.3, deep=True, cwd=str(tmp_path))  # far too short to import torch
    start = time.monotonic()
    result = torch_collector.collect(ctx)
    assert time.monotonic() - start < 1.5
    assert result["status"] == "error"
    assert result["error"].startswith("--deep: importing torch in a subprocess: timeout after")
    assert result["data"]["version"] == metadata.version("torch")  # the static facts survive


@pytest.mark.slow
@needs_torch
def test_deep_imports_torch_in_a_subprocess(tmp_path):
    result = torch_collector.collect(_ctx(120, deep=True, cwd=str(tmp_path)))
    assert result["status"] == "ok", result.get("error")
    data = result["data"]
    deep = data["deep"]
    assert deep["errors"] == {}
    # The running library agrees with what was read from its files.
    assert deep["version"] == data["version"]
    assert deep["cuda_runtime"] == data["cuda"]
    assert deep["location"] == data["location"]
    assert isinstance(deep["cuda_available"], bool)
    assert deep["device_count"] == len(deep["devices"])
    assert deep["tf32"]["float32_matmul_precision"] in ("highest", "high", "medium")
    assert isinstance(deep["tf32"]["matmul_allow_tf32"], bool) and isinstance(deep["tf32"]["cudnn_allow_tf32"], bool)
    assert deep["config"].startswith("PyTorch built with")
    assert "at::get_num_threads()" in deep["parallel_info"]
    if not deep["cuda_available"]:
        assert deep["nccl_version"] is None
    lines = torch_collector.summarize(data)
    assert lines[1].startswith("deep: CUDA ") and "float32_matmul_precision" in lines[2]
    json.dumps(result, allow_nan=False)


def test_envsnap_python_describes_the_servers_interpreter(h200_site, tmp_path, monkeypatch):
    """ENVSNAP_PYTHON points at another environment: its torch is described, not ours."""
    import shutil
    import venv

    env_dir = tmp_path / "server-venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = env_dir / "bin" / "python"
    site = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                          capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    monkeypatch.setenv("ENVSNAP_PYTHON", str(python))
    result = torch_collector.collect(_ctx(30, cwd=str(tmp_path)))
    assert result == {"status": "unavailable", "reason": "torch is not installed", "data": {"installed": False}}

    for entry in h200_site.iterdir():
        shutil.copytree(entry, f"{site}/{entry.name}")
    result = torch_collector.collect(_ctx(30, cwd=str(tmp_path)))
    assert result["status"] == "ok"
    data = result["data"]
    assert (data["version"], data["cuda"], data["nccl"]) == ("2.11.0+cu130", "13.0", "2.28.9")
    assert data["location"] == f"{site}/torch" and data["interpreter"] == str(python)
    assert not _sentinel(h200_site).exists()
