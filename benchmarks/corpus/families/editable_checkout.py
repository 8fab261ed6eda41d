"""A file of a git checkout installed in editable mode (PEP 660 .pth + direct_url.json, as pip writes it), edited
and not committed."""
import json
import random

from corpus.scene import Scene, run, write

MECHANISM = "an uncommitted edit in the checkout of an editable install the benchmark imports"
KERNEL = "def run(n):\n    total = 0\n    for i in range(n):\n        total += i % 7\n    return total\n"


def plant(scene: Scene, rng: random.Random, strength: float) -> None:
    pkg = rng.choice(["editkit", "labkit", "devops_kernels"])
    file = rng.choice(["kernel.py", "ops.py"])
    k = int(rng.choice([3, 4]) * strength)
    scene.pkg, scene.file = pkg, file  # type: ignore[attr-defined]
    scene.imports.append(f"from {pkg} import {file[:-3]} as _edit")
    scene.steps.append(f"_edit.run({rng.choice([3000, 5000])})")
    rel = f"src/{pkg}/{file}"
    edited = KERNEL.replace("    for i in range(n):", f"    for i in range(n * {k}):  # try: finer grid")
    scene.good.files[rel] = KERNEL
    scene.bad.files[rel] = edited
    scene.planted = f"uncommitted edit of {pkg}/{file} in the editable checkout src/ (x{k} work)"
    scene.truth_keys = [f"git.{scene.path('src')}.dirty.{pkg}/{file}", f"*{scene.path(rel)}*"]


def prepare(scene: Scene) -> None:
    src, pkg, file = scene.path("src"), scene.pkg, scene.file  # type: ignore[attr-defined]
    write(f"{src}/{pkg}/__init__.py", "")
    write(f"{src}/{pkg}/{file}", KERNEL)
    write(f"{src}/pyproject.toml", f'[project]\nname = "{pkg}"\nversion = "0.3.0"\n')
    git = ["git", "-c", "user.name=corpus", "-c", "user.email=corpus@example.invalid", "-C", src]
    run(["git", "init", "-q", src])
    run(git + ["add", "-A"])
    run(git + ["commit", "-q", "-m", "kernel"])
    dist = f"{scene.site_packages}/{pkg}-0.3.0.dist-info"
    write(f"{scene.site_packages}/__editable__.{pkg}-0.3.0.pth", src + "\n")
    write(f"{dist}/METADATA", f"Metadata-Version: 2.1\nName: {pkg}\nVersion: 0.3.0\n")
    write(f"{dist}/INSTALLER", "pip\n")
    write(f"{dist}/direct_url.json", json.dumps({"url": f"file://{src}", "dir_info": {"editable": True}}))
    write(f"{dist}/RECORD", f"__editable__.{pkg}-0.3.0.pth,,\n{pkg}-0.3.0.dist-info/METADATA,,\n"
                            f"{pkg}-0.3.0.dist-info/INSTALLER,,\n{pkg}-0.3.0.dist-info/direct_url.json,,\n"
                            f"{pkg}-0.3.0.dist-info/RECORD,,\n")
