"""Test helpers: paths of the repository and its test data, and the envsnap CLI as a subprocess.

Helper modules beside this one build real things (git repos, venvs, process trees, benchmarks);
fixtures live in tests/conftest.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
TEST_DATA = REPO_ROOT / "tests" / "data"


def run_envsnap(*args, env=None, cwd=None, timeout=120, input_text=None):
    """Run the real CLI in a subprocess: exit codes and stderr are part of what we test."""
    full_env = dict(os.environ)
    full_env.pop("ENVSNAP_DEBUG", None)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "envsnap", *map(str, args)],
        capture_output=True, text=True, env=full_env, cwd=cwd, timeout=timeout, input=input_text,
    )


def load_json(path):
    return json.loads(Path(path).read_text())


def interruptible():
    """preexec_fn for a child a test will send Ctrl-C (SIGINT): the default disposition, whatever the
    test run inherited. A shell starts a background job (`cmd &`) with SIGINT ignored, and a Python
    started with SIGINT ignored keeps ignoring it (no KeyboardInterrupt): a suite launched in the
    background would otherwise see every Ctrl-C test's child run on to the end."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def causes_by_key(causes):
    """{key: cause} of a ranked list, with every folded key too (one change, one cause: analysis/rank/fold.py):
    a folded key maps to its own face (its why, evidence and factors), with "folded_into" naming the cause that
    carries it and "head" that cause."""
    out = {}
    for cause in causes:
        out[cause["key"]] = cause
        for member in cause.get("folded") or []:
            out[member["key"]] = dict(member, folded_into=cause["key"], head=cause, rank=cause["rank"])
    return out


def factors_of(cause, name):
    """The entries of a ranked cause's `factors` (its structured evidence: factor, value, why) named `name`."""
    return [f for f in cause.get("factors") or [] if f.get("factor") == name]


def has_factor(cause, name, observed=""):
    """Whether the factor `name` applied to the cause, with `observed` in what it says it observed: tests assert on
    the factor's name and its observation, never on its value (weights are fitted: analysis/rank/weights.json)."""
    return any(observed in str(f.get("why") or "") for f in factors_of(cause, name))
