"""Two real wheels of one version of a package with an optional C extension, built here once per session.

`rowkit` 1.4 hashes byte strings (FNV-1a, 64 bit). Like markupsafe 3.0.4 (`src/markupsafe/__init__.py`
lines 7-10: `try: from ._speedups import _escape_inner` / `except ImportError: from ._native import
_escape_inner`), its `__init__` imports the compiled `_accel` and falls back to the same function in
Python when that import fails. Two builds of the same source and version:

- compiled: setuptools compiles `rowkit/_accel.c` with the system's C compiler into
  `rowkit/_accel.<EXT_SUFFIX>`; the wheel is tagged for this interpreter and platform
  (`cp311-cp311-linux_x86_64`), Root-Is-Purelib false;
- pure: the same source with ROWKIT_PURE=1 leaves the extension out; the wheel is `py3-none-any`,
  Root-Is-Purelib true (the sdist-without-a-compiler or `--no-binary` install of such a package).

Needs a C compiler and Python's headers; tests skip when either is missing. About 3 s, once.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Optional

import pytest

NAME, VERSION = "rowkit", "1.4"

SETUP_PY = textwrap.dedent('''\
    import os
    from setuptools import Extension, setup

    # ROWKIT_PURE=1: the pure-Python build of the same version (no compiler at install time).
    pure = os.environ.get("ROWKIT_PURE") == "1"
    setup(ext_modules=[] if pure else [Extension("rowkit._accel", ["rowkit/_accel.c"])])
    ''')
PYPROJECT = textwrap.dedent(f'''\
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"
    [project]
    name = "{NAME}"
    version = "{VERSION}"
    [tool.setuptools]
    packages = ["rowkit"]
    ''')
INIT = textwrap.dedent('''\
    """Fast hashing of byte strings: the compiled _accel when it imports, else the same code in Python."""
    try:
        from rowkit._accel import checksum
        ACCELERATED = True
    except ImportError:
        from rowkit._pure import checksum
        ACCELERATED = False
    ''')
PURE = textwrap.dedent('''\
    def checksum(data):
        """FNV-1a, 64 bit."""
        h = 0xCBF29CE484222325
        for byte in data:
            h = ((h ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
        return h
    ''')
ACCEL_C = textwrap.dedent('''\
    #define PY_SSIZE_T_CLEAN
    #include <Python.h>

    /* FNV-1a, 64 bit: what rowkit/_pure.py computes, in C. */
    static PyObject *checksum(PyObject *self, PyObject *args) {
        Py_buffer buf;
        if (!PyArg_ParseTuple(args, "y*", &buf))
            return NULL;
        unsigned long long h = 0xCBF29CE484222325ULL;
        const unsigned char *p = (const unsigned char *)buf.buf;
        for (Py_ssize_t i = 0; i < buf.len; i++) {
            h ^= p[i];
            h *= 0x100000001B3ULL;
        }
        PyBuffer_Release(&buf);
        return PyLong_FromUnsignedLongLong(h);
    }

    static PyMethodDef methods[] = {
        {"checksum", checksum, METH_VARARGS, "FNV-1a, 64 bit"},
        {NULL, NULL, 0, NULL},
    };
    static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_accel", NULL, -1, methods};

    PyMODINIT_FUNC PyInit__accel(void) { return PyModule_Create(&module); }
    ''')


@dataclass
class ExtWheels:
    compiled: Path
    pure: Path
    ext_rel: str  # the compiled module's RECORD path: rowkit/_accel.<EXT_SUFFIX>


_BUILT: Dict[str, ExtWheels] = {}


def can_compile() -> Optional[str]:
    """None when a C extension can be built here, else why not."""
    if shutil.which(sysconfig.get_config_var("CC").split()[0] if sysconfig.get_config_var("CC") else "cc") is None:
        return "no C compiler"
    if not (Path(sysconfig.get_paths()["include"]) / "Python.h").is_file():
        return "no Python.h (Python's development headers)"
    return None


def _source(root: Path) -> Path:
    for rel, text in {"setup.py": SETUP_PY, "pyproject.toml": PYPROJECT, "rowkit/__init__.py": INIT,
                      "rowkit/_pure.py": PURE, "rowkit/_accel.c": ACCEL_C}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def _wheel(src: Path, out: Path, pure: bool) -> Path:
    # The PEP 517 backend called directly, as tests/helpers/venv.py does (no isolated env, no index).
    env = dict(os.environ, ROWKIT_PURE="1" if pure else "0")
    proc = subprocess.run([sys.executable, "-c", f"import setuptools.build_meta as b; print(b.build_wheel({str(out)!r}))"],
                          cwd=src, env=env, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        raise AssertionError(f"wheel build failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return out / proc.stdout.strip().splitlines()[-1]


def build(base: Path) -> ExtWheels:
    # Two source trees: setuptools' build/ directory of one must not leak into the other's wheel.
    compiled = _wheel(_source(base / "compiled-src"), base / "dist-compiled", pure=False)
    pure = _wheel(_source(base / "pure-src"), base / "dist-pure", pure=True)
    return ExtWheels(compiled, pure, f"rowkit/_accel{sysconfig.get_config_var('EXT_SUFFIX')}")


def install(wheel: Path, python: Path, reinstall: bool = False) -> None:
    """The real pip (this interpreter's, run for the venv's `python`: `pip --python`, so that a
    reinstall first uninstalls what that venv has) installs `wheel` into the venv."""
    args = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", "--no-index",
            "--disable-pip-version-check"] + (["--force-reinstall"] if reinstall else []) + [str(wheel)]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]


@pytest.fixture(scope="session")
def ext_wheels(tmp_path_factory) -> ExtWheels:
    """rowkit 1.4 as a compiled and as a pure wheel (see the module doc), built once."""
    why = can_compile()
    if why:
        pytest.skip(f"cannot build a C extension here: {why}")
    if "wheels" not in _BUILT:
        _BUILT["wheels"] = build(tmp_path_factory.mktemp("rowkit-wheels"))
    return _BUILT["wheels"]
