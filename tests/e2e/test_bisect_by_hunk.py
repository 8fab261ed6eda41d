"""`envsnap bisect` hunk by hunk: a real checkout whose moe/topk.py carries a three-hunk edit on BAD (the
patch a script applied), of which the third makes the real benchmark's step ten times the work, beside an
innocent file edit and innocent variables. Bisect must name the hunk, not only the file; put every file back
byte for byte; and, killed -9 while a file holds a mix of GOOD's and BAD's hunks, restore it on the next run.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers.bench import base_env, run_cli
from helpers.bisect_files import capture, tree_state
from helpers.git import init_repo
from helpers.patches import BENCH, EDITS, TOPK, with_edits

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not __import__("shutil").which("git"), reason="no git")]
INNOCENT = {"TOKENIZERS_PARALLELISM": ("false", "true"), "HF_HOME": ("/data/hf", "/tmp/hf"),
            "SGLANG_LOG_LEVEL": ("info", "debug")}


def _checkout(base: Path):
    repo = init_repo(base / "repo", {"bench.py": BENCH.format(package="moe"), "moe/__init__.py": "",
                                     "moe/topk.py": TOPK, "moe/config.py": "BATCH = 8\n", ".gitignore": "__pycache__/\n"})
    capture(base / "good.json", repo, base_env(PYTHONDONTWRITEBYTECODE="1", **{k: v[0] for k, v in INNOCENT.items()}))
    (repo / "moe/topk.py").write_text(with_edits((1, 2, 3)))
    (repo / "moe/config.py").write_text("BATCH = 16\n")
    capture(base / "bad.json", repo, base_env(PYTHONDONTWRITEBYTECODE="1", **{k: v[1] for k, v in INNOCENT.items()}))
    return repo


def _env():
    return base_env(PYTHONDONTWRITEBYTECODE="1", **{k: None for k in INNOCENT})


def _argv(base, journal, *extra):
    return [sys.executable, "-m", "envsnap", "bisect", str(base / "good.json"), str(base / "bad.json"),
            "--journal", str(journal), "--format", "json", "--repeat", "3", *extra, "--", sys.executable, "bench.py"]


def test_bisect_names_the_guilty_hunk_and_restores_the_file(tmp_path):
    repo = _checkout(tmp_path)
    topk = os.path.realpath(repo / "moe/topk.py")
    before = tree_state(repo)
    journal = tmp_path / "j.jsonl"
    proc = subprocess.run(_argv(tmp_path, journal), cwd=repo, env=_env(), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    out = json.loads(proc.stdout)
    assert [d["name"] for d in out["minimal"]] == [f"{topk}#hunk3"], out["message"]
    [found] = out["minimal"]
    assert (found["kind"], found["hunk"], found["of"], found["file"]) == ("hunk", 3, 3, topk)
    assert "+" + EDITS[2][1].rstrip("\n") in found["lines"]
    assert out["one_minimal"] is True
    assert sorted(h["name"] for h in out["deltas"]["hunks"]) == [f"{topk}#hunk{i}" for i in (1, 2, 3)]
    assert {d["name"] for d in out["deltas"]["files"]} == {topk, os.path.realpath(repo / "moe/config.py")}
    assert out["bad"]["median"] < 0.3 * out["good"]["median"]
    assert tree_state(repo) == before  # every file, .git included, as before (bytes, modes, mtimes)
    assert not Path(str(journal) + ".backup").exists()
    text = run_cli("bisect", tmp_path / "good.json", tmp_path / "bad.json", "--dry-run", cwd=repo, env=_env())
    assert "switched hunk by hunk (3 hunks)" in text.stdout and "3 hunks of 1 file," in text.stdout
    # The commands it prints do what they say: undo only hunk 3; keep only hunk 3 (over GOOD).
    keep = out["keep"]
    [undo] = [c for c in keep["undo"] if c["delta"] == topk]
    subprocess.run(undo["command"], shell=True, check=True, cwd=tmp_path)
    assert (repo / "moe/topk.py").read_text() == with_edits((1, 2))
    assert (repo / "moe/config.py").read_text() == "BATCH = 16\n"  # every other change stays
    [patch] = keep["patches"]
    subprocess.run(["git", "checkout", "-q", "--", "moe/topk.py"], cwd=repo, check=True)
    subprocess.run(patch["command"], shell=True, check=True, cwd=tmp_path)
    assert (repo / "moe/topk.py").read_text() == with_edits((3,))


def test_kill9_while_a_file_holds_a_mix_of_hunks_then_the_next_bisect_restores_it(tmp_path):
    repo = _checkout(tmp_path)
    topk = os.path.realpath(repo / "moe/topk.py")
    before = tree_state(repo)
    journal = tmp_path / "j.jsonl"
    manifest = Path(str(journal) + ".backup") / "manifest.jsonl"
    argv = _argv(tmp_path, journal)
    proc = subprocess.Popen(argv, cwd=repo, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:  # a configuration with some of topk.py's hunks is on disk
        if manifest.exists() and '"may_hold"' in manifest.read_text() \
                and (repo / "moe/topk.py").read_text() not in (TOPK, with_edits((1, 2, 3))):
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    time.sleep(0.3)  # the benchmark in flight ends by itself
    mixed = (repo / "moe/topk.py").read_text()
    assert mixed not in (TOPK, with_edits((1, 2, 3)))  # neither GOOD's nor BAD's: a subset of the hunks
    resumed = subprocess.run(argv, cwd=repo, env=_env(), capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    assert any("files an interrupted bisect had switched" in line and "before starting" in line
               for line in resumed.stderr.splitlines()[:2]), resumed.stderr
    out = json.loads(resumed.stdout)
    assert [d["name"] for d in out["minimal"]] == [f"{topk}#hunk3"]
    assert out["runs"]["from_journal"] >= 6
    assert tree_state(repo) == before


def test_by_file_keeps_the_whole_file(tmp_path):
    repo = _checkout(tmp_path)
    out = json.loads(run_cli("bisect", tmp_path / "good.json", tmp_path / "bad.json", "--dry-run", "--by-file",
                             "--format", "json", cwd=repo, env=_env()).stdout)
    assert out["deltas"]["hunks"] == [] and "2 files" in out["message"]
