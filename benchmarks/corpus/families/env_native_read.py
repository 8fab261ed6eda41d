"""A variable only native code reads (getenv in a C library the benchmark loads with ctypes): Python never does."""
import random

from corpus.scene import Scene, compile_c

MECHANISM = "an environment variable read only by native code (getenv in a loaded C library)"
NAMES = ["KERN_SPIN_PASSES", "LIBWORK_UNROLL_CHECK", "FASTK_VERIFY", "ZCODEC_EFFORT", "HPK_REPLAY_COUNT"]

SOURCE = """
#include <stdlib.h>
static int passes = -1;
long spin(long n) {
    if (passes < 0) {
        const char *v = getenv("%s");
        passes = v ? atoi(v) : 1;
        if (passes < 1) passes = 1;
    }
    volatile long s = 0;
    for (int p = 0; p < passes; p++)
        for (long i = 0; i < n; i++) s += i * i;
    return s;
}
"""


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    name = rng.choice(NAMES)
    scene.name_read = name  # type: ignore[attr-defined]
    lib = scene.path("native", rng.choice(["libwork.so", "libkern.so", "libfastk.so"]))
    scene.lib = lib  # type: ignore[attr-defined]
    scene.imports.append(f"import ctypes\n_LIB = ctypes.CDLL({lib!r})")
    scene.steps.append(f"_LIB.spin({rng.choice([20000, 40000])})")
    good = rng.choice([None, "1"])
    bad = str(int(rng.choice([3, 4]) * strength))
    if good is not None:
        scene.good.env[name] = good
    scene.bad.env[name] = bad
    scene.planted = f"{name}: {good or 'unset'} -> {bad} (read with getenv by {lib.rsplit('/', 1)[1]}, loaded by workkit)"
    scene.truth_keys = [f"env.{name}", f"workers.*.{name}", f"*env.{name}"]


def prepare(scene: Scene) -> None:
    compile_c(SOURCE % scene.name_read, scene.lib)  # type: ignore[attr-defined]
