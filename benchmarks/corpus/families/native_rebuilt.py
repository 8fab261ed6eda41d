"""A native library the benchmark loads, rebuilt at the same path (another build, another build-id)."""
import random

from corpus.scene import Scene, compile_c

MECHANISM = "a native library rebuilt in place (same path, another build-id)"
SOURCE = """
long spin(long n) {
    volatile long s = 0;
    for (int p = 0; p < %d; p++)
        for (long i = 0; i < n; i++) s += i * i;
    return s;
}
"""


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    lib = scene.path("native", rng.choice(["libwork.so", "libspin.so", "libcodec.so"]))
    scene.lib = lib  # type: ignore[attr-defined]
    how = rng.choice(["O0", "passes"])
    scene.how, scene.k = how, int(rng.choice([3, 4]) * strength)  # type: ignore[attr-defined]
    scene.imports.append(f"import ctypes\n_LIB = ctypes.CDLL({lib!r})")
    scene.steps.append("_LIB.spin(60000)")
    scene.planted = f"{lib.rsplit('/', 1)[1]} rebuilt at the same path ({'-O0' if how == 'O0' else 'more passes'})"
    # the library as each process maps it (libraries.<process>.<soname>), or by its path
    scene.truth_keys = [f"libraries.*.{lib.rsplit('/', 1)[1]}", f"*{lib}*"]


def prepare(scene: Scene) -> None:
    compile_c(SOURCE % 1, scene.lib)  # type: ignore[attr-defined]


def between(scene: Scene) -> None:
    if scene.how == "O0":  # type: ignore[attr-defined]
        compile_c(SOURCE % scene.k, scene.lib, ["-O0"])  # type: ignore[attr-defined]
    else:
        compile_c(SOURCE % scene.k, scene.lib)  # type: ignore[attr-defined]
