"""Signals at random moments of a real `envsnap bisect` (issue 36): how many files are left switched
without a message naming them. Each trial is tests/helpers/bisect_signals.py's: a real bisect over a real
41-file git checkout (captured with the real `envsnap capture`), SIGINT/SIGTERM/SIGHUP/SIGQUIT sent at a
random moment of the whole run, or just after its last run (--max-runs) while it restores, half of them
followed by a second signal.

    PYTHONPATH=tests .venv/bin/python benchmarks/bisect_signals.py [TRIALS=50] [SEED=36]
"""
from __future__ import annotations

import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from helpers.bisect_signals import run_trial, signal_tree


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    seed = int(sys.argv[2]) if len(sys.argv) > 2 else 36
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        tree = signal_tree(base)
        trials = []
        start = time.monotonic()
        for i in range(n):
            trial = run_trial(tree, base / f"j{i}.jsonl", rng, "restore" if i % 2 else "random")
            trials.append(trial)
            print(f"{i + 1:3d} {trial.mode:<7} {trial.signum:>2}{'+' + str(trial.second) if trial.second else '':<4} "
                  f"exit {trial.exit_code!s:>4} left {len(trial.left):2d} named {len(trial.named):2d} "
                  f"silent {len(trial.silent)} {'(finished first)' if trial.finished_first else ''}"
                  f"{'(restore window)' if trial.in_restore_window else ''}", flush=True)
    landed = [t for t in trials if not t.finished_first]
    print(f"\n{n} trials in {time.monotonic() - start:.0f} s (seed {seed}): signal landed in a running bisect in "
          f"{len(landed)}, {sum(t.in_restore_window for t in trials)} of them after the last run while its backups "
          f"existed (the final restore), {sum(t.second is not None for t in landed)} with a second signal")
    print(f"exit codes: {dict(Counter(t.exit_code for t in trials))}; wrong exit code: "
          f"{sum(not t.code_ok for t in trials)}")
    print(f"trials that left files switched: {sum(bool(t.left) for t in trials)} "
          f"(files: {sum(len(t.left) for t in trials)}), every one named with its restore command: "
          f"{sum(bool(t.left) and not t.silent for t in trials)}; the command restored them: "
          f"{sum(t.restored_by_command is True for t in trials)}")
    silent = sum(len(t.silent) for t in trials)
    print(f"files left switched WITHOUT a message naming them: {silent} (in {sum(bool(t.silent) for t in trials)} "
          "trials)")
    return 1 if silent or any(not t.code_ok for t in trials) else 0


if __name__ == "__main__":
    sys.exit(main())
