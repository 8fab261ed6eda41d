"""Signals at random moments of a real `envsnap bisect` over a real 41-file tree, including during its
final restore and a second signal during it (tests/helpers/bisect_signals.py). What must hold in every
trial: each file is as before when bisect exits, or the last line names it as still switched with the
command that restores it (which then does); the exit status is 130 for SIGINT, 128 + n for the others.
benchmarks/bisect_signals.py runs 50 and more of these trials."""
from __future__ import annotations

import random

import pytest
from helpers.bisect_signals import run_trial, signal_tree

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not __import__("shutil").which("git"), reason="git is not installed")]


def test_no_file_is_left_switched_without_a_line_naming_it_whatever_the_signal_and_its_moment(tmp_path):
    tree = signal_tree(tmp_path)
    rng = random.Random(36)
    trials = [run_trial(tree, tmp_path / f"j{i}.jsonl", rng, "restore" if i % 2 else "random") for i in range(10)]
    report = [(t.mode, t.signum, t.second, t.exit_code, len(t.left), t.last_line[-160:]) for t in trials]
    assert [t.silent for t in trials] == [[]] * len(trials), report
    wrong_code = [(t.mode, t.signum, t.second, t.exit_code, t.delay_s, t.last_line) for t in trials if not t.code_ok]
    assert wrong_code == [], wrong_code
    assert all(t.restored_by_command in (None, True) for t in trials), report
    assert sum(not t.finished_first for t in trials) >= 5, report  # the signals did land in running bisects
