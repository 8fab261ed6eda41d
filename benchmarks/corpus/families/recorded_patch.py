"""A recorded patch (--patch) whose hunk is applied on GOOD and not on BAD: the fast path it adds is missing."""
import difflib
import random

from corpus.scene import WORKKIT_CORE, Scene

MECHANISM = "a recorded patch's hunk applied on one side only (--patch)"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    site = scene.site_packages[len(scene.root) + 1:]
    k = int(rng.choice([3, 4]) * strength)
    name = rng.choice(["fast-sum.patch", "0001-closed-form.patch", "perf-hotfix.diff"])
    slow = WORKKIT_CORE.replace("ITEMS = 3000", f"ITEMS = {3000 * k}")
    fast = slow.replace("    total = 0\n    for i in range(ITEMS):\n        total += i * i\n    return total\n",
                        "    n = ITEMS - 1\n    return n * (n + 1) * (2 * n + 1) // 6  # closed form\n")
    patch = "".join(difflib.unified_diff(slow.splitlines(True), fast.splitlines(True), "a/workkit/core.py",
                                         "b/workkit/core.py"))
    scene.both("files", {f"patches/{name}": patch})
    scene.both("envsnap_options", ["--patch", scene.path("patches")])
    scene.workkit_core = slow  # type: ignore[attr-defined]
    scene.good.files[f"{site}/workkit/core.py"] = fast
    scene.bad.files[f"{site}/workkit/core.py"] = slow
    # ITEMS x k makes the unpatched step slow: the installed wheel carries the slow text (RECORD matches BAD)
    scene.planted = f"patch {name} (closed-form sum in workkit/core.py) applied on good, not on bad"
    scene.truth_keys = [f"patches*{name}*", "integrity.workkit/core.py"]


def prepare(scene: Scene) -> None:
    scene.install_wheel("workkit", scene.workkit_version, scene.workkit_files(scene.workkit_core))  # type: ignore
