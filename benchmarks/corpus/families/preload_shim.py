"""LD_PRELOAD of a shim library that interposes clock_gettime (which time.perf_counter calls) with extra work."""
import random

from corpus.scene import Scene, compile_c

MECHANISM = "a preloaded shim library (LD_PRELOAD) interposing a libc call the work makes"
SOURCE = """
#define _GNU_SOURCE
#include <dlfcn.h>
#include <time.h>
static int (*real)(clockid_t, struct timespec *) = 0;
int clock_gettime(clockid_t id, struct timespec *ts) {
    volatile long s = 0;
    for (long i = 0; i < %d; i++) s += i;
    if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "clock_gettime");
    return real(id, ts);
}
"""


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    lib = scene.path("native", rng.choice(["libtrace_shim.so", "libhook.so", "libprofile_clock.so"]))
    scene.lib, scene.spin = lib, int(rng.choice([20000, 40000]) * strength)  # type: ignore[attr-defined]
    scene.steps.append("import time\nfor _ in range(20):\n    time.perf_counter()")
    scene.bad.env["LD_PRELOAD"] = lib
    scene.planted = f"LD_PRELOAD={lib.rsplit('/', 1)[1]} (clock_gettime + {scene.spin} loop) on bad"  # type: ignore
    scene.truth_keys = ["env.LD_PRELOAD", "workers.*.LD_PRELOAD", "*env.LD_PRELOAD",
                        f"libraries.*.{lib.rsplit('/', 1)[1]}", f"*{lib}*"]


def prepare(scene: Scene) -> None:
    compile_c(SOURCE % scene.spin, scene.lib)  # type: ignore[attr-defined]
