"""Planted causes in REAL captures: `envsnap run` on both sides of one real change that really slows a
real CPU benchmark, hidden among 20+ innocent changes (shell variables, a watched file, a dirty and an
untracked file in the checkout); the planted cause must rank first.

The benchmark imports `fastlib`, a small package installed by pip (real RECORD hashes) into a fresh
venv, and calls its `dot` on small matrices in a Python loop. The planted changes:
1. fastlib/core.py edited in place ("debug" rewrite: einsum instead of BLAS matmul, an extra copy);
2. a sitecustomize.py in the venv that sets OPENBLAS_CORETYPE=Prescott at start-up ("same numbers on
   every host"): OpenBLAS then uses its generic SSE3 kernels instead of the AVX2 ones.
Both slow the benchmark several-fold whatever the machine's load (thread counts do not: on this shared
2-core machine one BLAS thread can beat two, so OMP_NUM_THREADS=1 is set on both sides).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import REPO_ROOT, causes_by_key, run_envsnap

pytestmark = pytest.mark.slow

BENCH = """\
import json, time
import numpy as np
import fastlib
a = np.random.default_rng(0).standard_normal((128, 128))
b = a.T.copy()
fastlib.dot(a, b)
n, start = 0, time.perf_counter()
while time.perf_counter() - start < 0.3:
    fastlib.dot(a, b)
    n += 1
print(json.dumps({"dot_per_s": n / (time.perf_counter() - start)}))
"""
FASTLIB = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                      '[project]\nname = "fastlib"\nversion = "1.0"\n[tool.setuptools]\npackages = ["fastlib"]\n',
    "fastlib/__init__.py": "from fastlib.core import dot\n",
    "fastlib/core.py": "import numpy as np\n\n\ndef dot(a, b):\n    return np.matmul(a, b)\n",
}
SLOW_CORE = ("import numpy as np\n\n\ndef dot(a, b):\n    # debug: check inputs, portable contraction\n"
             "    a = np.array(a, dtype=np.float64, copy=True)\n    return np.einsum('ij,jk->ik', a, b)\n")
BLAS_HOOK = ('# Same numbers on every host: pin OpenBLAS to its generic kernels.\n'
             'import os\nos.environ.setdefault("OPENBLAS_CORETYPE", "Prescott")\n')
THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "GOTO_NUM_THREADS")
# Innocent changes: variables that nothing in the benchmark reads.
INNOCENT_ENV = {f"{name}": value for name, value in [
    ("EDITOR", "nvim"), ("PAGER", "less"), ("LESS", "-FRX"), ("HISTSIZE", "10000"), ("HISTCONTROL", "ignoredups"),
    ("TERM_PROGRAM", "tmux"), ("TERM_PROGRAM_VERSION", "3.5"), ("COLORTERM", "truecolor"), ("DEPLOY_ENV", "staging"),
    ("TEAM", "inference"), ("TICKET", "PERF-1234"), ("GIT_PAGER", "cat"), ("MANPAGER", "less -R"),
    ("PS4", "+ "), ("VISUAL", "nvim"), ("BROWSER", "none"), ("DOCKER_BUILDKIT", "1"), ("EXPERIMENT", "b")]}


def _base_env():
    # OpenBLAS's own settings come from the test, not the machine: a host that exports OPENBLAS_CORETYPE
    # (seen: Haswell, set for every process) would make the planted hook's setdefault a no-op.
    env = {k: v for k, v in os.environ.items()
           if k not in THREAD_VARS and k not in INNOCENT_ENV and not k.startswith("OPENBLAS_")}
    env.pop("PYTEST_CURRENT_TEST", None)  # differs between the two captures of one test
    env["OMP_NUM_THREADS"] = "1"  # the same on both sides: BLAS threads add noise on a shared machine
    return env


def _venv(tmp_path: Path) -> Path:
    """A fresh venv (no pip of its own) seeing envsnap and numpy through a .pth path line, with
    fastlib installed into it by the real pip (wheel built by setuptools, RECORD with hashes)."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = Path(subprocess.run([str(venv / "bin" / "python"), "-c",
                                "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    (site / "envsnap-test-deps.pth").write_text(f"{REPO_ROOT}\n{sysconfig.get_paths()['purelib']}\n")
    src = tmp_path / "fastlib-src"
    for rel, text in FASTLIB.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                           "--no-build-isolation", "--disable-pip-version-check", "--target", str(site), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert list(site.glob("fastlib-1.0.dist-info/RECORD"))
    (tmp_path / "bench.py").write_text(BENCH)
    (tmp_path / "watched").mkdir()
    (tmp_path / "watched" / "serve.yaml").write_text("max_batch: 64\n")
    return site


def _side(tmp_path, git_repo, name, env):
    out = tmp_path / f"{name}.json"
    python = str(tmp_path / "venv" / "bin" / "python")
    proc = subprocess.run(
        [python, "-m", "envsnap", "run", "-o", str(out), "--label", name, "--repeat", "5", "--warmup", "1",
         "--watch", str(tmp_path / "watched"), "--", python, str(tmp_path / "bench.py")],
        cwd=git_repo, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def _innocent_changes(tmp_path, git_repo):
    (tmp_path / "watched" / "serve.yaml").write_text("max_batch: 64\n# tuned 2025-11-28\n")
    (git_repo / "a.py").write_text("x = 2\n")  # a dirty file in the checkout envsnap runs from
    (git_repo / "notes.txt").write_text("try the new kernel\n")  # an untracked one
    return dict(_base_env(), **INNOCENT_ENV)


def _analyze(tmp_path, good, bad):
    proc = run_envsnap("diff", good, bad, "--format", "json", timeout=120)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    keys = {d["key"] for d in result["differences"]}
    innocent = {f"env.{n}" for n in INNOCENT_ENV} | {f"files.{tmp_path / 'watched' / 'serve.yaml'}"}
    assert innocent <= keys, innocent - keys
    assert any(k.startswith("git.") and k.endswith(".dirty.a.py") for k in keys)
    assert any(k.startswith("git.") and k.endswith(".untracked.notes.txt") for k in keys)
    assert len(keys) >= 22
    verdict = result["verdict"]
    assert verdict["metric"] == "dot_per_s" and verdict["good"]["n"] == verdict["bad"]["n"] == 5
    assert verdict["change_pct"] < -25, verdict["summary"]  # the planted change really slowed it
    assert verdict["summary"].startswith("REGRESSION dot_per_s")
    return result


def test_edited_package_file_ranks_first(tmp_path, git_repo):
    site = _venv(tmp_path)
    good = _side(tmp_path, git_repo, "good", _base_env())
    env = _innocent_changes(tmp_path, git_repo)
    (site / "fastlib" / "core.py").write_text(SLOW_CORE)
    bad = _side(tmp_path, git_repo, "bad", env)
    result = _analyze(tmp_path, good, bad)
    top = result["causes"][0]
    assert top["key"] == "integrity.fastlib/core.py", [c["key"] for c in result["causes"][:5]]
    assert top["good"] is None and top["bad"].startswith("modified (sha256")
    assert any("pip RECORD sha256" in e for e in top["evidence"])


def test_sitecustomize_that_pins_blas_kernels_ranks_first(tmp_path, git_repo):
    site = _venv(tmp_path)
    good = _side(tmp_path, git_repo, "good", _base_env())
    env = _innocent_changes(tmp_path, git_repo)
    (site / "sitecustomize.py").write_text(BLAS_HOOK)
    bad = _side(tmp_path, git_repo, "bad", env)
    result = _analyze(tmp_path, good, bad)
    keys = [c["key"] for c in result["causes"]]
    top = result["causes"][0]
    assert top["key"] == f"startup.{site / 'sitecustomize.py'}", keys[:5]
    assert any("OPENBLAS_CORETYPE" in e for e in top["evidence"])
    # The variable it sets shows in the capturing process too (it ran the hook): folded into its cause.
    assert causes_by_key(result["causes"])["env.OPENBLAS_CORETYPE"]["folded_into"] == top["key"]
