"""A start-up hook (a .pth file or sitecustomize.py in site-packages) that changes the work of every process."""
import random

from corpus.scene import Scene

MECHANISM = "a start-up hook (.pth / sitecustomize) that changes the work"

HOOKS = {
    "trace": "import sys; sys.settrace(lambda *a: None)  # debugging aid left on\n",
    "thread": ("import threading, sys\n"
               "def _poll():\n    while True:\n        sum(range(2000))\n"
               "sys.setswitchinterval(0.0005)\n"
               "threading.Thread(target=_poll, daemon=True, name='metrics-poller').start()\n"),
    "profile": "import sys\ndef _count(frame, event, arg):\n    return None\nsys.setprofile(_count)\n",
}


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    kind = rng.choice(sorted(HOOKS))
    form = rng.choice(["pth", "sitecustomize"])
    site = scene.site_packages[len(scene.root) + 1:]
    if form == "pth":
        name = rng.choice(["zz_debug_helpers.pth", "corp_init.pth", "telemetry_boot.pth"])
        text = "import corp_boot_hook\n"
        scene.bad.files[f"{site}/corp_boot_hook.py"] = HOOKS[kind]
        scene.good.files[f"{site}/corp_boot_hook.py"] = None
        rel = f"{site}/{name}"
    else:
        text, rel = HOOKS[kind], f"{site}/sitecustomize.py"
    if kind == "profile":
        scene.steps.append("for _ in range(200):\n    core.ITEMS.bit_length()")  # calls the profiler sees
    scene.bad.files[rel] = text
    scene.good.files[rel] = None
    scene.planted = f"start-up hook {rel.rsplit('/', 1)[1]} ({kind}) added on bad"
    scene.truth_keys = [f"startup.{scene.path(rel)}", f"startup.{scene.path(site, 'corp_boot_hook.py')}"]
