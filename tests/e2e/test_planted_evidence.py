"""Planted causes ranked by evidence: real benchmarks run by the real `envsnap run` in a real venv
(with the real in-process probe, unless a test says otherwise), GOOD and BAD apart by ONE planted change
that really slows the benchmark and 29 innocent ones (tests/helpers/planted.py: NCCL_*, CUDA_*, TF32 and the
CUDA allocator on a machine with no GPU, SGLang settings where SGLang is not installed, thread counts of thread
pools nothing starts, everyday shell variables). The planted cause must come first, alone, with a margin over
the first innocent difference; text, JSON and HTML must say the same verdict, mechanism and first cause.

Families: a resource limit on the process (taskset: half the CPUs), an interpreter-level switch
(PYTHONMALLOC=debug), start-up code (a sitecustomize that installs a profile hook), an uncommitted edit in an
editable checkout (real `pip install -e` of a real git repository), and an unknown variable read by the
benchmark's own code -- with the probe, and without it (then in the top group, with the bisect command).

The benchmarks do a fixed amount of work and time it in CPU time where they can (other processes loading
the shared machine do not change the CPU time of the work); the taskset one cannot (fewer CPUs shows in wall
time only), so it asserts the ranking and the mechanism (a fact: the runs' CPU set), not the size of the
slowdown. Figures (rank, margin) are printed: `pytest -s` shows them.
"""
from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from helpers import causes_by_key, factors_of, has_factor
from helpers.planted import (
    assert_first_with_margin,
    assert_outputs_agree,
    envsnap_run,
    figures,
    make_venv,
    outputs,
    page_text,
    side_env,
)

pytestmark = pytest.mark.slow

# Fixed Python work (calls and allocations), timed in CPU time; argv[1] batches of 2000 rows. VALIDATE_ROWS=1
# re-checks every batch three times: the benchmark's own knob, in no table.
BENCH = textwrap.dedent('''\
    import json, os, sys, time
    def row(i):
        return (i, i * 7 % 13, str(i))
    def checksum(rows):
        return sum(hash(r) & 0xFFFF for r in rows)
    validate = os.environ.get("VALIDATE_ROWS", "0") == "1"
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    start = time.process_time()
    done = 0
    for _ in range(batches):
        rows = [row(i) for i in range(2000)]
        total = checksum(rows)
        if validate:
            for again in ([tuple(r) for r in rows], [tuple(r) for r in reversed(rows)], sorted(rows)):
                assert checksum(again) == total and all(len(r) == 3 and isinstance(r[2], str) for r in again)
        done += len(rows)
    print(json.dumps({"rows_per_s": done / (time.process_time() - start)}))
    ''')

# Two processes share a fixed amount of CPU work; the batch rate is what a user sees (wall time).
PARALLEL_BENCH = textwrap.dedent('''\
    import json, multiprocessing as mp, time
    def spin(seconds):
        end = time.process_time() + seconds
        while time.process_time() < end:
            pass
    if __name__ == "__main__":
        start = time.perf_counter()
        workers = [mp.get_context("fork").Process(target=spin, args=(0.3,)) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        print(json.dumps({"batches_per_s": 1.0 / (time.perf_counter() - start)}))
    ''')

# "Call tracing for the on-call dashboard": a profile hook on every Python call of every process.
PROFILE_HOOK = textwrap.dedent('''\
    # Call tracing for the on-call dashboard (ops ticket 4411).
    import sys, threading
    def _trace(frame, event, arg):
        return None
    sys.setprofile(_trace)
    threading.setprofile(_trace)
    ''')


def _pair(tmp_path, bench, bad_env=None, probe=True, good_prefix=(), bad_prefix=(), before_bad=None, cwd=None,
          args=()):
    venv = make_venv(tmp_path / "venv", probe=probe)
    script = tmp_path / "bench.py"
    script.write_text(bench)
    command = [venv["python"], script, *args]
    where = cwd or tmp_path
    # probe=False: nothing seen inside the processes (no probe installed, `run --no-observe`).
    good = envsnap_run(venv, tmp_path / "good.json", command, side_env(False),
                       tmp_path / "probe-good" if probe else None, cwd=where, prefix=good_prefix, observe=probe)
    if before_bad:
        before_bad(venv)
    bad = envsnap_run(venv, tmp_path / "bad.json", command, side_env(True, **(bad_env or {})),
                      tmp_path / "probe-bad" if probe else None, cwd=where, prefix=bad_prefix, observe=probe)
    return outputs(good, bad, tmp_path)


def _slowed(result, at_least_pct):
    verdict = result["verdict"]
    assert verdict["change_pct"] <= -at_least_pct, verdict["summary"]  # the planted change really slowed it
    assert verdict["outcome"] in ("worse", "possibly_worse"), verdict["summary"]


def test_half_the_cpus_taken_away_by_taskset_ranks_first(tmp_path):
    if subprocess.run(["taskset", "-c", "0", "true"], capture_output=True).returncode != 0:
        pytest.skip("taskset is not available")
    import os

    if len(os.sched_getaffinity(0)) < 2 or not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    result, text, page = _pair(tmp_path, PARALLEL_BENCH, good_prefix=["taskset", "-c", "0,1"],
                               bad_prefix=["taskset", "-c", "0"])
    mechanism = result["verdict"]["mechanism"]
    assert mechanism["kind"] == "fewer_cpus" and mechanism["line"].startswith("ran on 1 CPU instead of 2"), mechanism
    found = assert_first_with_margin("taskset, half the CPUs", result, lambda c: c["key"].startswith("host.cpu."),
                                     margin=0.3)
    assert found["key"] == "host.cpu.usable"
    top = result["causes"][0]
    assert has_factor(top, "series_moved", "the runs' CPU set moved with it (2 \u2192 1)"), top
    assert any("fits the mechanism (cpu/host)" in e for e in top["evidence"]), top
    assert_outputs_agree(result, text, page)


def test_interpreter_switch_ranks_first(tmp_path):
    """PYTHONTRACEMALLOC=1 (left over from a memory hunt): every allocation records its traceback. No rule
    names it: its name family (PYTHON*: the interpreter's settings) and its C reader carry it."""
    result, text, page = _pair(tmp_path, BENCH, bad_env={"PYTHONTRACEMALLOC": "1"}, args=["120"])
    _slowed(result, 50)
    assert result["verdict"]["mechanism"]["kind"] in ("cpu_work", "unknown"), result["verdict"]["mechanism"]
    assert_first_with_margin("interpreter switch (PYTHONTRACEMALLOC=1)", result,
                             lambda c: c.get("variable") == "PYTHONTRACEMALLOC", margin=0.15)
    top = result["causes"][0]
    assert top["factors"][0]["why"].startswith("unknown variable: an interpreter setting"), top["factors"]
    # Read by CPython's C start-up, never by Python code: "not read by Python" does not demote it.
    # Who can read it: the interpreter's own library, whose strings name it (the maps of what ran), or, where the
    # maps were not read, the name list of C readers.
    assert has_factor(top, "readable_by_loaded_code", "libpython") or any(
        "the interpreter's start-up (C) reads it with getenv" in e for e in top["evidence"]), top
    assert not has_factor(top, "not_read", "not read")
    assert_outputs_agree(result, text, page)


def test_startup_code_ranks_first(tmp_path):
    def install_hook(venv):
        (venv["site"] / "sitecustomize.py").write_text(PROFILE_HOOK)

    result, text, page = _pair(tmp_path, BENCH, before_bad=install_hook)
    _slowed(result, 40)
    assert result["verdict"]["mechanism"]["kind"] in ("cpu_work", "unknown"), result["verdict"]["mechanism"]
    assert_first_with_margin("start-up code (sitecustomize profile hook)", result,
                             lambda c: c["key"].startswith("startup.") and c["key"].endswith("sitecustomize.py"),
                             margin=0.3)
    assert_outputs_agree(result, text, page)


FASTMATH = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
                      '[project]\nname = "fastmath"\nversion = "0.3"\n[tool.setuptools]\npackages = ["fastmath"]\n',
    "README.md": "# fastmath\nRow scoring for the batch scheduler.\n",
    "fastmath/__init__.py": "from fastmath.core import score\n",
    "fastmath/core.py": "def score(rows):\n    return sum(a * b for a, b, _ in rows)\n",
}
# The uncommitted edit: a "safer" scoring that re-validates every row in Python (several times slower).
SLOW_CORE = ("def score(rows):\n    total = 0\n    for a, b, c in rows:\n"
             "        if not isinstance(c, str):\n            raise TypeError(c)\n"
             "        total += int(a) * int(b)\n    return total\n")
EDITABLE_BENCH = textwrap.dedent('''\
    import json, time
    import fastmath
    rows = [(i, i * 7 % 13, str(i)) for i in range(2000)]
    start = time.process_time()
    for _ in range(1500):
        fastmath.score(rows)
    print(json.dumps({"rows_per_s": 1500 * len(rows) / (time.process_time() - start)}))
    ''')


def test_uncommitted_edit_in_an_editable_checkout_ranks_first(tmp_path, git_repo):
    src = tmp_path / "checkouts" / "fastmath"  # not beside bench.py: its directory is on sys.path
    for rel, text in FASTMATH.items():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        (src / rel).write_text(text)
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.com", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "fastmath 0.3"]):
        subprocess.run(["git", *args], cwd=src, check=True, capture_output=True, env=env)

    def editable_install(venv):
        proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                               "--no-build-isolation", "--disable-pip-version-check", "--prefix", str(venv["root"]),
                               "-e", str(src)], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr[-2000:]

    def edit(venv):
        (src / "fastmath" / "core.py").write_text(SLOW_CORE)  # the planted, uncommitted edit
        (src / "README.md").write_text(FASTMATH["README.md"] + "Now validates rows.\n")  # innocent, same checkout
        (git_repo / "a.py").write_text("x = 2\n")  # innocent: a dirty file in the checkout envsnap runs from
        (git_repo / "notes.txt").write_text("try the new kernel\n")  # innocent: an untracked one

    venv = make_venv(tmp_path / "venv", probe=True)
    editable_install(venv)
    script = tmp_path / "bench.py"
    script.write_text(EDITABLE_BENCH)
    command = [venv["python"], script]
    good = envsnap_run(venv, tmp_path / "good.json", command, side_env(False), tmp_path / "pg", cwd=git_repo)
    edit(venv)
    bad = envsnap_run(venv, tmp_path / "bad.json", command, side_env(True), tmp_path / "pb", cwd=git_repo)
    result, text, page = outputs(good, bad, tmp_path)
    _slowed(result, 40)
    keys = {c["key"] for c in result["causes"]}
    assert any(k.endswith(".dirty.README.md") for k in keys) and any(k.endswith(".dirty.a.py") for k in keys)
    assert any(k.endswith(".untracked.notes.txt") for k in keys)
    assert_first_with_margin("uncommitted edit in an editable checkout", result,
                             lambda c: c["key"].endswith(".dirty.fastmath/core.py"), margin=0.1)
    top = result["causes"][0]
    assert any(e.endswith("checkouts/fastmath is the installed fastmath (editable): its changes run")
               for e in top["evidence"])
    assert_outputs_agree(result, text, page)


def test_unknown_variable_read_by_the_benchmark_ranks_first(tmp_path):
    result, text, page = _pair(tmp_path, BENCH, bad_env={"VALIDATE_ROWS": "1"})
    _slowed(result, 40)
    assert result["verdict"]["mechanism"]["kind"] in ("cpu_work", "unknown"), result["verdict"]["mechanism"]
    assert_first_with_margin("unknown variable read by the benchmark", result,
                             lambda c: c.get("variable") == "VALIDATE_ROWS", margin=0.15)
    top = result["causes"][0]
    assert any(e.startswith("x2 read by ") for e in top["evidence"]), top
    by_key = causes_by_key(result["causes"])
    # Out of context: NCCL and CUDA settings on a machine with no GPU.
    nccl = next(c for k, c in by_key.items() if c.get("variable") == "NCCL_PROTO")
    assert any("no GPU captured on either side" in f["why"] and "NCCL runs only on GPUs" in f["why"]
               for f in factors_of(nccl, "out_of_context")), nccl
    cuda = next(c for c in result["causes"] if c.get("variable") == "CUDA_LAUNCH_BLOCKING")
    assert has_factor(cuda, "out_of_context", "out of context: no GPU captured on either side"), cuda
    assert has_factor(next(c for c in result["causes"] if c.get("variable") == "SGLANG_ENABLE_SPEC_V2"), "out_of_context")
    # A thread count whose thread pool never started: the runs' peak threads held.
    omp = next(c for c in result["causes"] if c.get("variable") == "OMP_NUM_THREADS")
    assert has_factor(omp, "series_held", "the runs' peak threads held"), omp
    # Nobody read the everyday variables, and no C library is known to.
    editor = next(c for c in result["causes"] if c.get("variable") == "EDITOR")
    assert has_factor(editor, "not_read", "not read"), editor
    assert_outputs_agree(result, text, page)


def test_without_the_probe_the_unknown_variable_is_in_the_top_group_with_the_bisect_command(tmp_path):
    result, text, page = _pair(tmp_path, BENCH, bad_env={"VALIDATE_ROWS": "1"}, probe=False)
    _slowed(result, 40)
    found = figures("unknown variable, probe off", result, lambda c: c.get("variable") == "VALIDATE_ROWS")
    assert found["rank"] == 1, found
    group = result["groups"][0]
    # The variable's key is the run command's own environment (read from its processes' memory) or the shell's.
    assert group["rank"] == 1 and {"env.VALIDATE_ROWS", "workers.env.VALIDATE_ROWS"} & set(group["keys"])
    assert group["size"] == found["tied"] + 1 >= 2
    bisect = group["bisect"]
    assert bisect["command"].startswith(f"envsnap bisect {tmp_path / 'good.json'} {tmp_path / 'bad.json'} -- ")
    assert bisect["command"].endswith(f"{tmp_path / 'venv' / 'bin' / 'python'} {tmp_path / 'bench.py'}")
    assert bisect["deltas"] >= 30 and bisect["runs"] == bisect["configurations"] * bisect["repeat"] > 0
    # Text and HTML name the group and the bisect command, as JSON does.
    assert group["line"] in text and bisect["command"] in text and f"about {bisect['runs']} runs" in text
    shown = page_text(page)
    assert group["line"] in shown and bisect["command"] in shown
    assert_outputs_agree(result, text, page)
