"""`envsnap bisect` over files: real git checkouts, real captures, real benchmark processes.

The checkout (helpers/bisect_files.py) holds what a night of debugging leaves: edits on both
sides, a deletion, a rename, a stash, untracked files (one binary, one in a new directory), an
executable script, and one edit that makes the benchmark ~10x slower; ten environment variables
changed as well. What must hold: bisect names the edit; every file (and .git) is byte for byte,
mode and mtime as before when it ends, after a kill -9 and `--restore`, or after a kill -9 and
the next bisect; a file someone changed is refused, never overwritten; --dry-run writes nothing.
"""
from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import interruptible
from helpers.bench import base_env, run_cli
from helpers.bisect_files import (
    INNOCENT_ENV,
    WORK_BAD,
    WORK_GOOD,
    capture,
    mixed_checkout,
    tree_state,
)
from helpers.git import init_repo

pytestmark = pytest.mark.skipif(not __import__("shutil").which("git"), reason="git is not installed")

# A deterministic stand-in for the tests about files on disk (the real benchmark is the slow
# test below): it reads work.py the way an import would and takes a moment, so a kill lands
# mid-run (DET_BENCH_SLEEP=0: no moment, for a test that kills nothing). --counter/--user-edit: on
# the given invocation it rewrites a file, as a user would.
DET_BENCH = '''\
import json, os, pathlib, sys, time
args = sys.argv[1:]
calls = 0
if args and args[0] == "--counter":
    path = pathlib.Path(args[1])
    calls = int(path.read_text()) + 1 if path.exists() else 1
    path.write_text(str(calls))
    if len(args) > 3 and args[2] == "--user-edit" and int(args[3]) == calls:
        pathlib.Path(args[4]).write_text(args[5])
time.sleep(float(os.environ.get("DET_BENCH_SLEEP", "0.08")))
slow = "debug" in pathlib.Path("work.py").read_text()
print(json.dumps({"tok_s": 500.0 if slow else 1000.0}))
'''


def _env(**extra):
    return base_env(PYTHONDONTWRITEBYTECODE="1", **{k: None for k in INNOCENT_ENV}, **extra)


def _bisect_argv(co, journal, *extra, bench_args=()):
    return [sys.executable, "-m", "envsnap", "bisect", str(co.good), str(co.bad), "--journal", str(journal),
            "--format", "json", *map(str, extra), "--", sys.executable, "bench.py", *map(str, bench_args)]


def _real(path) -> str:
    return os.path.realpath(str(path))


@pytest.fixture(scope="module")
def _shared(tmp_path_factory):
    """One checkout for the tests below (two real captures each cost seconds); a test that leaves
    it changed (on purpose: a user's edit) makes the next one build a fresh checkout."""
    return {"factory": tmp_path_factory, "checkout": None, "state": None}


@pytest.fixture
def det_checkout(_shared):
    if _shared["checkout"] is None or tree_state(_shared["checkout"].repo) != _shared["state"]:
        _shared["checkout"] = mixed_checkout(_shared["factory"].mktemp("checkout"), bench=DET_BENCH)
        _shared["state"] = tree_state(_shared["checkout"].repo)
    return _shared["checkout"]


# --- the real benchmark ------------------------------------------------------------------------

@pytest.mark.slow
def test_real_benchmark_isolates_the_edited_file_among_innocent_files_and_variables(tmp_path):
    co = mixed_checkout(tmp_path)
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    result = subprocess.run(_bisect_argv(co, journal, "--repeat", "3"), cwd=co.repo, env=_env(),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr + result.stdout
    out = json.loads(result.stdout)
    files = {d["name"]: d for d in out["deltas"]["files"]}
    repo = _real(co.repo)
    assert [d["name"] for d in out["minimal"]] == [_real(co.cause)]
    assert out["one_minimal"] is True
    assert sorted(files) == sorted(os.path.join(repo, rel) for rel in [*co.innocent_files, "work.py"])
    assert len(out["deltas"]["applied"]) == len(INNOCENT_ENV)
    assert out["deltas"]["files_refused"] == [] and out["deltas"]["files_not_applicable"] == []
    # Versions only the snapshots held: GOOD's local edit, GOOD's scratch file, the stashed experiment.
    for rel in ("mod02.py", "scratch.py", "engine.py"):
        assert "the snapshot's text" in files[os.path.join(repo, rel)]["good"], files[os.path.join(repo, rel)]
    assert "git HEAD" in files[os.path.join(repo, "mod01.py")]["good"]
    assert files[os.path.join(repo, "extra/deep/helper.py")]["change"] == "created"
    assert files[os.path.join(repo, "mod03.py")]["change"] == "deleted"
    # Everything as before, .git included: bytes, modes, mtimes, no directory or temp file left.
    assert tree_state(co.repo) == before
    assert not Path(str(journal) + ".backup").exists()
    n = len(files) + len(out["deltas"]["applied"])
    print(f"\nmixed env + file bisect: {n} deltas ({len(files)} files, {len(out['deltas']['applied'])} variables), "
          f"{out['configurations_run']} configurations, {out['runs']['total']} runs; one at a time: {n + 1} "
          f"configurations ({3 * (n + 1)} runs at --repeat 3); GOOD {out['good']['median']:.1f} vs BAD "
          f"{out['bad']['median']:.1f} steps/CPU s")
    assert out["configurations_run"] <= 2 * math.log2(n) + 4
    assert out["bad"]["median"] < 0.3 * out["good"]["median"]

    # The commands it prints do what they say: undo the cause, then re-apply it with the patch.
    keep = out["keep"]
    assert [c["delta"] for c in keep["undo"]] == [_real(co.cause)]
    for command in keep["undo"]:
        subprocess.run(command["command"], shell=True, check=True, cwd=tmp_path)
    assert (co.repo / "work.py").read_text() == WORK_GOOD
    assert (co.repo / "mod01.py").read_text() == "A = 2\n"  # every other change stays
    [patch] = keep["patches"]
    subprocess.run(patch["command"], shell=True, check=True, cwd=tmp_path)
    assert (co.repo / "work.py").read_text() == WORK_BAD


# --- kill -9, then --restore or the next bisect ------------------------------------------------------

def _kill_mid_bisect(argv, cwd, journal: Path, runs: int):
    proc = subprocess.Popen(argv, cwd=cwd, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count('"type": "run"') >= runs:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)  # no chance to restore anything: as a crash or an OOM kill
    proc.communicate()
    time.sleep(0.3)  # the benchmark in flight (its own session) ends by itself


def test_kill9_mid_bisect_then_restore_leaves_every_file_as_before(det_checkout, tmp_path):
    co = det_checkout
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    _kill_mid_bisect(_bisect_argv(co, journal, "--repeat", "2"), co.repo, journal, runs=5)
    assert tree_state(co.repo) != before  # the kill left files switched
    backup = Path(str(journal) + ".backup")
    assert (backup / "manifest.jsonl").exists()

    restored = run_cli("bisect", "--restore", "--journal", journal, cwd=co.repo, env=_env())
    assert restored.returncode == 0, restored.stderr
    assert "restored" in restored.stdout and "files an interrupted bisect had switched" in restored.stdout
    assert tree_state(co.repo) == before  # bytes, modes and mtimes of every file, .git included
    assert not backup.exists()
    again = run_cli("bisect", "--restore", "--journal", journal, cwd=co.repo, env=_env())
    assert again.returncode == 0 and "nothing to restore" in again.stdout


@pytest.mark.slow  # two real bisects, one killed
def test_kill9_then_the_next_bisect_restores_first_and_resumes(det_checkout, tmp_path):
    co = det_checkout
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    argv = _bisect_argv(co, journal, "--repeat", "2")
    _kill_mid_bisect(argv, co.repo, journal, runs=7)
    resumed = subprocess.run(argv, cwd=co.repo, env=_env(), capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    first_lines = resumed.stderr.splitlines()[:2]
    assert any("files an interrupted bisect had switched" in line and "before starting" in line
               for line in first_lines), resumed.stderr
    out = json.loads(resumed.stdout)
    assert [d["name"] for d in out["minimal"]] == [_real(co.cause)]
    assert out["runs"]["from_journal"] >= 7
    assert tree_state(co.repo) == before


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT])
def test_ctrl_c_or_sigterm_mid_bisect_restores_every_file(det_checkout, tmp_path, signum):
    co = det_checkout
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    proc = subprocess.Popen(_bisect_argv(co, journal, "--repeat", "2"), cwd=co.repo, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not (journal.exists() and journal.read_text().count('"type": "run"') >= 3):
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signum, err  # 130 for SIGINT, 143 for SIGTERM
    assert "restored the 13 switched files byte for byte" in err and "envsnap: error: interrupted" in err
    assert "13 switched files restored byte for byte" in err.splitlines()[-1], err
    assert tree_state(co.repo) == before
    assert not Path(str(journal) + ".backup").exists()


# --- files someone changed -------------------------------------------------------------------------

def _undo_later(path: Path):
    """Undoes a test's own edit of `path` in the shared checkout once the test is over (bytes, mode and
    mtime as they were), so the next test reuses the checkout instead of capturing a fresh one."""
    data, before = path.read_bytes(), path.stat()

    def undo():
        path.write_bytes(data)
        os.chmod(path, before.st_mode & 0o7777)
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    return undo


def test_a_file_changed_before_bisect_is_refused_with_one_line_and_left_alone(det_checkout, tmp_path):
    co = det_checkout
    undo = _undo_later(co.repo / "config.yaml")
    (co.repo / "config.yaml").write_text("batch: 32  # tuned by hand after BAD was captured\n")
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    result = subprocess.run(_bisect_argv(co, journal, "--repeat", "1"), cwd=co.repo, env=_env(DET_BENCH_SLEEP="0"),
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    config = _real(co.repo / "config.yaml")
    lines = [line for line in result.stderr.splitlines() if "config.yaml" in line]
    assert len(lines) == 1 and "refused" in lines[0] and "neither GOOD's" in lines[0], result.stderr
    assert [d["name"] for d in out["deltas"]["files_refused"]] == [config]
    assert config not in {d["name"] for d in out["deltas"]["files"]}
    assert [d["name"] for d in out["minimal"]] == [_real(co.cause)]
    assert tree_state(co.repo) == before  # config.yaml never touched, the rest restored
    undo()


def test_a_file_changed_while_bisect_runs_stops_it_and_is_never_overwritten(det_checkout, tmp_path):
    co = det_checkout
    before = tree_state(co.repo)
    journal = tmp_path / "j.jsonl"
    user_text = "A = 99  # the user, mid-bisect\n"
    target = co.repo / "mod01.py"
    undo = _undo_later(target)
    # The first run (GOOD's) edits mod01.py; BAD's configuration must switch it next.
    result = subprocess.run(_bisect_argv(co, journal, "--repeat", "1", bench_args=[
        "--counter", tmp_path / "calls", "--user-edit", "1", target, user_text]), cwd=co.repo,
        env=_env(DET_BENCH_SLEEP="0"), capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("envsnap: error")]
    assert len(errors) == 1 and "mod01.py was changed while bisect was running" in errors[0], result.stderr
    assert "did not overwrite it" in errors[0]
    assert target.read_text() == user_text
    after = tree_state(co.repo)
    changed = {rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel)}
    assert changed == {"mod01.py"}  # every other file restored
    kept = [p for p in tmp_path.iterdir() if p.name.startswith("j.jsonl.backup.kept")]
    assert len(kept) == 1 and "NOT restored" in result.stderr and str(kept[0]) in result.stderr
    # The kept copy is mod01.py as it was before bisect (BAD's version).
    copies = [p for p in kept[0].iterdir() if p.name != "manifest.jsonl"]
    assert [p.read_text() for p in copies] == ["A = 2\n"]
    undo()


def test_the_benchmarks_own_result_file_is_not_switched(tmp_path):
    """bench_serving appends to its --output-file: in the checkout it differs between any two captures.
    Switching it would turn each run's own append into "a file changed while bisect was running"."""
    bench = ("import json, pathlib, sys\nout = pathlib.Path(sys.argv[sys.argv.index('--output-file') + 1])\n"
             "rate = 500.0 if 'debug' in pathlib.Path('work.py').read_text() else 1000.0\n"
             "out.open('a').write(json.dumps({'output_throughput': rate}) + '\\n')\n"
             "print(json.dumps({'tok_s': rate}))\n")
    repo = init_repo(tmp_path / "repo", {"bench.py": bench, "work.py": "X = 1\n", "other.py": "Y = 1\n"})
    (repo / "results.jsonl").write_text('{"output_throughput": 1000.0}\n')
    capture(tmp_path / "good.json", repo, base_env(PYTHONDONTWRITEBYTECODE="1"))
    (repo / "work.py").write_text("X = 1  # debug\n")
    (repo / "other.py").write_text("Y = 2\n")
    (repo / "results.jsonl").write_text('{"output_throughput": 1000.0}\n{"output_throughput": 500.0}\n')
    capture(tmp_path / "bad.json", repo, base_env(PYTHONDONTWRITEBYTECODE="1"))
    result = run_cli("bisect", tmp_path / "good.json", tmp_path / "bad.json", "--repeat", "1", "--format", "json",
                     "--", sys.executable, "bench.py", "--output-file", "results.jsonl", cwd=repo,
                     env=base_env(PYTHONDONTWRITEBYTECODE="1"))
    assert result.returncode == 0, result.stderr + result.stdout
    out = json.loads(result.stdout)
    assert [d["name"] for d in out["minimal"]] == [_real(repo / "work.py")]
    why = {d["name"]: d["note"] for d in out["deltas"]["files_not_applicable"]}
    assert why == {_real(repo / "results.jsonl"): "the benchmark command writes it (its result file): not switched"}
    assert (repo / "work.py").read_text() == "X = 1  # debug\n" and (repo / "other.py").read_text() == "Y = 2\n"


# --- --dry-run ---------------------------------------------------------------------------------------

def test_dry_run_lists_every_file_and_variable_and_writes_nothing(det_checkout, tmp_path):
    co = det_checkout
    before = tree_state(co.repo)
    outside = sorted(p.name for p in co.bad.parent.iterdir())  # where BAD's default journal would go
    for fmt in ("json", "text"):
        result = run_cli("bisect", co.good, co.bad, "--dry-run", "--format", fmt, "--", sys.executable, "bench.py",
                         cwd=co.repo, env=_env())
        assert result.returncode == 0, result.stderr
        if fmt == "json":
            out = json.loads(result.stdout)
            assert out["status"] == "dry_run" and out["runs"]["total"] == 0
            names = sorted(d["name"] for d in out["deltas"]["files"])
            assert names == sorted(os.path.join(_real(co.repo), rel) for rel in [*co.innocent_files, "work.py"])
            assert sorted(d["name"] for d in out["deltas"]["applied"]) == sorted(INNOCENT_ENV)
            assert all(d["current"] == "bad" for d in out["deltas"]["files"])
        else:
            assert result.stdout.startswith("envsnap bisect: DRY RUN: would search 23 deltas (13 files, 10 variables)")
            for rel in [*co.innocent_files, "work.py"]:
                assert f"file {os.path.join(_real(co.repo), rel)}:" in result.stdout
            for name in INNOCENT_ENV:
                assert f"  {name}: GOOD" in result.stdout
    assert tree_state(co.repo) == before
    assert sorted(p.name for p in co.bad.parent.iterdir()) == outside  # no journal, backup or keep directory


def test_example_pair_from_another_machine_lists_its_files_with_why_and_touches_nothing(tmp_path):
    """The illustrative EAGLE-3 pair was captured on another machine: its edited files (engine.py,
    scheduler.py in the checkout and in site-packages, the sitecustomize.py) are listed as not
    switchable here, never created; its variables are still searched."""
    examples = Path(__file__).resolve().parents[2] / "snapshots"
    journal = tmp_path / "j.jsonl"
    result = run_cli("bisect", examples / "eagle3-tp8-good.json", examples / "eagle3-tp8-bad.json", "--dry-run",
                     "--journal", journal, "--format", "json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["deltas"]["files"] == [] and out["deltas"]["files_refused"] == []
    why = {d["name"]: d["note"] for d in out["deltas"]["files_not_applicable"]}
    assert any(name.endswith("sglang/srt/entrypoints/engine.py") for name in why)
    assert any(name.endswith("site-packages/sitecustomize.py") for name in why)
    assert all("is not on this machine" in note for note in why.values()), why
    assert len(out["deltas"]["applied"]) > 5
    assert list(tmp_path.iterdir()) == []


# --- bytecode: two versions of equal size within one second -----------------------------------------

@pytest.mark.slow  # two real captures and a real bisect: ~3 s on a quiet 2-core box, ~14 s loaded
def test_equal_size_versions_never_run_stale_bytecode(tmp_path):
    """Python trusts a __pycache__ entry whose recorded source mtime (whole seconds) and size match.
    Two versions of one size written within a second would run the first one's bytecode; bisect
    moves each write's mtime a second past the last, so every configuration runs its own code."""
    good_text, bad_text = "RATE = 900.0  # good: part sweep\n", "RATE = 100.0  # bad!: full sweep\n"
    assert len(good_text) == len(bad_text)
    repo = init_repo(tmp_path / "repo", {"bench.py": "import json, work\nprint(json.dumps({'tok_s': work.RATE}))\n",
                                         "work.py": good_text, "a.py": "A = 1\n", "b.py": "B = 1\n",
                                         ".gitignore": "__pycache__/\n"})
    capture(tmp_path / "good.json", repo, base_env(PYTHONDONTWRITEBYTECODE="1"))
    (repo / "work.py").write_text(bad_text)
    (repo / "a.py").write_text("A = 2\n")
    (repo / "b.py").write_text("B = 2\n")
    capture(tmp_path / "bad.json", repo, base_env(PYTHONDONTWRITEBYTECODE="1"))
    env = base_env(PYTHONDONTWRITEBYTECODE=None, PYTHONPYCACHEPREFIX=None)
    subprocess.run([sys.executable, "bench.py"], cwd=repo, env=env, check=True, capture_output=True)  # a warm cache
    result = run_cli("bisect", tmp_path / "good.json", tmp_path / "bad.json", "--repeat", "1", "--format", "json",
                     "--", sys.executable, "bench.py", cwd=repo, env=env)
    assert result.returncode == 0, result.stderr + result.stdout
    out = json.loads(result.stdout)
    cause = _real(repo / "work.py")
    assert [d["name"] for d in out["minimal"]] == [cause]
    for config in out["configurations"]:
        assert config["median"] == (100.0 if cause in config["bad_deltas"] else 900.0), config
    assert (repo / "work.py").read_text() == bad_text


# --- installed files (a real venv, the wheel in a local directory), start-up hooks, watched files ------

def _build_venv(base: Path):
    """tinybench 1.0 built into a wheel and pip-installed into a real venv."""
    src = base / "tinybench-src"
    (src / "tinybench").mkdir(parents=True)
    (src / "pyproject.toml").write_text('[build-system]\nrequires = ["setuptools"]\nbuild-backend = '
                                        '"setuptools.build_meta"\n[project]\nname = "tinybench"\nversion = "1.0"\n'
                                        '[tool.setuptools]\npackages = ["tinybench"]\n')
    (src / "tinybench" / "__init__.py").write_text("")
    (src / "tinybench" / "kernel.py").write_text("FACTOR = 1  # as released\n")
    (src / "tinybench" / "extras.py").write_text("EXTRA = 'as released'\n")
    wheels = base / "wheels"
    built = subprocess.run([sys.executable, "-c", f"import setuptools.build_meta as b; print(b.build_wheel({str(wheels)!r}))"],
                           cwd=src, capture_output=True, text=True, timeout=180)
    assert built.returncode == 0, built.stderr
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=180)
    installed = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                                "--disable-pip-version-check", "--prefix", str(venv),
                                str(wheels / built.stdout.strip().splitlines()[-1])],
                               capture_output=True, text=True, timeout=180)
    assert installed.returncode == 0, installed.stderr
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    return python, site, wheels


@pytest.mark.slow  # a wheel built, a real venv, pip, two captures, two bisects: ~4 s quiet, ~28 s loaded
def test_installed_file_edited_in_a_real_venv_is_isolated_with_its_wheel(tmp_path):
    python, site, wheels = _build_venv(tmp_path)
    watched = tmp_path / "conf" / "serving.conf"
    watched.parent.mkdir()
    watched.write_text("max_batch = 8\n")
    env = base_env(ENVSNAP_PYTHON=str(python), PYTHONDONTWRITEBYTECODE="1")
    watch = ["--watch", str(watched.parent)]
    capture(tmp_path / "good.json", tmp_path, env, watch)
    # What a patch script does to an installed package, plus innocent changes beside it.
    kernel = site / "tinybench" / "kernel.py"
    kernel.write_text("FACTOR = 4  # patched in place: debug path\n")
    (site / "tinybench" / "extras.py").write_text("EXTRA = 'patched too'\n")
    (site / "sitecustomize.py").write_text("import os  # added by a setup script\n")
    watched.write_text("max_batch = 16\n")
    capture(tmp_path / "bad.json", tmp_path, env, watch)
    before = {**tree_state(site), **{f"conf/{k}": v for k, v in tree_state(watched.parent).items()}}

    bench = [str(python), "-c", "import json, tinybench.kernel as k; print(json.dumps({'tok_s': 1000 / k.FACTOR}))"]
    pip_cache = tmp_path / "empty-pip-cache"
    pip_cache.mkdir()
    env = base_env(PYTHONDONTWRITEBYTECODE="1", PIP_CACHE_DIR=str(pip_cache))
    # Without the wheel the as-released side of the installed files cannot be re-created: said, not guessed.
    dry = run_cli("bisect", tmp_path / "good.json", tmp_path / "bad.json", "--dry-run", "--format", "json",
                  "--", *bench, env=env, cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    not_applicable = {d["name"]: d["note"] for d in json.loads(dry.stdout)["deltas"]["files_not_applicable"]}
    assert "no wheel of tinybench 1.0 found offline" in not_applicable[_real(kernel)]
    assert "give --wheels DIR" in not_applicable[_real(kernel)]

    result = run_cli("bisect", tmp_path / "good.json", tmp_path / "bad.json", "--repeat", "1", "--wheels", wheels,
                     "--format", "json", "--", *bench, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr + result.stdout
    out = json.loads(result.stdout)
    files = {d["name"]: d for d in out["deltas"]["files"]}
    assert [d["name"] for d in out["minimal"]] == [_real(kernel)]
    assert files[_real(kernel)]["source"] == "installed"
    assert "as installed: tinybench-1.0-py3-none-any.whl" in files[_real(kernel)]["good"]
    assert files[_real(site / "tinybench" / "extras.py")]["source"] == "installed"
    hook = files[_real(site / "sitecustomize.py")]
    assert hook["source"] == "startup" and hook["change"] == "created"
    assert files[_real(watched)]["source"] == "watched" and "the snapshot's text" in files[_real(watched)]["good"]
    assert out["good"]["median"] == 1000 and out["bad"]["median"] == 250
    after = {**tree_state(site), **{f"conf/{k}": v for k, v in tree_state(watched.parent).items()}}
    assert after == before
    # The undo command puts the released file back: the same bytes as in the wheel.
    [undo] = out["keep"]["undo"]
    subprocess.run(undo["command"], shell=True, check=True)
    assert kernel.read_text() == "FACTOR = 1  # as released\n"
