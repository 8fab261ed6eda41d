"""A real venv with real pip installs, built once per test session.

What it holds (all made by real tools, then changed the way people change them):
- `tinypkg` 1.0: a wheel built here by setuptools' PEP 517 backend and installed by
  pip (real RECORD, real direct_url.json with archive_info), with a console script
  `tiny-ep` and a `script-files` script `tiny-script` (shipped as `#!python`).
- `tinyedit` 0.1: `pip install -e` of a source tree (PEP 660 editable).
- then: `tinypkg/core.py` edited, `tinypkg/gone.py` deleted, `tiny-ep`'s shebang
  rewritten (what venv relocation tools do), `tiny-script` left as pip#10744 left
  such scripts, a sitecustomize.py that sets NCCL_PROTO, a .pth with an import line.

Build cost: about 3 s (one wheel build, one pip run), paid once per session even
though two test modules use it.
"""
from __future__ import annotations

import base64
import csv
import hashlib
import io
import json
import subprocess
import sys
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pytest

from helpers import run_envsnap

SITECUSTOMIZE = 'import os\nos.environ["NCCL_PROTO"] = "LL"\n'
PTH_LINE = 'import os; os.environ.setdefault("CUDA_DEVICE_MAX_CONNECTIONS", "1")\n'


@dataclass
class BuiltVenv:
    root: Path
    python: Path
    site: Path
    bin: Path
    wheel: Path
    edit_src: Path
    snapshot: Optional[Dict] = None  # the real CLI's capture of this venv, made once


_BUILT: Dict[str, BuiltVenv] = {}


def _run(argv, **kwargs):
    proc = subprocess.run([str(a) for a in argv], capture_output=True, text=True, timeout=180, **kwargs)
    if proc.returncode != 0:
        raise AssertionError(f"{argv[:4]} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return proc


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))


def build(base: Path) -> BuiltVenv:
    src = base / "tinypkg-src"
    _write(src / "pyproject.toml", """\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "tinypkg"
        version = "1.0"
        [project.scripts]
        tiny-ep = "tinypkg:main"
        [tool.setuptools]
        packages = ["tinypkg"]
        script-files = ["scripts/tiny-script"]
        """)
    _write(src / "tinypkg" / "__init__.py", "def main():\n    print('tiny')\n")
    _write(src / "tinypkg" / "core.py", "TOPK = 8\n\ndef route(x):\n    return x[:TOPK]\n")
    _write(src / "tinypkg" / "gone.py", "GONE = True\n")
    _write(src / "scripts" / "tiny-script", "#!/usr/bin/env python\nprint('script')\n")
    edit = base / "tinyedit-src"
    _write(edit / "pyproject.toml", """\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"
        [project]
        name = "tinyedit"
        version = "0.1"
        """)
    _write(edit / "tinyedit" / "__init__.py", "X = 1\n")

    # The PEP 517 backend called directly: the same wheel `python -m build` makes, in
    # a fraction of the time (no isolated env, everything needed is installed here).
    dist = base / "dist"
    out = _run([sys.executable, "-c", f"import setuptools.build_meta as b; print(b.build_wheel({str(dist)!r}))"],
               cwd=src)
    wheel = dist / out.stdout.strip().splitlines()[-1]

    venv = base / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv])
    # The outer pip installs into the venv's prefix: a real pip install (RECORD,
    # INSTALLER, direct_url.json, generated scripts) without putting pip into the venv,
    # and the editable build finds setuptools here (no index needed).
    _run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--no-build-isolation",
          "--disable-pip-version-check", "--prefix", venv, wheel, "-e", edit], cwd=base)
    python = venv / "bin" / "python"
    site = Path(_run([python, "-c", "import site; print(site.getsitepackages()[0])"]).stdout.strip())
    assert (site / "tinypkg" / "core.py").is_file(), f"pip did not install into {site}"
    built = BuiltVenv(root=venv, python=python, site=site, bin=venv / "bin", wheel=wheel, edit_src=edit)
    _tamper(built)
    return built


def _tamper(v: BuiltVenv) -> None:
    # An in-place edit of an installed module (what a patch script does to topk.py).
    with open(v.site / "tinypkg" / "core.py", "a") as handle:
        handle.write("TOPK = 4  # patched in place\n")
    (v.site / "tinypkg" / "gone.py").unlink()
    # Venv relocation (dh-virtualenv, Docker multi-stage copies, `sed -i 1s...`) rewrites
    # the shebang of pip's generated scripts after install; RECORD keeps the old hash.
    script = v.bin / "tiny-ep"
    body = script.read_bytes().split(b"\n", 1)[1]
    script.write_bytes(b"#!" + str(v.python).encode() + b"\n" + body)
    # pip#10744 (https://github.com/pypa/pip/issues/10744, pip 20.3.4): pip rewrote the
    # wheel script's `#!python` line but copied the wheel's own RECORD hash and size
    # into the installed RECORD. Today's pip re-hashes, so that state is reproduced by
    # writing exactly what the buggy pip wrote: the wheel's RECORD line for the script.
    with zipfile.ZipFile(v.wheel) as wheel:
        wheel_record = wheel.read("tinypkg-1.0.dist-info/RECORD").decode()
    wheel_rows = {row[0]: row for row in csv.reader(io.StringIO(wheel_record)) if row}
    original = wheel_rows["tinypkg-1.0.data/scripts/tiny-script"]
    record_path = v.site / "tinypkg-1.0.dist-info" / "RECORD"
    rows = list(csv.reader(io.StringIO(record_path.read_text())))
    for row in rows:
        if row and row[0] == "../../../bin/tiny-script":
            row[1], row[2] = original[1], original[2]
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    record_path.write_text(buf.getvalue())
    # Startup hooks.
    (v.site / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (v.site / "tiny_hook.pth").write_text(PTH_LINE)


def urlsafe_hex(recorded: str) -> str:
    """RECORD's `sha256=<urlsafe b64>` as hex, to compare with what envsnap reports."""
    value = recorded.split("=", 1)[1]
    return base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)).hex()


def recorded_row(v: BuiltVenv, dist_info: str, rel: str):
    for row in csv.reader(io.StringIO((v.site / dist_info / "RECORD").read_text())):
        if row and row[0] == rel:
            return row
    raise KeyError(rel)


def sha256_hex(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="session")
def built_venv(tmp_path_factory) -> BuiltVenv:
    """The tampered venv plus one real `envsnap capture` of it (ENVSNAP_PYTHON), built once."""
    if "venv" not in _BUILT:
        built = build(tmp_path_factory.mktemp("venv-under-test"))
        out = built.root.parent / "snap.json"
        proc = run_envsnap("capture", "-o", out, "--timeout", "60",
                           env={"ENVSNAP_PYTHON": str(built.python)}, cwd=str(built.root.parent))
        assert proc.returncode == 0, proc.stderr
        built.snapshot = json.loads(out.read_text())
        _BUILT["venv"] = built
    return _BUILT["venv"]
