"""Real patch files for the `--patch` tests: a three-hunk edit of one file, written by the real `git diff`.

`TOPK` is a small module in the shape of SGLang's topk.py (three functions far enough apart that a
unified diff gives each edit a hunk of its own); `EDITS` are the three edits a patch script makes to it.
`make_patch` writes the edited file into a real checkout, takes `git diff` of it as the patch file, and
puts the file back; `with_edits` gives the file's text with any subset of the edits made, so a test
can leave a patch applied, partly applied (one hunk reverted), not applied, or conflicting (`CONFLICT`
is another edit of the second hunk's lines).
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from helpers.git import git

_FILLER = "".join(f"# filler line {i}\n" for i in range(12))
TOPK = (
    "import math\n\n\n"
    "def select_experts(scores, k):\n"
    "    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])\n"
    "    return ranked[:k]\n\n\n"
    + _FILLER +
    "def renormalize(weights):\n"
    "    total = sum(weights)\n"
    "    return [w / total for w in weights]\n\n\n"
    + _FILLER.replace("filler", "spacer") +
    "def step(n):\n"
    "    return sum(i * i for i in range(n))\n"
)
# (GOOD text, patched text) of each hunk's line: hunk 1, 2, 3 of the patch in this order.
EDITS = (
    ("    return ranked[:k]\n", "    return ranked[:k]  # eagle3: keep the top-k order\n"),
    ("    total = sum(weights)\n", "    total = math.fsum(weights)  # eagle3: exact sum\n"),
    ("    return sum(i * i for i in range(n))\n", "    return sum(i * i for i in range(n * 10))  # eagle3: full sweep\n"),
)
CONFLICT = ("    total = sum(weights)\n", "    total = sum(sorted(weights))  # someone else's edit\n")


def with_edits(applied: Iterable[int], text: str = TOPK) -> str:
    """TOPK with the edits numbered in `applied` (1-based) made."""
    for number in applied:
        old, new = EDITS[number - 1]
        assert old in text, f"edit {number} does not fit"
        text = text.replace(old, new, 1)
    return text


def make_patch(repo: Path, rel: str, patch_path: Path) -> Path:
    """Write the patch of all three edits of repo/rel (as git diff writes it) to patch_path; the file is
    left as committed."""
    target = repo / rel
    original = target.read_text()
    target.write_text(with_edits((1, 2, 3), original))
    patch_path.write_text(git(repo, "diff", "--no-color", "--", rel))
    target.write_text(original)
    return patch_path


# A benchmark of `step` from the package's topk module: steps per CPU second (CPU time: the figure does not
# depend on what else runs on the machine). Hunk 3 of the patch makes each step ten times the work.
BENCH = '''\
import json, time
from {package} import topk
REPS = 30
start = time.process_time()
for _ in range(REPS):
    topk.step(20000)
print(json.dumps({{"steps_per_cpu_second": round(REPS / (time.process_time() - start), 3)}}))
'''


def install_package(base: Path, name: str, modules: dict) -> "tuple[Path, Path]":
    """A fresh venv (no pip of its own; envsnap and this interpreter's packages through a .pth line) with
    package `name` installed by the real pip from a wheel setuptools builds (RECORD with hashes).
    Returns (the venv's python, its site-packages)."""
    import subprocess
    import sys
    import sysconfig

    from helpers import REPO_ROOT

    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    (site / "envsnap-test-deps.pth").write_text(f"{REPO_ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    src = base / f"{name}-src"
    files = {"pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                               f'[project]\nname = "{name}"\nversion = "1.0"\n[tool.setuptools]\npackages = ["{name}"]\n',
             f"{name}/__init__.py": ""}
    files.update({f"{name}/{rel}": text for rel, text in modules.items()})
    for rel, text in files.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--no-build-isolation", "--disable-pip-version-check", "--target", str(site), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(site.glob(f"{name}-1.0.dist-info/RECORD"))
    return python, site
