"""A recorded patch (--patch) whose hunk is applied on GOOD and not on BAD: the fast path it adds is missing."""
import difflib
import random

from corpus.scene import WORKKIT_CORE, Scene

MECHANISM = "a recorded patch's hunk applied on one side only (--patch)"
# Filler between the module's head and its step, so that a patch touching both is two hunks.
FILLER = "".join(f"\n\ndef helper_{i}(x):\n    return x + {i}\n" for i in range(4))


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    site = scene.site_packages[len(scene.root) + 1:]
    k = int(rng.choice([3, 4]) * strength)
    name = rng.choice(["fast-sum.patch", "0001-closed-form.patch", "perf-hotfix.diff"])
    hunks = rng.choice(["one", "two"])  # the fast path alone, or after a docstring hunk applied on both sides
    given = rng.choice(["directory", "file"])  # --patch DIR or --patch FILE
    slow = WORKKIT_CORE.replace("ITEMS = 3000", f"ITEMS = {3000 * k}")
    if hunks == "two":
        slow = slow.replace("ITEMS = ", FILLER.lstrip("\n") + "\n\nITEMS = ", 1)
    fast = slow.replace("    total = 0\n    for i in range(ITEMS):\n        total += i * i\n    return total\n",
                        "    n = ITEMS - 1\n    return n * (n + 1) * (2 * n + 1) // 6  # closed form\n")
    before = slow
    if hunks == "two":  # hunk 1: the docstring, applied on both sides; hunk 2: the fast path
        before = slow.replace('"""The inner loop: a sum of squares over ITEMS integers."""',
                              '"""The inner loop."""')
        slow = before.replace('"""The inner loop."""', '"""The inner loop: a sum of squares over ITEMS integers."""')
        fast = fast.replace('"""The inner loop."""', '"""The inner loop: a sum of squares over ITEMS integers."""')
    patch = "".join(difflib.unified_diff(before.splitlines(True), fast.splitlines(True), "a/workkit/core.py",
                                         "b/workkit/core.py"))
    scene.both("files", {f"patches/{name}": patch})
    scene.both("envsnap_options", ["--patch", scene.path("patches") if given == "directory" else scene.path("patches", name)])
    scene.workkit_core = slow  # type: ignore[attr-defined]  # the installed wheel carries BAD's text (RECORD matches it)
    scene.good.files[f"{site}/workkit/core.py"] = fast
    scene.bad.files[f"{site}/workkit/core.py"] = slow
    last = "1" if hunks == "one" else "2"
    scene.planted = (f"patch {name} (--patch {given}): its closed-form hunk {last} in workkit/core.py applied on good, "
                     f"not on bad (x{k} items)")
    # the hunk whose status differs, and the installed file it edits (the same change under two keys)
    scene.truth_keys = [f"patches.{name}.hunk.{last}", "integrity.workkit/core.py"]


def prepare(scene: Scene) -> None:
    scene.install_wheel("workkit", scene.workkit_version, scene.workkit_files(scene.workkit_core))  # type: ignore
