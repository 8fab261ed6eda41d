"""python collector: interpreter facts and startup hooks, on a real venv and in-process."""
from __future__ import annotations

import os
import sys
import time

import pytest
from helpers.venv import PTH_LINE, sha256_hex  # noqa: F401 (fixture)

from envsnap.capture.base import CaptureContext
from envsnap.capture.collectors import packages, python


def _py(v):
    section = v.snapshot["sections"]["python"]
    assert section["status"] == "ok", section
    return section["data"]


def _ctx(**kwargs):
    ctx = CaptureContext(**kwargs)
    ctx.deadline = time.monotonic() + 20
    return ctx


@pytest.mark.slow
def test_describes_the_target_interpreter(built_venv):
    data = _py(built_venv)
    assert data["executable"] == str(built_venv.python)
    assert data["in_venv"] is True
    assert data["prefix"] == str(built_venv.root)
    assert data["base_prefix"] != data["prefix"]
    assert str(built_venv.site) in data["sys_path"]
    assert "" not in data["sys_path"]  # the launcher's sys.path[0] is left out
    assert data["pyvenv_cfg"]["include-system-site-packages"] == "false"
    assert data["version"] == "%d.%d.%d" % sys.version_info[:3]  # the venv was made from this Python


@pytest.mark.slow
def test_sitecustomize_setting_nccl_env_is_flagged(built_venv):
    hooks = _py(built_venv)["startup_hooks"]
    path = str(built_venv.site / "sitecustomize.py")
    hook = hooks[path]
    assert hook["kind"] == "sitecustomize"
    assert hook["touches_env"] is True
    assert "NCCL_PROTO" in hook["env_mentions"]
    assert hook["loaded"] is True  # the interpreter really imported it
    assert hook["sha256"] == sha256_hex(built_venv.site / "sitecustomize.py")
    assert hook["size"] == (built_venv.site / "sitecustomize.py").stat().st_size


@pytest.mark.slow
def test_pth_import_lines_are_recorded(built_venv):
    hooks = _py(built_venv)["startup_hooks"]
    hook = hooks[str(built_venv.site / "tiny_hook.pth")]
    assert hook["kind"] == "pth"
    assert hook["import_lines"] == [PTH_LINE.strip()]
    assert hook["env_mentions"] == ["CUDA_DEVICE_MAX_CONNECTIONS"] and hook["touches_env"] is True
    editable = hooks[str(built_venv.site / "__editable__.tinyedit-0.1.pth")]
    assert editable["touches_env"] is False
    assert editable["import_lines"] or editable["path_lines"]  # setuptools writes one or the other


@pytest.mark.slow
def test_environment_changed_by_startup_hooks(built_venv):
    if os.environ.get("NCCL_PROTO") == "LL":
        pytest.skip("NCCL_PROTO=LL already set outside: no change to see")
    changes = _py(built_venv)["startup_env_changes"]
    assert changes["NCCL_PROTO"] == {"at_exec": os.environ.get("NCCL_PROTO"), "after_startup": "LL"}
    assert changes["CUDA_DEVICE_MAX_CONNECTIONS"]["after_startup"] == os.environ.get("CUDA_DEVICE_MAX_CONNECTIONS", "1")


@pytest.mark.slow
def test_shadowed_sitecustomize_on_pythonpath(built_venv, tmp_path, monkeypatch):
    """A sitecustomize earlier on sys.path wins; the venv's is still listed, as not loaded."""
    front = tmp_path / "front"
    front.mkdir()
    (front / "sitecustomize.py").write_text("import os\nos.putenv('TORCH_NCCL_AVOID_RECORD_STREAMS', '1')\n")
    monkeypatch.setenv("PYTHONPATH", str(front))
    monkeypatch.setenv(python.TARGET_ENV_VAR, str(built_venv.python))
    result = python.collect(_ctx())
    assert result["status"] == "ok", result
    hooks = result["data"]["startup_hooks"]
    first = hooks[str(front / "sitecustomize.py")]
    assert first["loaded"] is True and first["env_mentions"] == ["TORCH_NCCL_AVOID_RECORD_STREAMS"]
    assert hooks[str(built_venv.site / "sitecustomize.py")]["loaded"] is False
    assert result["data"]["env"]["PYTHONPATH"] == str(front)


def test_in_process_pythonstartup_and_env(tmp_path, monkeypatch):
    startup = tmp_path / "startup.py"
    startup.write_text("import os\nos.environ.setdefault('OMP_NUM_THREADS', '4')\n")
    monkeypatch.delenv(python.TARGET_ENV_VAR, raising=False)
    monkeypatch.setenv("PYTHONSTARTUP", str(startup))
    result = python.collect(_ctx())
    assert result["status"] == "ok"
    data = result["data"]
    assert data["executable"] == sys.executable and data["described"] == "this process"
    assert data["env"]["PYTHONSTARTUP"] == str(startup)
    hook = data["startup_hooks"][str(startup)]
    assert hook["kind"] == "pythonstartup" and hook["env_mentions"] == ["OMP_NUM_THREADS"]
    # monkeypatch changed os.environ after exec: the at-exec comparison sees exactly that.
    assert data["startup_env_changes"]["PYTHONSTARTUP"]["after_startup"] == str(startup)
    assert python.summarize(data)[0].startswith(f"{sys.implementation.name} ")


def test_env_mentions():
    assert python.env_mentions('import os\nos.environ["NCCL_PROTO"] = "LL"\n') == (["NCCL_PROTO"], True)
    assert python.env_mentions("os.putenv('MY_FLAG', '1')") == (["MY_FLAG"], True)
    assert python.env_mentions("import sys; sys.path.insert(0, '/x')") == ([], False)
    names, touches = python.env_mentions("var = 'SETUPTOOLS_USE_DISTUTILS'; os.environ.get(var, 'local')")
    assert touches and names == ["SETUPTOOLS_USE_DISTUTILS"]
    # A family name alone counts even without an environ call (it may be passed on).
    assert python.env_mentions("FLAGS = {'TORCH_CUDNN_V8_API_ENABLED': '1'}") == (["TORCH_CUDNN_V8_API_ENABLED"], True)


def test_target_that_is_not_python_is_one_line_error(tmp_path, monkeypatch):
    monkeypatch.setenv(python.TARGET_ENV_VAR, str(tmp_path / "no-such-python"))
    ctx = _ctx()
    for collector in (python, packages):
        result = collector.collect(ctx)
        assert result["status"] == "error"
        assert "no-such-python" in result["error"] and "\n" not in result["error"]


def test_secret_in_python_env_is_redacted(monkeypatch):
    monkeypatch.delenv(python.TARGET_ENV_VAR, raising=False)
    monkeypatch.setenv("PYTHON_KEYRING_PASSWORD", "hunter2-very-secret")
    data = python.collect(_ctx())["data"]
    assert data["env"]["PYTHON_KEYRING_PASSWORD"].startswith("redacted:")
    assert "hunter2" not in repr(data)
