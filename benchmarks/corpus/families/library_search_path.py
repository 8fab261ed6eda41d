"""A library found in another directory of an unchanged search path (LD_LIBRARY_PATH=A:B on both sides): BAD
gains a slower build of the same soname in A, which shadows B's."""
import random

from corpus.scene import Scene, compile_c

MECHANISM = "a library taken from another directory of an unchanged search path"
EXCLUDE = ["LD_LIBRARY_PATH"]
SOURCE = """
long spin(long n) {
    volatile long s = 0;
    for (int p = 0; p < %d; p++)
        for (long i = 0; i < n; i++) s += i * i;
    return s;
}
"""


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    soname = rng.choice(["libkern.so", "libvec.so", "libfastpath.so"])
    first, second = rng.choice([("opt/lib", "usr/lib"), ("local/lib", "vendor/lib"), ("site/lib", "base/lib")])
    scene.soname, scene.first, scene.second = soname, first, second  # type: ignore[attr-defined]
    scene.k = int(rng.choice([3, 4]) * strength)  # type: ignore[attr-defined]
    scene.both("env", {"LD_LIBRARY_PATH": f"{scene.path(first)}:{scene.path(second)}"})
    scene.imports.append(f"import ctypes\n_LIB = ctypes.CDLL({soname!r})")
    scene.steps.append("_LIB.spin(60000)")
    scene.planted = f"{soname} now found in {first}/ (slower build) before {second}/"
    scene.truth_keys = [f"libraries.*.{soname}", f"*{scene.path(first, soname)}*"]


def prepare(scene: Scene) -> None:
    import os
    os.makedirs(scene.path(scene.first), exist_ok=True)  # type: ignore[attr-defined]
    compile_c(SOURCE % 1, scene.path(scene.second, scene.soname))  # type: ignore[attr-defined]


def between(scene: Scene) -> None:
    compile_c(SOURCE % scene.k, scene.path(scene.first, scene.soname))  # type: ignore[attr-defined]
