"""A launcher that changes its environment in-process, on real processes with the real probe.

The user's steps (README "The investigation in five commands", with a launcher that is not SGLang):
`envsnap probe install --python VENV/bin/python` once; start the launcher with a fresh
ENVSNAP_PROBE_DIR per launch; it sets NCCL_ALGO in os.environ after start-up (from its config
file: Ring on the good day, Tree on the bad) and never calls init_process_group nor sets a title;
then `envsnap capture --probe-dir DIR` for each launch, `show -v`, and `diff`.

The two launches also differ the way two real launches do: a fresh probe directory, a fresh
PROMETHEUS_MULTIPROC_DIR (SGLang --enable-metrics makes one per launch), and the shell's own
bookkeeping (`_`, SHLVL, OLDPWD, PWD): none of that may be ranked as a cause.
"""
from __future__ import annotations

import json
import tempfile

import pytest
from helpers import run_envsnap
from helpers.workers import clean_env, make_venv, start, stop, wait_line

pytestmark = pytest.mark.slow

LAUNCHER = '''\
import os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "algo.conf")) as config:
    os.environ["NCCL_ALGO"] = config.read().strip()  # in-process, after start-up
print("ready", flush=True)
sys.stdin.read()  # serve until told to stop
'''
BOOKKEEPING = ("_", "SHLVL", "OLDPWD", "PWD", "PROMETHEUS_MULTIPROC_DIR")


@pytest.fixture(scope="module")
def launches(tmp_path_factory):
    base = tmp_path_factory.mktemp("launcher")
    venv = make_venv(base / "venv", with_deps=False)
    installed = run_envsnap("probe", "install", "--python", venv["python"])
    assert installed.returncode == 0, installed.stderr
    app = base / "app"
    app.mkdir()
    (app / "launch.py").write_text(LAUNCHER)
    snaps = {}
    for label, algo, shell in (("good", "Ring", {"_": "/usr/bin/python3", "SHLVL": "1", "OLDPWD": "/root"}),
                               ("bad", "Tree", {"_": "/usr/bin/env", "SHLVL": "3", "OLDPWD": "/srv/x"})):
        (app / "algo.conf").write_text(algo + "\n")
        probe_dir = base / f"probe-{label}"  # a fresh directory per launch, as the README advises
        per_launch = dict(shell, PWD=str(base / label), ENVSNAP_PROBE_DIR=str(probe_dir),
                          PROMETHEUS_MULTIPROC_DIR=tempfile.mkdtemp(prefix="prom-", dir=base))
        proc = start([venv["python"], app / "launch.py"], env=clean_env(**per_launch), cwd=str(app))
        try:
            wait_line(proc, "ready")
        finally:
            assert stop(proc) == 0  # a clean exit: the probe writes its exit record
        out = base / f"{label}.json"
        captured = run_envsnap("capture", "-o", out, "--label", label, "--probe-dir", probe_dir, "--timeout", "60",
                               env=per_launch, cwd=str(app))
        assert captured.returncode == 0, captured.stderr
        snaps[label] = out
    yield snaps
    run_envsnap("probe", "uninstall", "--python", venv["python"])


def test_show_reports_the_in_process_change_of_an_untitled_process(launches):
    shown = run_envsnap("show", "-v", launches["good"])
    assert shown.returncode == 0, shown.stderr
    lines = [line.strip() for line in shown.stdout.splitlines()]
    assert any(line.startswith("python-0: pid ") and "stages start,exit" in line for line in lines), shown.stdout
    assert "set in-process, start \u2192 exit: NCCL_ALGO: unset \u2192 Ring" in lines, shown.stdout
    assert any("1 changed their environment in-process" in line for line in lines), shown.stdout


def test_diff_ranks_the_in_process_change_first(launches):
    result = run_envsnap("diff", launches["good"], launches["bad"], "--format", "json")
    assert result.returncode == 1, result.stderr
    causes = json.loads(result.stdout)["causes"]
    first = causes[0]
    assert first["key"] == "workers.python-0.changed_in_process.NCCL_ALGO", [c["key"] for c in causes[:5]]
    assert (first["good"], first["bad"]) == ("Ring in-process (was unset at start)", "Tree in-process (was unset at start)")
    assert first["component"] == "communication" and "set in-process by python-0" in first["why"]
    text = run_envsnap("diff", launches["good"], launches["bad"])
    assert ("workers.python-0.changed_in_process.NCCL_ALGO  Ring in-process (was unset at start) \u2192 "
            "Tree in-process (was unset at start)") in text.stdout, text.stdout


def test_envsnap_and_shell_bookkeeping_are_never_causes(launches):
    result = json.loads(run_envsnap("diff", launches["good"], launches["bad"], "--format", "json").stdout)
    names = {cause["key"].rsplit(".", 1)[-1] for cause in result["causes"]}
    assert not [n for n in names if n in BOOKKEEPING or n.startswith("ENVSNAP_")], sorted(names)
    # Still there for whoever looks: --all lists them, as volatile.
    everything = json.loads(run_envsnap("diff", launches["good"], launches["bad"], "--all", "--format", "json").stdout)
    volatile = {d["key"].rsplit(".", 1)[-1] for d in everything["differences"] if d["volatile"]}
    assert {"ENVSNAP_PROBE_DIR", "SHLVL", "OLDPWD", "PWD", "_", "PROMETHEUS_MULTIPROC_DIR"} <= volatile, volatile
