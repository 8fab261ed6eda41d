"""Signals sent to a real `envsnap bisect` over a real file tree, at random moments: the trial behind
tests/e2e/test_bisect_signals.py (a few trials) and benchmarks/bisect_signals.py (50 and more).

The tree: a git checkout whose GOOD state is its HEAD (40 modules and work.py) and whose BAD state edits
all 41 files, work.py's edit making the benchmark slow; both captured with the real `envsnap capture`.
A bisect over it switches up to 41 files per configuration (each write fsynced), so its final restore
takes long enough for a signal to land inside it.

A trial runs the real CLI and sends SIGINT, SIGTERM, SIGHUP or SIGQUIT: either at a random moment of the
whole bisect, or — with --max-runs so that the bisect ends at a known run — just after its last run,
while it restores, often followed by a second signal (a second Ctrl-C). Then it compares the tree with
its state before, byte for byte (mode and mtime too), and reads the last line on stderr: every file not
as before must be named there as still switched, with the command that restores it — which the trial
then runs, and checks.
"""
from __future__ import annotations

import os
import random
import re
import shlex
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from helpers import interruptible
from helpers.bench import base_env
from helpers.bisect_files import capture, tree_state
from helpers.git import git, init_repo

N_MODULES = 40
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
BENCH = '''\
import json, pathlib, time
time.sleep(0.03)
slow = "debug" in pathlib.Path("work.py").read_text()
print(json.dumps({"tok_s": 500.0 if slow else 1000.0}))
'''


@dataclass
class Tree:
    repo: Path
    good: Path
    bad: Path


def signal_tree(base: Path) -> Tree:
    files = {"bench.py": BENCH, "work.py": "def step():\n    return 1\n", ".gitignore": "__pycache__/\n"}
    files.update({f"pkg/m{i:02d}.py": f"VALUE = {i}\n" for i in range(N_MODULES)})
    repo = init_repo(base / "repo", files)
    env = base_env(PYTHONDONTWRITEBYTECODE="1")
    good, bad = base / "good.json", base / "bad.json"
    capture(good, repo, env)
    for i in range(N_MODULES):
        (repo / f"pkg/m{i:02d}.py").write_text(f"VALUE = {i}  # tuned\nEXTRA = {i * 7}\n")
    (repo / "work.py").write_text("def step():\n    return 1  # debug: full sweep\n")
    capture(bad, repo, env)
    git(repo, "status", "--short")  # the captures left the checkout readable by git (a sanity check)
    return Tree(repo, good, bad)


def _files(state: Dict[str, tuple]) -> Dict[str, tuple]:
    return {rel: s for rel, s in state.items() if not rel.startswith(".git" + os.sep) and rel != ".git"}


@dataclass
class Trial:
    signum: int
    mode: str
    delay_s: float
    second: Optional[int] = None
    exit_code: Optional[int] = None
    finished_first: bool = False  # the bisect ended before the signal came
    in_restore_window: bool = False  # sent after the last run, while its backups still existed
    left: List[str] = field(default_factory=list)  # files not as before when it exited
    named: List[str] = field(default_factory=list)  # files its last line names as still switched
    restored_by_command: Optional[bool] = None
    last_line: str = ""

    @property
    def silent(self) -> List[str]:
        """Files left switched that its message does not name: must be none."""
        return sorted(set(self.left) - set(self.named))

    @property
    def code_ok(self) -> bool:
        """128 + the signal's number; with two signals sent before the bisect could act on the first, the
        runtime calls the handlers in signal-number order, so either one's number is right."""
        received = {self.signum} | ({self.second} if self.second else set())
        # -n: killed by the signal itself before bisect had installed its handlers (Python still starting):
        # nothing was switched yet, and the shell reports 128 + n as well.
        if self.finished_first or self.exit_code in {128 + s for s in received} | {-s for s in received}:
            return True
        # Sent while the process was still there but after the bisect had ended (its handlers removed, the
        # interpreter shutting down): it acted on nothing. The bisect's own end shows: its normal status (0 found,
        # 1 not), its final restore as the last line, nothing left switched.
        return self.exit_code in (0, 1) and "envsnap bisect: restored the" in self.last_line and not self.left


def _changed(tree: Tree, before: Dict[str, tuple]) -> List[str]:
    now = _files(tree_state(tree.repo))
    return sorted(os.path.realpath(tree.repo / rel) for rel in set(before) | set(now)
                  if before.get(rel) != now.get(rel) and "file" in (before.get(rel, ("",))[0], now.get(rel, ("",))[0]))


def run_trial(tree: Tree, journal: Path, rng: random.Random, mode: str) -> Trial:
    """One bisect, one or two signals (see the module docstring)."""
    before = _files(tree_state(tree.repo))
    signum = rng.choice(SIGNALS)
    max_runs = rng.randint(4, 9) if mode == "restore" else 200
    argv = [sys.executable, "-m", "envsnap", "bisect", str(tree.good), str(tree.bad), "--journal", str(journal),
            "--repeat", "1", "--max-runs", str(max_runs), "--no-guess", "--format", "json", "--",
            sys.executable, "bench.py"]
    delay = rng.uniform(0.0, 0.12) if mode == "restore" else rng.uniform(0.3, 4.0)
    trial = Trial(signum, mode, delay)
    proc = subprocess.Popen(argv, cwd=tree.repo, env=base_env(PYTHONDONTWRITEBYTECODE="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=interruptible)
    backup = Path(str(journal) + ".backup")
    if mode == "restore":
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if journal.exists() and journal.read_text().count('"type": "run"') >= max_runs:
                break
            time.sleep(0.002)
    time.sleep(delay)
    if proc.poll() is None:
        trial.in_restore_window = mode == "restore" and backup.exists()
        proc.send_signal(signum)
        if rng.random() < 0.5:  # a second signal, as an impatient second Ctrl-C
            time.sleep(rng.uniform(0.0, 0.08))
            trial.second = rng.choice(SIGNALS)
            if proc.poll() is None:
                proc.send_signal(trial.second)
    else:
        trial.finished_first = True
    _, err = proc.communicate(timeout=300)
    trial.exit_code = proc.returncode
    lines = [line for line in err.splitlines() if line.strip()]
    trial.last_line = lines[-1] if lines else ""
    trial.left = _changed(tree, before)
    match = re.search(r"still switched: (.*?): run `(envsnap bisect --restore --journal [^`]+)`", trial.last_line)
    if match:
        trial.named = sorted(match.group(1).split(", "))
        result = subprocess.run([sys.executable, "-m", *shlex.split(match.group(2))], cwd=tree.repo,
                                env=base_env(), capture_output=True, text=True, timeout=120)
        trial.restored_by_command = result.returncode == 0 and not _changed(tree, before)
    if _changed(tree, before):  # leave the tree as it was for the next trial, whatever happened
        subprocess.run([sys.executable, "-m", "envsnap", "bisect", "--restore", "--journal", str(journal)],
                       cwd=tree.repo, env=base_env(), capture_output=True, timeout=120)
    for leftover in (journal, Path(str(journal) + ".keep")):
        if leftover.is_dir():
            import shutil

            shutil.rmtree(leftover, ignore_errors=True)
        elif leftover.exists():
            leftover.unlink()
    return trial
