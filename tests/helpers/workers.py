"""Shared helpers for the worker-environment tests: real venvs, real processes, clean teardown."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
WORKERS_DATA = HERE.parent / "data" / "workers"
NCCL_DATA = HERE.parent / "data" / "nccl"


def make_venv(where: Path, with_deps: bool = True) -> Dict[str, Path]:
    """A real venv (no pip: fast) of this interpreter's base Python.

    With `with_deps`, a plain path line makes the test venv's packages (torch,
    setproctitle) importable; it does not run that venv's .pth files, so envsnap itself
    is NOT importable there — the host program's venv is not envsnap's, as in production.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   capture_output=True, timeout=120)
    python = where / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               check=True, capture_output=True, text=True, timeout=60).stdout.strip())
    if with_deps:
        (site / "zz-test-deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return {"python": python, "site": site, "root": where}


def clean_env(**extra: str) -> Dict[str, str]:
    """This environment without the variables that would change what a child does."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("ENVSNAP_PROBE_DIR", "SPT_NOENV", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE", "ENVSNAP_DEBUG")}
    env.update(extra)
    return env


def start(argv: List[str], env: Optional[Dict[str, str]] = None, cwd: Optional[str] = None) -> subprocess.Popen:
    """Start a process in its own session, so teardown can end it and everything it started."""
    return subprocess.Popen([str(a) for a in argv], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=cwd, start_new_session=True)


def wait_line(proc: subprocess.Popen, prefix: str, timeout: float = 90.0) -> str:
    """The first stdout line starting with `prefix`; fails with the process's stderr if it never comes."""
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(proc.stdout, selectors.EVENT_READ)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if selector.select(timeout=0.2):
            line = proc.stdout.readline()
            if line.startswith(prefix):
                return line.strip()
            if line == "" and proc.poll() is not None:
                break
    stop(proc, timeout=2)
    raise AssertionError(f"no {prefix!r} line from {proc.args}: stderr={proc.stderr.read()[-3000:]}")


def stop(proc: subprocess.Popen, timeout: float = 30.0) -> int:
    """Close stdin (the polite stop), wait, then end the whole session we started."""
    try:
        if proc.stdin and not proc.stdin.closed:
            proc.stdin.close()
    except OSError:
        pass
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        return proc.wait(10)


def wait_gone(pid: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
        time.sleep(0.01)


def tree_bytes(root: Path) -> Dict[str, bytes]:
    """Every file under root with its bytes (directories as markers): for byte-identical checks."""
    out: Dict[str, bytes] = {}
    for path in sorted(root.rglob("*")):
        rel = str(path.relative_to(root))
        out[rel] = b"<dir>" if path.is_dir() else path.read_bytes()
    return out
