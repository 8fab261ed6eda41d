"""The cache of torch's --deep probe (envsnap/capture/deepcache.py): reused only when nothing it
depends on changed, and every change of a key component runs the probe again.

The probe is the real one (torch.py's DEEP_SCRIPT in a real child interpreter) importing a small
real `torch` package from a directory on PYTHONPATH that counts its imports, so each test sees
exactly when the probe ran; a test at the end does the same with the real (CPU) torch through
the CLI. The GPU set comes from tests/helpers/nvml.py's H200 stand-in (no GPU here).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.nvml import h200_dump, make_fake_pynvml

from envsnap.analysis import knowledge
from envsnap.capture import deepcache, filestat
from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import torch as torch_collector

SHORT_WINDOW_NS = 50_000_000
STUB = """import os, types
with open(os.environ["STUB_TORCH_COUNTER"], "a") as handle:
    handle.write("imported\\n")
__version__ = "0.0.stub"
cuda = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)
__config__ = types.SimpleNamespace(show=lambda: "stub build", parallel_info=lambda: "stub threads")
get_num_threads = lambda: 1
are_deterministic_algorithms_enabled = lambda: False
"""


class Stub:
    def __init__(self, root: Path):
        self.site = root / "stubsite"
        (self.site / "torch").mkdir(parents=True)
        self.init = self.site / "torch" / "__init__.py"
        self.init.write_text(STUB)
        self.counter = root / "imports"
        self.counter.write_text("")
        self.cwd = root

    def imports(self) -> int:
        return len(self.counter.read_text().splitlines())

    def probe(self, executable: str = sys.executable, no_cache: bool = False):
        ctx = CaptureContext(deep=True, timeout=60, cwd=str(self.cwd), no_cache=no_cache)
        ctx.deadline = time.monotonic() + 60
        deep, bookkeeping = deepcache.cached_probe(ctx, executable,
                                                   lambda: torch_collector.deep_probe(ctx, executable))
        assert "error" not in deep, deep
        return deep, bookkeeping

    @staticmethod
    def settle() -> None:
        time.sleep(3 * SHORT_WINDOW_NS / 1e9)


@pytest.fixture
def stub(tmp_path, monkeypatch):
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", SHORT_WINDOW_NS)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    s = Stub(tmp_path)
    monkeypatch.setenv("PYTHONPATH", str(s.site))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")  # no __pycache__ appearing under the key
    monkeypatch.setenv("STUB_TORCH_COUNTER", str(s.counter))
    monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml())
    s.settle()
    return s


def _warm(stub: Stub):
    first, _ = stub.probe()
    stub.settle()
    second, bookkeeping = stub.probe()
    assert bookkeeping["used"] is True and stub.imports() == 1
    return first, second


def test_second_probe_comes_from_the_cache_and_says_so(stub):
    first, bookkeeping = stub.probe()
    assert stub.imports() == 1 and bookkeeping["used"] is False
    assert "no cached probe" in bookkeeping["note"]
    assert first["version"] == "0.0.stub" and "cached" not in first
    assert not any(k.startswith("_") for k in first)  # the key's inputs never reach the section
    stub.settle()
    second, bookkeeping = stub.probe()
    assert stub.imports() == 1  # not imported again
    assert bookkeeping == {"used": True, "path": bookkeeping["path"]} and os.path.isfile(bookkeeping["path"])
    cached = second.pop("cached")
    assert second == first
    assert cached["files_checked"] > 3 and len(cached["key"]) == 16 and cached["from"].endswith("Z")


def _rewrite_keeping_size_and_mtime(path: Path, text: str) -> None:
    before = path.stat()
    assert len(text.encode()) == before.st_size
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))


def _venv_python(root: Path) -> str:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / "venv")], check=True)
    return str(root / "venv" / "bin" / "python")


@pytest.mark.parametrize("change", ["loaded file edited, size and mtime put back", "module added beside it",
                                    "entry added to a sys.path directory", "environment variable",
                                    "GPU added", "driver version", "CPU set", "interpreter"])
def test_any_change_of_a_key_component_runs_the_probe_again(stub, tmp_path, monkeypatch, change):
    _warm(stub)
    executable = sys.executable
    expected_note = {"environment variable": "environment", "GPU added": "gpus", "driver version": "gpus",
                     "CPU set": "host", "interpreter": "interpreter"}.get(change, "a file the probe loaded")
    if change == "loaded file edited, size and mtime put back":
        _rewrite_keeping_size_and_mtime(stub.init, STUB.replace("0.0.stub", "0.0.stux"))
    elif change == "module added beside it":
        (stub.site / "torch" / "extra.py").write_text("")
    elif change == "entry added to a sys.path directory":
        (stub.site / "sitecustomize.py").write_text("")
    elif change == "environment variable":
        monkeypatch.setenv("SOME_TUNING_KNOB", "1")
    elif change == "GPU added":
        monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(gpu_count=2))
    elif change == "driver version":
        dump = h200_dump()
        dump["driver"] = "590.00.01"
        monkeypatch.setitem(sys.modules, "pynvml", make_fake_pynvml(dump=dump))
    elif change == "CPU set":
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            pytest.skip("needs 2 CPUs to take one away")
        os.sched_setaffinity(0, cpus[:1])  # restored below
    elif change == "interpreter":
        executable = _venv_python(tmp_path)
    stub.settle()
    try:
        again, bookkeeping = stub.probe(executable)
    finally:
        if change == "CPU set":
            os.sched_setaffinity(0, cpus)
    assert stub.imports() == 2, change  # the probe ran again
    assert bookkeeping["used"] is False and "cached" not in again
    assert expected_note in bookkeeping["note"], bookkeeping
    if change == "loaded file edited, size and mtime put back":
        assert again["version"] == "0.0.stux"


def test_bookkeeping_variables_do_not_run_the_probe_again(stub, monkeypatch):
    _warm(stub)
    monkeypatch.setenv("SHLVL", "7")
    monkeypatch.setenv("OLDPWD", "/somewhere/else")
    monkeypatch.setenv("ENVSNAP_DEBUG", "1")
    _, bookkeeping = stub.probe()
    assert bookkeeping["used"] is True and stub.imports() == 1


def test_each_ignored_variable_is_volatile_bookkeeping_in_the_knowledge_table():
    for name in deepcache.BOOKKEEPING_ENV:
        assert knowledge.is_volatile(f"env.{name}"), name
    for prefix in deepcache.BOOKKEEPING_PREFIXES:
        assert knowledge.is_volatile(f"env.{prefix}ANYTHING"), prefix
    assert not knowledge.is_volatile("env.CUDA_VISIBLE_DEVICES")  # what the key must keep


def test_no_cache_runs_the_probe_and_leaves_the_cache_untouched(stub):
    _warm(stub)
    bookkeeping = stub.probe()[1]
    path = Path(bookkeeping["path"])
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    deep, bookkeeping = stub.probe(no_cache=True)
    assert stub.imports() == 2 and "cached" not in deep
    assert bookkeeping["used"] is False and bookkeeping["path"] is None and "--no-cache" in bookkeeping["note"]
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_a_damaged_cache_is_ignored_then_replaced(stub):
    _warm(stub)
    path = next((Path(os.environ["XDG_CACHE_HOME"]) / "envsnap").glob("probe-*.cache"))
    data = bytearray(path.read_bytes())
    data[-10] ^= 0x01
    path.write_bytes(bytes(data))
    _, bookkeeping = stub.probe()
    assert stub.imports() == 2 and "cache ignored" in bookkeeping["note"] and "checksum" in bookkeeping["note"]
    stub.settle()
    assert stub.probe()[1]["used"] is True and stub.imports() == 2


def test_a_probe_of_files_changed_within_the_racy_window_is_not_cached(stub, monkeypatch):
    monkeypatch.setattr(filestat, "RACY_WINDOW_NS", 3_000_000_000)
    stub.init.write_text(STUB)  # just now: racy
    _, bookkeeping = stub.probe()
    assert "racy" in bookkeeping["note"]
    _, bookkeeping = stub.probe()
    assert stub.imports() == 2 and bookkeeping["used"] is False


@pytest.mark.slow  # imports the real (CPU) torch two or three times (~3 s each here)
def test_real_torch_deep_probe_twice_reports_the_same_from_the_cache(tmp_path, monkeypatch):
    if torch_collector.inspect_torch() is None:
        pytest.skip("torch is not installed")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))

    def collect():
        ctx = CaptureContext(deep=True, timeout=120, cwd=str(tmp_path))
        ctx.deadline = time.monotonic() + 120
        section = torch_collector.collect(ctx)
        assert section["status"] == "ok", section
        return section["data"]

    first = collect()
    for _ in range(2):  # the first import may write byte code: a later probe finds it settled
        time.sleep(filestat.RACY_WINDOW_NS / 1e9 + 0.2)
        second = collect()
        if second["deep_cache"]["used"]:
            break
    assert second["deep_cache"]["used"] is True, second["deep_cache"]
    cached = second["deep"].pop("cached")
    assert cached["files_checked"] > 100  # torch's modules and shared libraries
    assert second["deep"] == first["deep"]
