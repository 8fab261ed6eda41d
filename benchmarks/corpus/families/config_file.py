"""A settings file the benchmark's code reads (watched with --watch) changed."""
import random

from corpus.scene import Scene

MECHANISM = "a settings file read by the benchmark's code"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    fmt = rng.choice(["json", "ini"])
    key = rng.choice(["passes", "refine", "replicas"])
    good, bad = 1, int(rng.choice([2, 3]) * strength)
    rel = f"conf/workkit.{fmt}"
    path = scene.path(rel)
    if fmt == "json":
        scene.imports.append(f"import json\n_CONF = json.load(open({path!r}))")
        scene.configure.append(f'SETTINGS["passes"] = int(_CONF["{key}"])')
        text = '{{"{key}": {v}, "log_level": "info"}}\n'
    else:
        scene.imports.append(f"import configparser\n_CONF = configparser.ConfigParser()\n_CONF.read({path!r})")
        scene.configure.append(f'SETTINGS["passes"] = _CONF.getint("work", "{key}")')
        text = "[work]\n{key} = {v}\nlog_level = info\n"
    scene.steps.append('for _ in range(SETTINGS["passes"] - 1):\n    core.step()')
    scene.good.files[rel] = text.format(key=key, v=good)
    scene.bad.files[rel] = text.format(key=key, v=bad)
    scene.planted = f"{rel}: {key} {good} -> {bad} (read by workkit at start)"
    scene.truth_keys = [f"files.{path}"]
