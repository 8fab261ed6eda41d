"""Which code a probed process imported, and from where: each top-level module classified.

The probe lists {top-level module: file} (envsnap/probe/runtime.py) with the process's standard-library
directory and site directories. Each module is then:

  stdlib     built in, frozen, or a file of the standard library's directory;
  installed  a file under one of the process's site directories (site-packages, dist-packages);
  elsewhere  any other file: the working directory, a checkout, a directory on PYTHONPATH...

and a module loaded from somewhere other than where that name is installed is **shadowed**: a name the
standard library has (json, typing...) loaded from elsewhere, or a name installed in a site directory
(numpy...) loaded from elsewhere -- the program ran a file in the working directory or on a path instead
of the library it meant. Both paths are kept. Which names the standard library or a site directory
has is read from the disk, by name (`<dir>/<name>.py`, `<dir>/<name>/__init__.py`, an extension module),
with a few stats per module loaded from elsewhere, of which a process has few.
"""
from __future__ import annotations

import glob
import os
from typing import Any, Dict, List, Optional

# importlib.machinery.EXTENSION_SUFFIXES on Linux CPython: ".cpython-311-x86_64-linux-gnu.so", ".abi3.so", ".so".
_EXTENSION_GLOB = ".*so"
SPECIAL = ("built-in", "frozen", "object", "unknown")


def _installed_as(directory: str, name: str) -> Optional[str]:
    """The file that `import name` finds in `directory`, if any (package, module or extension)."""
    for candidate in (os.path.join(directory, name, "__init__.py"), os.path.join(directory, f"{name}.py")):
        if os.path.isfile(candidate):
            return candidate
    if os.path.isdir(os.path.join(directory, name)):
        return os.path.join(directory, name)  # a namespace package, or a package of extension modules
    found = sorted(glob.glob(os.path.join(glob.escape(directory), glob.escape(name) + _EXTENSION_GLOB)))
    return found[0] if found else None


def _under(path: str, directory: str) -> bool:
    directory = directory.rstrip(os.sep)
    return bool(directory) and (path == directory or path.startswith(directory + os.sep))


def classify(record: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """{"count", "stdlib": [names], "installed": [names], "elsewhere": {name: file}, "shadowed": {name:
    {"file", "instead_of", "kind"}}, "main": script} of a record's modules, or None without a list."""
    modules = record.get("modules")
    if not isinstance(modules, dict) or not modules:
        return None
    cwd = record.get("cwd") if isinstance(record.get("cwd"), str) else None
    stdlib_dir = record.get("stdlib_dir") if isinstance(record.get("stdlib_dir"), str) else ""
    site_dirs = [d for d in (record.get("site_dirs") or []) if isinstance(d, str)]
    stdlib_dirs = [stdlib_dir, os.path.join(stdlib_dir, "lib-dynload")] if stdlib_dir else []
    out: Dict[str, Any] = {"count": len(modules), "stdlib": [], "installed": [], "elsewhere": {}, "shadowed": {}}
    for name in sorted(modules):
        path = modules[name]
        if not isinstance(path, str):
            continue
        if name == "__main__":
            if path not in SPECIAL:
                out["main"] = _absolute(path, cwd)
            continue
        if path in ("built-in", "frozen"):
            out["stdlib"].append(name)
            continue
        if path in SPECIAL:
            continue
        location = path[len("namespace:"):] if path.startswith("namespace:") else path
        location = _absolute(location, cwd)
        if any(_under(location, d) for d in site_dirs):
            out["installed"].append(name)
            continue
        if stdlib_dir and _under(location, stdlib_dir):
            out["stdlib"].append(name)
            continue
        out["elsewhere"][name] = location
        shadow = _shadowed(name, location, stdlib_dirs, site_dirs)
        if shadow is not None:
            out["shadowed"][name] = shadow
    if "main" not in out:
        main = _main_from_argv(record.get("argv"), cwd)
        if main:
            out["main"] = main
    if not out["shadowed"]:
        del out["shadowed"]
    return out


def _main_from_argv(argv: Any, cwd: Optional[str]) -> Optional[str]:
    """The main script of `python [options] SCRIPT ...` (CPython deletes __main__.__file__ once the script
    has run, so an exit record's module list cannot say it), or "-m MODULE"."""
    if not isinstance(argv, list) or len(argv) < 2 or not all(isinstance(a, str) for a in argv):
        return None
    args = argv[1:]
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-m" and i + 1 < len(args):
            return f"-m {args[i + 1]}"
        if arg in ("-c", "-"):
            return None
        if arg in ("-W", "-X", "--check-hash-based-pycs"):
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        return _absolute(arg, cwd)
    return None


def _shadowed(name: str, location: str, stdlib_dirs: List[str], site_dirs: List[str]) -> Optional[Dict[str, str]]:
    for kind, directories in (("stdlib", stdlib_dirs), ("installed", site_dirs)):
        for directory in directories:
            installed = _installed_as(directory, name)
            if installed is not None and installed != location:
                return {"file": location, "instead_of": installed, "kind": kind}
    return None


def _absolute(path: str, cwd: Optional[str]) -> str:
    return os.path.normpath(os.path.join(cwd, path)) if cwd and not os.path.isabs(path) else os.path.normpath(path)
