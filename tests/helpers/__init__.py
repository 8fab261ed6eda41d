"""Test helpers: paths of the repository and its test data, and the envsnap CLI as a subprocess (or in process).

Helper modules beside this one build real things (git repos, venvs, process trees, benchmarks);
fixtures live in tests/conftest.py.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
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


def run_envsnap_in_process(*args, env=None, cwd=None, timeout=None, input_text=None):
    """The same CLI as run_envsnap, through its own entry point called with argv (envsnap.cli.main(argv),
    which another program may call: it leaves by SystemExit), in this process: the same exit status,
    stdout and stderr (decoded as run_envsnap's text=True does) with the same environment (`env` on top of
    os.environ, ENVSNAP_DEBUG unset) and working directory, without a fresh interpreter's start-up and
    imports (0.1-0.4 s a call on 2 shared cores, against ~10 ms for a small pair). For what a command says
    and writes (diff, show, report, rank, merge, attach); what only a process shows (signals, a closed
    pipe, the exit without teardown, what a command imports) stays with run_envsnap, and so does at least
    one test of each command. `timeout` is accepted for the same signature, not enforced."""
    import io
    import locale

    from envsnap.cli import main

    encoding = locale.getpreferredencoding(False)
    out, err = io.BytesIO(), io.BytesIO()
    streams = (io.TextIOWrapper(io.BytesIO((input_text or "").encode(encoding)), encoding=encoding),
               io.TextIOWrapper(out, encoding=encoding, write_through=True),
               io.TextIOWrapper(err, encoding=encoding, errors="backslashreplace", write_through=True))
    saved_streams, saved_env, saved_cwd = (sys.stdin, sys.stdout, sys.stderr), dict(os.environ), os.getcwd()
    os.environ.pop("ENVSNAP_DEBUG", None)
    for key, value in (env or {}).items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    if os.environ.get("TZ") != saved_env.get("TZ"):
        time.tzset()
    sys.stdin, sys.stdout, sys.stderr = streams
    try:
        if cwd is not None:
            os.chdir(cwd)
        try:
            main([str(arg) for arg in args])
            code = 0
        except SystemExit as exc:
            code = exc.code
            if code is None:
                code = 0
            elif not isinstance(code, int):  # sys.exit("message"): the interpreter prints it, status 1
                print(code, file=sys.stderr)
                code = 1
        for stream in streams[1:]:
            stream.flush()
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        for key in set(os.environ) - set(saved_env):
            del os.environ[key]
        os.environ.update(saved_env)
        time.tzset()

    def text(data: bytes) -> str:  # universal newlines, as subprocess's text=True reads a pipe
        return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(["envsnap", *map(str, args)], code, text(out.getvalue()), text(err.getvalue()))


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
