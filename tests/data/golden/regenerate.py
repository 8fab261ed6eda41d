"""Write the golden outputs tests/e2e/test_golden.py compares against.

    .venv/bin/python tests/data/golden/regenerate.py

Run it only when a change of output is intended, and read `git diff tests/data/golden` before
committing: every changed line is a change users will see. Inputs: every ordered pair of the shipped
snapshots that are meant to be compared (snapshots/*-good.json against its -bad.json, both ways),
and the report tests' hand-built pair (tests/helpers/browser.eagle3_pair), whose builder is
deterministic. Outputs: `envsnap diff --format json` and the text of `envsnap diff -v`.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
# The report tests' pair, written by their own builder in a child run from tests/, where `python -c` finds
# the package `helpers` first (as pytest's `pythonpath = tests` gives it to the tests): no sys.path edit.
WRITE_HAND_BUILT = ("import sys; from helpers.browser import eagle3_pair, write_pair; "
                    "write_pair(sys.argv[1], *eagle3_pair())")


def cases(workdir: Path):
    """(name, good, bad, directory they are named from) of every compared pair: relative names, so the
    outputs (which print the file names) are the same on every machine."""
    shipped = sorted(p for p in (REPO / "snapshots").glob("*-good.json"))
    for good in shipped:
        bad = good.with_name(good.name.replace("-good.json", "-bad.json"))
        if bad.exists():
            stem = good.name[: -len("-good.json")]
            yield stem, good.relative_to(REPO), bad.relative_to(REPO), REPO
            yield f"{stem}-reversed", bad.relative_to(REPO), good.relative_to(REPO), REPO
    subprocess.run([sys.executable, "-c", WRITE_HAND_BUILT, str(workdir)], cwd=REPO / "tests", check=True,
                   env=dict(os.environ, PYTHONPATH=str(REPO)))
    yield "hand-built-eagle3", Path("good.json"), Path("bad.json"), workdir


def outputs(good, bad, cwd):
    """{suffix: bytes} of the outputs compared, from the real CLI run in `cwd`."""
    env = dict(os.environ, XDG_CACHE_HOME=tempfile.mkdtemp(), TZ="UTC")
    env.pop("ENVSNAP_DEBUG", None)
    run = lambda *args: subprocess.run([sys.executable, "-m", "envsnap", "diff", str(good), str(bad), *args],  # noqa: E731
                                       cwd=cwd, env=dict(env, PYTHONPATH=str(REPO)), capture_output=True)
    as_json, text = run("--format", "json", "--no-pip-cache"), run("-v", "--no-pip-cache")
    for proc in (as_json, text):
        if proc.returncode not in (0, 1):
            raise SystemExit(f"envsnap diff {good} {bad} failed: {proc.stderr.decode()}")
    json.loads(as_json.stdout)
    return {".json": as_json.stdout, ".txt": text.stdout}


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for name, good, bad, cwd in cases(Path(tmp)):
            for suffix, data in outputs(good, bad, cwd).items():
                (HERE / f"{name}{suffix}").write_bytes(data)
                print("wrote", f"{name}{suffix}", len(data), "bytes")


if __name__ == "__main__":
    main()
