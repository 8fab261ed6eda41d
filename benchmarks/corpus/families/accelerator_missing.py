"""An optional compiled accelerator of an installed package no longer imports (removed, overwritten by a failed
download's error page, or renamed for another ABI), so the package silently falls back to its pure-Python path."""
import os
import random
import sysconfig

from corpus.scene import Scene, compile_c

MECHANISM = "an optional native extension that no longer imports: the code falls back to a slower path"
SOURCE = r"""
#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject *mix(PyObject *self, PyObject *args) {
    long n; if (!PyArg_ParseTuple(args, "l", &n)) return NULL;
    long long total = 0; for (long i = 0; i < n; i++) total += (long long)i * i;
    return PyLong_FromLongLong(total);
}
static PyMethodDef methods[] = {{"mix", mix, METH_VARARGS, "sum of squares"}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_speedups", NULL, -1, methods};
PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
"""
FALLBACK = "def mix(n):\n    total = 0\n    for i in range(n):\n        total += i * i\n    return total\n"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    scene.ext = f"workkit/_speedups{suffix}"  # type: ignore[attr-defined]
    scene.how = rng.choice(["removed", "error_page", "other_abi"])  # type: ignore[attr-defined]
    n = int(rng.choice([3000, 6000]) * strength)
    scene.imports.append("try:\n    from workkit._speedups import mix as _mix\nexcept ImportError:  # optional accelerator\n"
                         "    from workkit._fallback import mix as _mix")
    scene.steps.append(f"_mix({n})")
    site = scene.site_packages[len(scene.root) + 1:]
    rel = f"{site}/{scene.ext}"  # type: ignore[attr-defined]
    scene.rel = rel  # type: ignore[attr-defined]
    scene.planted = f"workkit's compiled accelerator {scene.ext} {scene.how} on bad: the pure-Python fallback runs"  # type: ignore
    # the extension file itself (installed file missing or changed) and the extension as the process (no longer) maps it
    scene.truth_keys = [f"integrity.{scene.ext}", "libraries.*._speedups*", "*_speedups*"]  # type: ignore[attr-defined]


def prepare(scene: Scene) -> None:
    built = scene.path("native", "_speedups.so")
    include = sysconfig.get_paths()["include"]
    os.makedirs(scene.path("native"), exist_ok=True)
    compile_c(SOURCE, built, ["-O2", f"-I{include}"])
    with open(built, "rb") as handle:
        binary = handle.read()
    scene.binary = binary  # type: ignore[attr-defined]
    files = scene.workkit_files()
    files["workkit/_fallback.py"] = FALLBACK
    files[scene.ext] = binary  # type: ignore[attr-defined]
    scene.install_wheel("workkit", scene.workkit_version, files)


def between(scene: Scene) -> None:
    path = scene.path(scene.rel)  # type: ignore[attr-defined]
    how = scene.how  # type: ignore[attr-defined]
    if how == "removed":
        os.unlink(path)
    elif how == "error_page":  # not an ELF file: dlopen fails and the import raises ImportError (a truncated ELF
        # would crash the process with SIGBUS instead)
        with open(path, "wb") as handle:
            handle.write(b"<html><body><h1>502 Bad Gateway</h1></body></html>\n")
    else:  # the same build under another ABI's name: the import system no longer finds it
        os.replace(path, path.replace("cpython-311", "cpython-312"))
