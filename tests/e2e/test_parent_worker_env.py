"""The headline case: the server's parent process shows a variable, its TP workers never saw it.

The engine.py-patch mistake: the launcher sets os.environ["NCCL_PROTO"] after it started the
schedulers. /proc/<parent>/environ (the environment at exec) never shows it; the probe's later
records of the parent (exit) and the children it started afterwards (the detokenizer) do; the
TP workers' env_at_init lacks it. `envsnap diff` must rank workers.parent_only.<var> first.

Unit tests on hand-built sections (the snapshot format's layouts, with the quirks of real captures:
the probe keys the launcher "sglang-main" where the process walk says "python-0", and the
detokenizer's probe record is "python-1" because it wrote before setproctitle); then end to end
with benchmarks/tp2_allreduce.py (spawned, titled workers, real gloo communicator) captured by
`envsnap run --pid --probe-dir` on both sides.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest
from helpers import REPO_ROOT, causes_by_key, has_factor, run_envsnap
from helpers.diff import runs, snap
from helpers.workers import clean_env, make_venv, start, stop

from envsnap.analysis import result as result_mod
from envsnap.analysis.compare import diff, views
from envsnap.analysis.rank import evidence as evidence_mod
from envsnap.render import text as text_mod

TUNING = {"NCCL_PROTO": "LL", "NCCL_ALGO": "Ring"}
BASE_ENV = {"PATH": "/usr/bin", "NCCL_NVLS_ENABLE": "0", "ENVSNAP_PROBE_DIR": "/tmp/probe"}
WHY = "set in the parent after the workers started: the TP workers never saw it"


def _server(parent_exec, parent_exit, detok, worker_env, nccl_env=None, probe=True, noenv=False):
    """processes (+ probe, + nccl) sections of a 2-rank server, shaped like a real capture of
    benchmarks/tp2_allreduce.py serve (see the module docstring for the key quirks)."""
    procs = {"python-0": {"pid": 100, "ppid": 1, "parent_key": None, "title": "python tp2_allreduce.py serve",
                          "cmdline": ["python", "tp2_allreduce.py", "serve"], "role": {"kind": "other"},
                          "status": "ok", "environ_status": "ok", "environ": dict(parent_exec)},
             "detokenizer": {"pid": 103, "ppid": 100, "parent_key": "python-0", "title": "sglang::detokenizer",
                             "cmdline": ["sglang::detokenizer"], "role": {"kind": "detokenizer"}, "status": "ok",
                             "environ_status": "ok" if noenv else "unreadable"}}
    if noenv:
        procs["detokenizer"]["environ"] = dict(detok)
    records = {"sglang-main": {"pid": 100, "ppid": 1, "parent_key": None, "role": {"kind": "main"},
                               "title": "python tp2_allreduce.py serve", "env_at_start": dict(parent_exec)},
               "python-1": {"pid": 103, "ppid": 100, "parent_key": "sglang-main", "role": {"kind": "other"},
                            "title": "python -c from multiprocessing.spawn import spawn_main",
                            "env_at_start": dict(detok)}}
    if parent_exit is not None:
        records["sglang-main"]["env_at_exit"] = dict(parent_exit)
    for rank in (0, 1):
        key = f"scheduler_TP{rank}"
        procs[key] = {"pid": 101 + rank, "ppid": 100, "parent_key": "python-0", "title": f"sglang::{key}",
                      "cmdline": [f"sglang::{key}"], "role": {"kind": "scheduler", "tp": rank}, "status": "ok",
                      "environ_status": "ok" if noenv else "unreadable"}
        if noenv:
            procs[key]["environ"] = dict(worker_env)
        records[key] = {"pid": 101 + rank, "ppid": 100, "parent_key": "sglang-main", "title": f"sglang::{key}",
                        "role": {"kind": "scheduler", "tp": rank}, "env_at_start": dict(worker_env),
                        "env_at_init": dict(worker_env), "init": {"backend": "nccl", "rank": rank, "world_size": 2}}
    out = {"processes": {"processes": procs, "roots": ["python-0"]}}
    if probe:
        out["probe"] = {"dir": "/tmp/probe", "records": records}
    if nccl_env is not None:
        # nccl_log.py's layout: per rank, the "NAME set by environment to VALUE" lines NCCL printed.
        out["nccl"] = {"logs": ["/tmp/nccl.log"], "version": "2.27.5",
                       "ranks": {str(r): {"env": dict(nccl_env), "channels": 24} for r in (0, 1)}}
    return out


def _good_bad(probe=True, noenv=False, exit_record=True, nccl=True, extra_bad_env=None):
    tuned = dict(BASE_ENV, **TUNING)
    good = snap("good", env=dict(BASE_ENV), runs=runs({"allreduce_mean_us": [20.1, 20.3, 19.9, 20.2, 20.0]}),
                **_server(tuned, tuned if exit_record else None, tuned, tuned,
                          nccl_env={"NCCL_NVLS_ENABLE": "0", **TUNING} if nccl else None, probe=probe, noenv=noenv))
    shell = dict(BASE_ENV, **(extra_bad_env or {}))
    bad = snap("bad", env=shell, runs=runs({"allreduce_mean_us": [31.0, 30.6, 31.4, 30.9, 31.2]}),
               **_server(BASE_ENV, tuned if exit_record else None, tuned, BASE_ENV,
                         nccl_env={"NCCL_NVLS_ENABLE": "0"} if nccl else None, probe=probe, noenv=noenv))
    # Innocent differences around the planted one.
    bad["sections"]["env"]["data"]["vars"].update({"TERM": "screen", "LANG": "C.UTF-8", "HISTSIZE": "5000"})
    return good, bad


def _by_key(result):
    return causes_by_key(result["causes"])


def test_parent_set_after_workers_started_ranks_first_with_per_process_evidence():
    good, bad = _good_bad()
    result = result_mod.analyze(good, bad)
    top = result["causes"][:2]
    assert {c["key"] for c in top} == {"workers.parent_only.NCCL_ALGO", "workers.parent_only.NCCL_PROTO"}
    proto = _by_key(result)["workers.parent_only.NCCL_PROTO"]
    assert proto["component"] == "communication"
    assert WHY in proto["why"] and proto["why"].startswith("NCCL_PROTO=LL ")
    assert (proto["good"], proto["bad"]) == (None, "server parent LL, TP workers unset")
    assert proto["score"] > _by_key(result)["workers.env.NCCL_PROTO"]["score"]
    evidence = "\n".join(proto["evidence"])
    # Which processes have it and from where (the two sources' names tied by pid)...
    assert "bad: sglang-main, the server's parent process, had NCCL_PROTO=LL: its own environment (probe at exit); " \
           "inherited by detokenizer, which it started (probe at start)" in evidence
    assert "sglang-main's environment at exec lacks it (/proc, as at exec, probe at start)" in evidence
    # ...which lack it, and the other side's workers...
    assert "bad: TP workers: scheduler_TP0, scheduler_TP1 never saw it (probe at init_process_group)" in evidence
    assert "good: TP workers: scheduler_TP0, scheduler_TP1 saw NCCL_PROTO=LL (probe at init_process_group)" in evidence
    # ...and NCCL's own per-rank lines, without calling a missing line "unset".
    assert "bad: not logged on ranks 0, 1" in evidence
    assert "good: 'NCCL_PROTO set by environment to LL' on ranks 0, 1" in evidence
    assert "a missing line is not proof" in evidence
    # The measurement warning, first.
    assert result["warnings"][0].startswith("NCCL_ALGO=Ring: the server's parent process (sglang-main) set it "
                                            "after its TP workers started (bad)")
    assert "measurements of that server ran without it" in result["warnings"][1]
    # The workers' own change points at the mechanism.
    assert any("workers.parent_only.NCCL_PROTO" in e for e in _by_key(result)["workers.env.NCCL_PROTO"]["evidence"])
    text = text_mod.render_diff(result, verbose=True)
    assert f"why: NCCL_ALGO=Ring {WHY}" in text or f"why: NCCL_PROTO=LL {WHY}" in text


def test_live_capture_without_exit_record_or_nccl_log():
    """A running server: the parent has no exit record yet; the detokenizer it started later is the witness."""
    good, bad = _good_bad(exit_record=False, nccl=False)
    result = result_mod.analyze(good, bad)
    assert result["causes"][0]["key"].startswith("workers.parent_only.")
    proto = _by_key(result)["workers.parent_only.NCCL_PROTO"]
    evidence = "\n".join(proto["evidence"])
    assert "had NCCL_PROTO=LL: inherited by detokenizer, which it started (probe at start)" in evidence
    assert "(probe at exit)" not in evidence
    assert "NCCL's own log: none captured on both sides" in evidence


def test_proc_only_evidence_with_spt_noenv():
    """No probe: with SPT_NOENV=1 /proc shows each process's exec-time environment; the detokenizer,
    exec'd after the parent's late change, carries it, the workers do not."""
    good, bad = _good_bad(probe=False, noenv=True, exit_record=False, nccl=False)
    comp = diff.compare(good, bad)
    keys = {d.key: d for d in comp.differences}
    assert keys["workers.parent_only.NCCL_PROTO"].bad == {"parent": "LL", "workers": None, "in": "server"}
    assert keys["workers.parent_only.NCCL_PROTO"].change == "added"
    lines = evidence_mod.parent_only_evidence(comp.bad, "NCCL_PROTO", "bad")
    assert lines[0] == ("bad: python-0, the server's parent process, had NCCL_PROTO=LL: inherited by detokenizer, "
                        "which it started (/proc, as at exec)")
    assert lines[2] == "bad: TP workers: scheduler_TP0, scheduler_TP1 never saw it (/proc, as at exec)"
    assert result_mod.analyze(good, bad)["causes"][0]["key"].startswith("workers.parent_only.")


def test_values_sglang_changes_on_purpose_are_not_flagged_but_removed_ones_are():
    """SGLang's _set_envs_and_config changes some variables for its workers before starting them
    (NCCL_CUMEM_ENABLE...): a different value in the workers is not 'never saw it'. A variable the
    parent had at exec and the workers lack altogether is flagged, worded as removed."""
    parent = dict(BASE_ENV, NCCL_CUMEM_ENABLE="1", NCCL_IB_DISABLE="1")
    worker = dict(BASE_ENV, NCCL_CUMEM_ENABLE="0")
    one = snap("one", env=dict(BASE_ENV), **_server(parent, None, worker, worker, probe=True))
    view = views.build_view(one, views.usable_sections([one]))
    flagged = {k for k in view.values["workers"] if k.startswith("workers.parent_only.")}
    assert flagged == {"workers.parent_only.NCCL_IB_DISABLE"}
    assert view.parent_only_info["NCCL_IB_DISABLE"]["late"] is False
    other = snap("two", env=dict(BASE_ENV), **_server(parent, None, worker, dict(worker, NCCL_IB_DISABLE="1")))
    cause = _by_key(result_mod.analyze(other, one))["workers.parent_only.NCCL_IB_DISABLE"]
    assert "removed before they started" in cause["why"]


def test_both_sides_flagged_is_a_warning_not_a_difference_and_shell_is_merged():
    _, bad = _good_bad(extra_bad_env={"NCCL_PROTO": "LL"})
    comp = diff.compare(bad, json.loads(json.dumps(bad)))
    assert comp.differences == []
    assert any(w.startswith("NCCL_PROTO=LL: the server's parent process (sglang-main) set it after its TP workers "
                            "started (both snapshots)") for w in comp.warnings)
    # The shell exporting it too is one key (the server's evidence is the stronger), with a note.
    assert not any("set in the shell" in w and "NCCL_PROTO" in w for w in comp.warnings)
    assert "bad: the capturing shell has NCCL_PROTO=LL too" in evidence_mod.parent_only_evidence(comp.bad, "NCCL_PROTO", "bad")


def test_parent_only_when_neither_sides_workers_saw_it_is_demoted():
    good, bad = _good_bad()
    # good's workers never saw it either (and its parent did not have it): no workers.env change.
    for key in ("scheduler_TP0", "scheduler_TP1"):
        for field in ("env_at_start", "env_at_init"):
            good["sections"]["probe"]["data"]["records"][key][field] = dict(BASE_ENV)
    good["sections"]["processes"]["data"]["processes"]["python-0"]["environ"] = dict(BASE_ENV)
    for key in ("sglang-main", "python-1"):
        good["sections"]["probe"]["data"]["records"][key] = dict(
            good["sections"]["probe"]["data"]["records"][key], env_at_start=dict(BASE_ENV))
        good["sections"]["probe"]["data"]["records"][key].pop("env_at_exit", None)
    result = result_mod.analyze(good, bad)
    proto = _by_key(result)["workers.parent_only.NCCL_PROTO"]
    assert "measurement trap" in proto["why"]
    assert "workers.env.NCCL_PROTO" not in _by_key(result)


# ---------------------------------------------------------------- end to end, real processes

TP2 = REPO_ROOT / "benchmarks" / "tp2_allreduce.py"
BENCH_ARGS = ("--sizes", "4096,65536", "--iters", "5", "--warmup", "1")


@pytest.mark.slow
def test_tp2_good_vs_bad_real_capture_ranks_parent_only_first(tmp_path):
    pytest.importorskip("torch")
    pytest.importorskip("setproctitle")
    venv = make_venv(tmp_path / "venv")
    installed = run_envsnap("probe", "install", "--site", venv["site"], cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    servers = {}
    try:
        for mode in ("good", "bad"):  # both start at once: their start-up (torch imports) overlaps
            side = tmp_path / mode
            (side / "probe").mkdir(parents=True)
            env = clean_env(ENVSNAP_PROBE_DIR=str(side / "probe"), GLOO_SOCKET_IFNAME="lo")
            for name in TUNING:
                env.pop(name, None)
            servers[mode] = start([venv["python"], TP2, "serve", "--backend", "gloo", "--mode", mode,
                                   "--socket", side / "tp2.sock", "--ready-file", side / "ready.json",
                                   "--idle-exit", "120"], env=env)
        deadline = time.monotonic() + 150
        for mode, proc in servers.items():
            while not (tmp_path / mode / "ready.json").exists():
                assert proc.poll() is None, proc.stderr.read()[-2000:]
                assert time.monotonic() < deadline, f"{mode} server never became ready"
                time.sleep(0.1)
        for mode, proc in servers.items():
            side = tmp_path / mode
            captured = run_envsnap("run", "-o", tmp_path / f"{mode}.json", "--label", f"tp2-{mode}",
                                   "--pid", proc.pid, "--probe-dir", side / "probe", "--timeout", "60",
                                   "--repeat", "3", "--warmup", "0", "--", sys.executable, TP2, "bench",
                                   "--socket", side / "tp2.sock", *BENCH_ARGS, cwd=tmp_path, timeout=180)
            assert captured.returncode == 0, captured.stderr
    finally:
        codes = {}
        for mode, proc in servers.items():
            subprocess.run([sys.executable, str(TP2), "bench", "--socket", str(tmp_path / mode / "tp2.sock"),
                            "--stop", "--timeout", "10"], capture_output=True, timeout=30)
            codes[mode] = stop(proc, timeout=20)
    assert codes == {"good": 0, "bad": 0}

    # After the stop, BAD's probe directory also holds the parent's exit record: the late variable is there.
    post = run_envsnap("capture", "-o", tmp_path / "bad-post.json", "--probe-dir", tmp_path / "bad" / "probe",
                       "--timeout", "60", cwd=tmp_path)
    assert post.returncode == 0, post.stderr
    post_snap = json.loads((tmp_path / "bad-post.json").read_text())
    view = views.build_view(post_snap, views.usable_sections([post_snap]))
    assert view.values["workers"]["workers.parent_only.NCCL_PROTO"] == {"parent": "LL", "workers": None,
                                                                         "in": "server"}
    assert ("sglang-main", "probe at exit") in view.parent_only_info["NCCL_PROTO"]["has"]

    bad = json.loads((tmp_path / "bad.json").read_text())
    records = bad["sections"]["probe"]["data"]["records"]
    assert "NCCL_PROTO" not in records["scheduler_TP0"]["env_at_init"]  # what the real workers saw
    proc = run_envsnap("diff", tmp_path / "good.json", tmp_path / "bad.json", "--format", "json",
                       "--metric", "allreduce_mean_us", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    # gloo on a box without a GPU: NCCL is out of context, so the server's own `--mode good|bad` flag (how this
    # test plants the late export) may rank with or above them; of the variables, the parent-only ones lead.
    # What acted, over names: the --mode flag the server was started with acted; NCCL's settings on a box without
    # a GPU cannot have acted, so they rank below the flags (the paths and sockets only name resources: could act).
    keys = [c["key"] for c in result["causes"]]
    assert keys[0] == "workers.sglang-main.flag.--mode", keys[:5]
    top = [c for c in result["causes"] if ".flag." not in c["key"]][:2]
    assert all(c["reach"]["tier"] == "cannot" for c in top), [c["reach"] for c in top]
    assert {c["key"] for c in top} == {"workers.parent_only.NCCL_ALGO", "workers.parent_only.NCCL_PROTO"}, keys[:5]
    assert all(has_factor(c, "out_of_context", "no GPU captured") for c in top)
    proto = next(c for c in top if c["key"] == "workers.parent_only.NCCL_PROTO")
    assert WHY in proto["why"] and proto["bad"] == "server parent LL, TP workers unset"
    evidence = "\n".join(proto["evidence"])
    assert "inherited by detokenizer, which it started (probe at start)" in evidence
    assert "bad: TP workers: scheduler_TP0, scheduler_TP1 never saw it (probe at init_process_group)" in evidence
    assert "good: TP workers: scheduler_TP0, scheduler_TP1 saw NCCL_PROTO=LL (probe at init_process_group)" in evidence
    assert "NCCL's own log: none captured" in evidence  # gloo: the probe's records are the evidence
    assert "the server's parent process" in result["warnings"][0]
    text = run_envsnap("diff", tmp_path / "good.json", tmp_path / "bad.json", "-v", cwd=tmp_path)
    assert text.returncode == 1 and WHY in text.stdout
    (tmp_path / "diff.txt").write_text(text.stdout)  # left for a human to read (pytest --basetemp)
