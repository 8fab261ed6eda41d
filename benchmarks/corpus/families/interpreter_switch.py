"""The interpreter switched: BAD runs the same benchmark and packages in a venv made from an older CPython
(pyenv's 3.9 or 3.10 here) instead of 3.11, whose faster eval loop (PEP 659 specialisation) the work relies on."""
import glob
import random

from corpus.scene import ENVSNAP, SIDEKIT, Scene, run

MECHANISM = "the interpreter switched (another CPython release)"
# innocents written into GOOD's site-packages would not be in BAD's interpreter at all
EXCLUDE = ["startup_hook", "sidekit_edit"]


def older_pythons() -> list:
    return sorted(glob.glob("/root/.pyenv/versions/3.9*/bin/python3") + glob.glob("/root/.pyenv/versions/3.10*/bin/python3"))


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    choices = older_pythons()
    if not choices:
        raise RuntimeError("no older CPython (3.9/3.10) found under /root/.pyenv/versions")
    python = rng.choice(choices) if strength < 2 else choices[0]
    scene.older = python  # type: ignore[attr-defined]
    scene.bad.python = "venv-bad/bin/python"
    version = python.split("/versions/")[1].split("/")[0]
    scene.planted = f"interpreter CPython 3.11 -> {version} (a venv made from {python})"
    # the interpreter itself: its executable, version, prefix (python section), and its binary and libpython as the
    # benchmark maps them; the stdlib's extension modules, the packages' locations and the site directories that
    # follow from it are its side effects, not the change
    scene.truth_keys = ["python.version*", "python.executable*", "python.implementation*", "python.base_prefix*",
                        "python.prefix*", "python.venv*", "python.pyvenv*", "run.program*", "*python_version*",
                        "libraries.*.python3.*", "libraries.*.libpython3.*"]


def prepare(scene: Scene) -> None:
    run([scene.older, "-m", "venv", "--without-pip", scene.path("venv-bad")])  # type: ignore[attr-defined]
    scene.install_wheel("workkit", scene.workkit_version, scene.workkit_files(), venv="venv-bad")
    scene.install_wheel("sidekit", "2.1.0", SIDEKIT, venv="venv-bad")
    run([ENVSNAP, "probe", "install", "--python", scene.path("venv-bad", "bin", "python")])
