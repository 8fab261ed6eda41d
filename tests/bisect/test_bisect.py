"""`envsnap bisect`: ddmin over real captured environment differences, real benchmark subprocesses."""
from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
from helpers.bench import base_env, bench_cmd, capture_pair, run_cli

from envsnap.bisect import (
    ddmin as ddmin_mod,
    deltas as deltas_mod,
    files as files_mod,
    journal as journal_mod,
    search as search_mod,
)
from envsnap.errors import EnvsnapError
from envsnap.redact import fingerprint

N = 32
NAMES = [f"PLANTED_T_V{i:02d}" for i in range(N)]
GOOD_TOKEN, BAD_TOKEN = "hf_GOODgoodGOODgoodGOOD1234", "hf_BADbadBADbadBADbad5678"


# --- the algorithm alone ---------------------------------------------------------------------

def counting_oracle(bad_when):
    seen = {}

    def test(key):
        if key not in seen:
            seen[key] = ddmin_mod.BAD if bad_when(set(key)) else ddmin_mod.GOOD
        return seen[key]
    return test, seen


def test_ddmin_one_cause_among_32_every_position_within_goal():
    goal = 2 * math.log2(N) + 4
    worst = 0
    for cause in NAMES:
        test, seen = counting_oracle(lambda s, c=cause: c in s)
        assert ddmin_mod.ddmin(NAMES, test) == [cause]
        worst = max(worst, len(seen) + 2)  # + the GOOD and BAD baselines
    assert worst <= goal, worst


def test_ddmin_two_interacting_causes_come_out_together():
    test, seen = counting_oracle(lambda s: {"PLANTED_T_V03", "PLANTED_T_V29"} <= s)
    assert ddmin_mod.ddmin(NAMES, test) == ["PLANTED_T_V03", "PLANTED_T_V29"]
    assert seen[("PLANTED_T_V03",)] == seen[("PLANTED_T_V29",)] == ddmin_mod.GOOD  # each alone is not enough


def test_ddmin_treats_unresolved_as_not_failing():
    def test(key):
        if len(key) == 1:
            return ddmin_mod.AMBIGUOUS  # each alone: half the slowdown
        return ddmin_mod.BAD if {"A", "B"} <= set(key) else ddmin_mod.GOOD
    assert ddmin_mod.ddmin(["A", "B", "C", "D"], test) == ["A", "B"]


# --- deltas ----------------------------------------------------------------------------------

def _snap(env, workers=None, probe=None, files=None, dirty=None):
    sections = {"env": {"status": "ok", "data": {"count": len(env), "vars": env}}}
    if workers is not None:
        sections["processes"] = {"status": "ok", "data": {"processes": {
            key: {"pid": 10, "environ": environ} for key, environ in workers.items()}}}
    if probe is not None:
        sections["probe"] = {"status": "ok", "data": {"records": {"rank0": {"env_at_init": probe}}}}
    if files is not None:
        sections["files"] = {"status": "ok", "data": {"entries": files}}
    if dirty is not None:
        sections["git"] = {"status": "ok", "data": {"repos": {"/src/sglang": {"dirty": dirty}}}}
    return {"schema_version": 1, "sections": sections, "runs": []}


def test_collect_deltas_env_workers_probe_redaction_and_unswitchable_parts():
    # Shapes as the snapshot format's section layouts (processes.*.environ, probe.records.*.env_at_init).
    good = _snap({"X": "1", "GONE": "yes", "SAME": "s", "HF_TOKEN": fingerprint(GOOD_TOKEN),
                  "API_KEY": fingerprint("k-good")},
                 workers={"scheduler_TP0": {"SAME": "s"}, "scheduler_TP1": {"SAME": "s"}},
                 probe={"NCCL_ALGO": "Ring"},
                 files={"/etc/a.conf": {"sha256": "aa", "size": 1}},
                 dirty={"python/sglang/srt/x.py": {"status": "M", "sha256": "11"}})
    bad = _snap({"X": "2", "NEW": "on", "SAME": "s", "HF_TOKEN": fingerprint(BAD_TOKEN),
                 "API_KEY": fingerprint("k-bad")},
                workers={"scheduler_TP0": {"SAME": "s", "NCCL_PROTO": "LL"},
                         "scheduler_TP1": {"SAME": "s", "NCCL_PROTO": "LL"}},
                probe={"NCCL_ALGO": "Tree"},
                files={"/etc/a.conf": {"sha256": "bb", "size": 1}},
                dirty={"python/sglang/srt/x.py": {"status": "M", "sha256": "22"}})
    # This machine still has BAD's API key (its fingerprint matches): that one can be re-applied.
    found = deltas_mod.collect_deltas(good, bad, environ={"API_KEY": "k-bad"})
    by_name = {d.name: d for d in found.applicable}
    assert sorted(by_name) == ["GONE", "NCCL_ALGO", "NCCL_PROTO", "NEW", "X"]
    assert by_name["X"].change == "changed" and by_name["NEW"].change == "set" and by_name["GONE"].change == "unset"
    assert by_name["NCCL_PROTO"].sources == ["workers.scheduler_TP0", "workers.scheduler_TP1"]
    assert by_name["NCCL_PROTO"].good is None and by_name["NCCL_PROTO"].bad == "LL"
    assert "only in what the workers saw" in by_name["NCCL_PROTO"].note
    assert by_name["NCCL_ALGO"].sources == ["probe.rank0.env_at_init"]
    na = {d.name: d for d in found.not_applicable}
    assert sorted(na) == ["API_KEY", "HF_TOKEN"]  # API_KEY: GOOD's value is unknown here
    assert "GOOD value is redacted" in na["API_KEY"].note
    assert "GOOD and BAD value is redacted" in na["HF_TOKEN"].note
    # Files held only as hashes (no content, not on this machine) are listed, with why, never searched.
    files = files_mod.collect_file_deltas(good, bad)
    assert files.applicable == [] and files.refused == []
    why = {d.name: d.note for d in files.not_applicable}
    assert sorted(why) == ["/etc/a.conf", "/src/sglang/python/sglang/srt/x.py"]
    assert why["/etc/a.conf"].startswith("GOOD's version is held only as a hash (the snapshot has no text of it)")
    assert why["/src/sglang/python/sglang/srt/x.py"] == ("/src/sglang is not on this machine (the snapshots were "
                                                         "taken elsewhere?)")
    # Both machine values known: the redacted delta becomes applicable with the real values.
    env = {"API_KEY": "k-good"}
    partial = deltas_mod.collect_deltas(_snap({"API_KEY": fingerprint("k-good")}), _snap({"API_KEY": "plain"}), env)
    assert [d.good_value for d in partial.applicable] == ["k-good"]


def test_config_env_overlays_good_then_switched_bad():
    deltas = [deltas_mod.Delta("A", "1", "2", good_value="1", bad_value="2"),
              deltas_mod.Delta("B", None, "x", good_value=None, bad_value="x"),
              deltas_mod.Delta("C", "c", None, good_value="c", bad_value=None)]
    base = {"A": "9", "B": "9", "C": "9", "KEEP": "k"}
    assert deltas_mod.config_env(base, deltas, []) == {"A": "1", "C": "c", "KEEP": "k"}
    assert deltas_mod.config_env(base, deltas, ["B", "C"]) == {"A": "1", "B": "x", "KEEP": "k"}


# --- journal ---------------------------------------------------------------------------------

HEADER = {"version": 1, "deltas_sha256": "d", "command_sha256": "c", "metric": "", "command": ["bench"]}


def test_journal_tolerates_truncated_last_line_and_checks_identity(tmp_path):
    path = tmp_path / "j.jsonl"
    journal = journal_mod.Journal(str(path), HEADER).open()
    journal.append_run({"config": [], "ok": True, "metrics": {"tok_s": 1.0}})
    journal.close()
    with open(path, "a") as handle:
        handle.write('{"config": ["A"], "ok": tr')  # killed mid-write
    reopened = journal_mod.Journal(str(path), HEADER).open()
    assert len(reopened.runs) == 1 and reopened.dropped_partial
    reopened.append_run({"config": ["A"], "ok": True, "metrics": {"tok_s": 2.0}})
    reopened.close()
    lines = path.read_text().splitlines()
    assert [json.loads(line)["type"] for line in lines] == ["header", "run", "run"]
    with pytest.raises(EnvsnapError, match="different bisect: the command is not the same"):
        journal_mod.Journal(str(path), dict(HEADER, command_sha256="other")).open()
    for text in ("hello\n", '{\n "schema_version": 1\n}', "no newline at all"):  # a mistyped --journal
        not_journal = tmp_path / "other.json"
        not_journal.write_text(text)
        with pytest.raises(EnvsnapError, match="not an envsnap bisect journal"):
            journal_mod.Journal(str(not_journal), HEADER).open()
        assert not_journal.read_text() == text  # not a byte changed


def test_journal_in_use_is_refused(tmp_path):
    first = journal_mod.Journal(str(tmp_path / "j.jsonl"), HEADER).open()
    try:
        with pytest.raises(EnvsnapError, match="in use"):
            journal_mod.Journal(str(tmp_path / "j.jsonl"), HEADER).open()
    finally:
        first.close()


def test_default_journal_next_to_bad(tmp_path):
    assert journal_mod.default_journal_path(str(tmp_path / "bad.json")) == str(tmp_path / "bad.bisect.jsonl")


# --- end to end: real captures, real CLI, real benchmark processes -----------------------------

@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    """GOOD/BAD from real `envsnap capture` runs: 32 variables g -> b, plus a changed secret."""
    tmp = tmp_path_factory.mktemp("pair")
    good = {name: "g" for name in NAMES}
    bad = {name: "b" for name in NAMES}
    good["HF_TOKEN"], bad["HF_TOKEN"] = GOOD_TOKEN, BAD_TOKEN
    return capture_pair(tmp, {}, good, bad)


def bisect(pair, tmp_path, *args, bench=(), fmt="json"):
    good, bad = pair
    env = base_env(HF_TOKEN=None, **{name: None for name in NAMES})
    result = run_cli("bisect", good, bad, "--journal", tmp_path / "j.jsonl", "--format", fmt, *args, "--",
                     *bench_cmd("env", "--counter", tmp_path / "calls", *bench), env=env)
    parsed = json.loads(result.stdout) if fmt == "json" and result.stdout.strip() else None
    return result, parsed


def calls(tmp_path):
    return int((tmp_path / "calls").read_text())


def test_one_cause_among_32(pair, tmp_path):
    result, out = bisect(pair, tmp_path, "--repeat", "1", bench=["--slow", "PLANTED_T_V17=b:0.5"])
    assert result.returncode == 0, result.stderr
    assert out["status"] == "isolated" and out["one_minimal"] is True
    assert [d["name"] for d in out["minimal"]] == ["PLANTED_T_V17"]
    assert out["minimal"][0]["good"] == "g" and out["minimal"][0]["bad"] == "b"
    assert out["configurations_run"] <= 2 * math.log2(N) + 4
    # No configuration ran twice, but GOOD and BAD run twice each whatever --repeat: their noise gates the search;
    # and once each again after every CHECK_EVERY configurations and before the answer (drift checks, none drifted).
    checks = out["baseline_checks"]
    assert len(checks) == math.ceil((out["configurations_run"] - 2) / search_mod.CHECK_EVERY)
    assert not any(c["drifted"] for c in checks)
    assert calls(tmp_path) == out["runs"]["total"] == out["configurations_run"] + 2 + 2 * len(checks)
    assert len({tuple(c["bad_deltas"]) for c in out["configurations"]}) == out["configurations_run"]
    assert out["good"]["median"] == 1000 and out["bad"]["median"] == 500 and out["change_pct"] == -50
    # the changed secret was captured redacted: listed, not applied, never shown in clear
    assert [d["name"] for d in out["deltas"]["not_applicable"]] == ["HF_TOKEN"]
    assert len(out["deltas"]["applied"]) == N
    assert GOOD_TOKEN not in result.stdout + result.stderr and BAD_TOKEN not in result.stdout + result.stderr
    assert "ETA" in result.stderr
    assert "GOOD and BAD first, 1 run each" in result.stderr  # not "1 runs"


def test_two_interacting_causes_text_output(pair, tmp_path):
    result, _ = bisect(pair, tmp_path, "--repeat", "1", fmt="text",
                       bench=["--together", "PLANTED_T_V03=b,PLANTED_T_V29=b:0.5"])
    assert result.returncode == 0, result.stderr
    assert "ISOLATED: PLANTED_T_V03, PLANTED_T_V29 (2 of 32 deltas) cause the change together" in result.stdout
    assert "minimal failure-inducing set (1-minimal):" in result.stdout
    assert "HF_TOKEN" in result.stdout and "cannot be re-applied" in result.stdout


def test_no_cause_stops_and_says_so(pair, tmp_path):
    result, out = bisect(pair, tmp_path, "--repeat", "3", bench=["--jitter", "0.05"])
    assert result.returncode == 1, result.stderr
    assert out["status"] == "not_distinguishable" and out["minimal"] == []
    assert "not distinguishable beyond noise" in out["message"]
    assert out["configurations_run"] == 2  # GOOD and BAD only: nothing guessed


def test_jitter_5_percent_still_isolates(pair, tmp_path):
    result, out = bisect(pair, tmp_path, "--repeat", "3",
                         bench=["--slow", "PLANTED_T_V11=b:0.7", "--jitter", "0.05"])
    assert result.returncode == 0, result.stderr
    assert [d["name"] for d in out["minimal"]] == ["PLANTED_T_V11"]
    assert all(c["n"] >= 3 for c in out["configurations"])


def test_benchmark_that_always_fails_is_exit_2(pair, tmp_path):
    result, _ = bisect(pair, tmp_path, "--repeat", "1", "--metric", "gflops")
    assert result.returncode == 2
    assert "every run of the GOOD configuration failed" in result.stderr and "'gflops' not in the output" in result.stderr
    # One error line, last; before it only the progress of the runs that were tried.
    lines = result.stderr.strip().splitlines()
    assert lines[-1].startswith("envsnap: error: ") and not [x for x in lines[:-1] if "error" in x]
    assert all(x.startswith("envsnap bisect: ") for x in lines[:-1])


def test_journal_for_another_command_is_refused(pair, tmp_path):
    first, _ = bisect(pair, tmp_path, "--repeat", "1", bench=["--slow", "PLANTED_T_V01=b:0.5"])
    assert first.returncode == 0
    again, _ = bisect(pair, tmp_path, "--repeat", "1", bench=["--slow", "PLANTED_T_V02=b:0.5"])
    assert again.returncode == 2 and "the command is not the same" in again.stderr
    # The refusal names the way out.
    assert f"pass --journal NEW_FILE to keep it, or remove {tmp_path / 'j.jsonl'}" in again.stderr
    same, out = bisect(pair, tmp_path, "--repeat", "1", bench=["--slow", "PLANTED_T_V01=b:0.5"])
    assert same.returncode == 0 and out["runs"]["new"] == 0  # everything replayed from the journal


# --- metric regexes stored by `envsnap run`, a failed first bisect ----------------

TEXT_BENCH = ("import os; print('speed: %s tok/s' % (500 if os.environ.get('PLANTED_T_SLOW') == '1' else 1000))")
REGEX = r"speed: ([0-9.]+) tok/s"


def _run_snapshot(path, slow: str, tmp_path):
    env = base_env(PLANTED_T_SLOW=slow, PLANTED_T_OTHER=slow + "x")
    result = run_cli("run", "-o", path, "--repeat", "1", "--metric", f"tok_s={REGEX}", "--",
                     sys.executable, "-c", TEXT_BENCH, env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr


@pytest.mark.slow  # two runs, two bisects
def test_bisect_reads_the_metric_with_the_regex_envsnap_run_stored(tmp_path):
    """The user's steps: `envsnap run --metric 'tok_s=REGEX'` twice, then `bisect --metric tok_s`."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    _run_snapshot(good, "0", tmp_path)
    _run_snapshot(bad, "1", tmp_path)
    env = base_env(PLANTED_T_SLOW=None, PLANTED_T_OTHER=None)
    for args in (["--metric", "tok_s"], []):
        result = run_cli("bisect", good, bad, *args, "--repeat", "1", "--journal", tmp_path / f"j{len(args)}.jsonl",
                         "--format", "json", "--", sys.executable, "-c", TEXT_BENCH, env=env, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert [d["name"] for d in out["minimal"]] == ["PLANTED_T_SLOW"] and out["metric"] == "tok_s"
        assert f"metric tok_s is read with the regex its runs were measured with: {REGEX}" in out["notes"]


@pytest.mark.slow  # three real bisects
def test_a_failed_first_bisect_does_not_block_the_corrected_one(tmp_path):
    """`--metric tok_s` on snapshots that store no regex fails (no run has the metric); the corrected
    `--metric tok_s=REGEX` replaces that journal (it completed no configuration) and says so."""
    good, bad = capture_pair(tmp_path, {}, {"PLANTED_T_SLOW": "0"}, {"PLANTED_T_SLOW": "1"})
    env = base_env(PLANTED_T_SLOW=None)
    journal = tmp_path / "bad.bisect.jsonl"
    first = run_cli("bisect", good, bad, "--metric", "tok_s", "--repeat", "2", "--", sys.executable, "-c",
                    TEXT_BENCH, env=env, cwd=tmp_path)
    assert first.returncode == 2 and "every run of the GOOD configuration failed" in first.stderr
    assert journal.exists()
    second = run_cli("bisect", good, bad, "--metric", f"tok_s={REGEX}", "--repeat", "2", "--format", "json", "--",
                     sys.executable, "-c", TEXT_BENCH, env=env, cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert (f"replaced journal {journal}: it belonged to a different bisect (the --metric is not the same "
            "(journal: 'tok_s')) that had completed no configuration") in second.stderr
    out = json.loads(second.stdout)
    assert [d["name"] for d in out["minimal"]] == ["PLANTED_T_SLOW"] and out["runs"]["from_journal"] == 0
    # A journal that did complete configurations is kept: a third, different bisect is refused.
    third = run_cli("bisect", good, bad, "--metric", "tok_s=speed: ([0-9]+)", "--repeat", "2", "--",
                    sys.executable, "-c", TEXT_BENCH, env=env, cwd=tmp_path)
    assert third.returncode == 2 and "the --metric is not the same" in third.stderr
    assert "pass --journal NEW_FILE to keep it, or remove" in third.stderr


@pytest.mark.slow  # two real bisects, one killed
def test_resume_after_sigkill_repeats_no_journaled_run(pair, tmp_path):
    good, bad = pair
    journal = tmp_path / "j.jsonl"
    argv = [sys.executable, "-m", "envsnap", "bisect", str(good), str(bad), "--repeat", "2", "--journal",
            str(journal), "--format", "json", "--",
            *bench_cmd("env", "--slow", "PLANTED_T_V20=b:0.5", "--sleep", "0.05", "--counter", tmp_path / "calls")]
    env = base_env(HF_TOKEN=None, **{name: None for name in NAMES})
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if journal.exists() and journal.read_text().count('"type": "run"') >= 7:
            break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)  # no chance to clean up: as a crash or a reboot
    proc.communicate()
    time.sleep(0.3)  # the benchmark in flight (its own session) finishes or not; either is fine
    before = [json.loads(line) for line in journal.read_text().splitlines() if line.endswith("}")]
    journaled = sum(1 for e in before if e.get("type") == "run")
    assert journaled >= 7
    calls_before = calls(tmp_path)

    resumed = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert [d["name"] for d in out["minimal"]] == ["PLANTED_T_V20"]
    assert out["runs"]["from_journal"] == journaled
    assert f"resuming from {journal}: {journaled} journaled runs" in resumed.stderr
    # no configuration has more runs than --repeat: nothing journaled was run again (GOOD and BAD have --repeat
    # more for each drift check, in the killed bisect and in the resumed one)
    runs = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    per_config = Counter(tuple(r["config"]) for r in runs)
    good_key, bad_key = (), tuple(sorted(NAMES))
    assert {n for key, n in per_config.items() if key not in (good_key, bad_key)} == {2}
    assert per_config[good_key] == per_config[bad_key] and per_config[good_key] % 2 == 0
    # the benchmark ran only for the runs that were not journaled yet
    assert calls(tmp_path) - calls_before == out["runs"]["new"] == out["runs"]["total"] - journaled


# --- a real benchmark: numpy matmul through OpenBLAS's real environment variables ---------------

INNOCENT = {
    "TOKENIZERS_PARALLELISM": ("false", "true"), "NCCL_DEBUG": (None, "INFO"), "HF_HOME": ("/data/hf", "/tmp/hf"),
    "CUDA_VISIBLE_DEVICES": ("0,1,2,3", "0,1,2,3,4,5,6,7"), "SGLANG_ENABLE_SPEC_V2": (None, "1"),
    "NCCL_PROTO": ("Simple", "LL"), "NCCL_ALGO": (None, "Ring"), "PYTORCH_CUDA_ALLOC_CONF": (None, "expandable_segments:True"),
    "CUDA_DEVICE_MAX_CONNECTIONS": ("8", "1"), "TORCH_NCCL_AVOID_RECORD_STREAMS": ("1", None),
    "LANGUAGE": ("en_US", "de_DE"), "TZ": ("UTC", "Europe/Berlin"), "WANDB_MODE": ("offline", None),
    "SGLANG_LOG_LEVEL": ("info", "debug"), "NVIDIA_TF32_OVERRIDE": (None, "0"), "MALLOC_ARENA_MAX": (None, "2"),
    "HF_HUB_OFFLINE": ("1", "0"), "PYTHONHASHSEED": ("0", "42"), "NCCL_IB_DISABLE": (None, "1"),
    "CUDA_MODULE_LOADING": ("LAZY", "EAGER"), "TRITON_CACHE_DIR": ("/a/triton", "/b/triton"),
    "NCCL_SOCKET_IFNAME": ("eth0", "ens5"),
}


def _real_pair(tmp_path, good_extra, bad_extra, common):
    good = {k: v[0] for k, v in INNOCENT.items()}
    bad = {k: v[1] for k, v in INNOCENT.items()}
    good.update(good_extra)
    bad.update(bad_extra)
    return capture_pair(tmp_path, common, good, bad)


def _real_bisect(tmp_path, good, bad, bench_args, common):
    env = base_env(**{k: None for k in INNOCENT}, OPENBLAS_NUM_THREADS=None, OMP_NUM_THREADS=None,
                   OPENBLAS_CORETYPE=None)
    env.update(common)  # what both sides share stays set while bisecting
    result = run_cli("bisect", good, bad, "--repeat", "3", "--format", "json", "--journal", tmp_path / "j.jsonl",
                     "--", *bench_cmd("matmul", *bench_args), env=env, timeout=600)
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def _gflops(coretype, dtype):
    env = base_env(**{k: None for k in INNOCENT}, OMP_NUM_THREADS=None, OPENBLAS_NUM_THREADS="1",
                   OPENBLAS_CORETYPE=coretype)
    proc = subprocess.run(bench_cmd("matmul", "--size", "300", "--reps", "7", "--dtype", dtype), env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["gflops"]


@pytest.fixture(scope="module")
def slow_kernel_dtype():
    """The matmul dtype whose OpenBLAS kernel OPENBLAS_CORETYPE=Prescott really slows on this CPU, measured.

    Which kernel is slower depends on the CPU, not only on its instruction sets: on an AMD EPYC VM (2026-12-07,
    OpenBLAS 0.3.31, numpy's scipy-openblas) the AVX2 "Haswell" float32 kernel did 12.9 GFLOP/s and the
    generic one Prescott selects 16.8 (faster), while in float64 they did 18.8 and 8.2. Elsewhere float32 was
    the ~4x slower one. So the test measures both and plants the one that is slower here."""
    for dtype in ("float32", "float64"):
        if _gflops("Prescott", dtype) < 0.55 * _gflops(None, dtype):
            return dtype
    pytest.skip("OPENBLAS_CORETYPE=Prescott slows neither a float32 nor a float64 matmul on this CPU")


@pytest.mark.slow
def test_real_matmul_openblas_kernel_variable_among_22_innocent(tmp_path, slow_kernel_dtype):
    """OPENBLAS_CORETYPE=Prescott makes OpenBLAS (numpy's BLAS here) use its generic SSE kernels instead
    of the AVX2 ones this CPU supports: real, single-threaded, 2-4x less work per CPU second in the dtype
    where that kernel is slower on this CPU (slow_kernel_dtype). Timed in CPU time with one thread on both
    sides, the effect does not depend on how many cores other processes leave free."""
    common = {"OPENBLAS_NUM_THREADS": "1"}
    good, bad = _real_pair(tmp_path, {"OPENBLAS_CORETYPE": None}, {"OPENBLAS_CORETYPE": "Prescott"}, common)
    result, out = _real_bisect(tmp_path, good, bad, ["--size", "300", "--reps", "7", "--dtype", slow_kernel_dtype],
                               common)
    assert result.returncode == 0, result.stderr + result.stdout
    assert [d["name"] for d in out["minimal"]] == ["OPENBLAS_CORETYPE"]
    assert len(out["deltas"]["applied"]) == len(INNOCENT) + 1
    assert out["bad"]["median"] < 0.6 * out["good"]["median"]


@pytest.mark.slow
def test_real_matmul_kernel_variable_beside_a_thread_variable_openblas_ignores(tmp_path, slow_kernel_dtype):
    """The cause changes together with a plausible decoy: BAD also raises OMP_NUM_THREADS 1 -> 2,
    but OpenBLAS reads OPENBLAS_NUM_THREADS first (pinned to 1 on both sides), so only the kernel
    choice (OPENBLAS_CORETYPE) slows it down. (This replaces a thread-count regression — 2
    OpenBLAS threads in GOOD, 1 in BAD — whose effect exists only while a second core is free:
    on a shared 2-core machine GOOD's runs mixed 41 and 66 GFLOP/s and the test failed. A
    thread-count cause cannot be measured deterministically on such a machine; a kernel
    cause timed in CPU time can.)"""
    common = {"OPENBLAS_NUM_THREADS": "1"}
    good, bad = _real_pair(tmp_path, {"OPENBLAS_CORETYPE": None, "OMP_NUM_THREADS": "1"},
                           {"OPENBLAS_CORETYPE": "Prescott", "OMP_NUM_THREADS": "2"}, common)
    result, out = _real_bisect(tmp_path, good, bad, ["--size", "300", "--reps", "7", "--dtype", slow_kernel_dtype],
                               common)
    assert result.returncode == 0, result.stderr + result.stdout
    assert [d["name"] for d in out["minimal"]] == ["OPENBLAS_CORETYPE"]
    assert {"OMP_NUM_THREADS", "OPENBLAS_CORETYPE"} <= {d["name"] for d in out["deltas"]["applied"]}
    assert out["one_minimal"] is True


def test_progress_says_what_runs_from_the_first_run_and_the_eta_once_one_is_timed(pair, tmp_path):
    """GOOD's runs used to pass in silence (~100 s in a real trial): now each run is announced before it
    starts, with the ETA from the moment one run of this bisect has been timed."""
    result, _ = bisect(pair, tmp_path, "--repeat", "2", bench=["--slow", "PLANTED_T_V17=b:0.5", "--sleep", "0.02"])
    assert result.returncode == 0, result.stderr
    lines = [line.removeprefix("envsnap bisect: ") for line in result.stderr.splitlines()]
    start = next(i for i, line in enumerate(lines) if line.startswith("searching 32 deltas (0 files, 32 variables)"))
    assert "GOOD and BAD first, 2 runs each" in lines[start] and "bench.py env" in lines[start]
    assert lines[start + 1] == "[1] GOOD (no delta): run 1 of 2"  # before any run ended: no ETA yet
    assert re.fullmatch(r"\[1\] GOOD \(no delta\): run 2 of 2, ~[0-9.e+-]+ s/run, ETA ~\d+ s", lines[start + 2])
    assert lines[start + 3].startswith("[2] BAD (all 32): run 1 of 2, ")
    assert lines[start + 5].startswith("[1] GOOD (no delta) -> median 1000")  # the configuration's outcome after
    assert any(re.match(r"\[3\] 16 BAD: .*: run 1 of 2, .*ETA", line) for line in lines)


def test_a_benchmark_that_cannot_run_is_refused_before_anything_is_written(pair, tmp_path):
    good, bad = pair
    result = run_cli("bisect", good, bad, "--journal", tmp_path / "j.jsonl", "--", "nosuchcommand-envsnap")
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "envsnap: error: cannot run the benchmark: nosuchcommand-envsnap: command not found (not on PATH)"]
    assert not (tmp_path / "j.jsonl").exists()


# --- drift: the machine's speed changes while bisect runs ----------------------------------------------

# A benchmark on a machine whose load falls (or rises) mid-bisect: after SWITCH runs everything it measures
# is multiplied by FACTOR. PLANTED_T_V17=b is the real cause (half the speed).
DRIFT_BENCH = """\
import json, os, pathlib, sys
counter, switch, factor = pathlib.Path(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
n = int(counter.read_text()) + 1 if counter.exists() else 1
counter.write_text(str(n))
speed = 1.0 if n <= switch else factor
slow = os.environ.get("PLANTED_T_V17") == "b"
print(json.dumps({"tok_s": speed * (500.0 if slow else 1000.0)}))
"""


def _drift_bisect(pair, tmp_path, switch, factor, *args):
    good, bad = pair
    script = tmp_path / "drift_bench.py"
    script.write_text(DRIFT_BENCH)
    env = base_env(HF_TOKEN=None, **{name: None for name in NAMES})
    result = run_cli("bisect", good, bad, "--journal", tmp_path / "j.jsonl", "--format", "json", "--repeat", "2",
                     "--no-guess", *args, "--", sys.executable, script, tmp_path / "calls", switch, factor, env=env)
    return result, json.loads(result.stdout) if result.stdout.strip() else None


def test_load_that_falls_after_the_baseline_is_noticed_and_the_real_cause_still_isolated(pair, tmp_path):
    """The field report: GOOD and BAD measured once under load, the load fell, the real cause then ran as fast
    as GOOD had and was classed good; 24 configurations, no result. Re-measuring GOOD and BAD notices it."""
    result, out = _drift_bisect(pair, tmp_path, 4, 2.0)  # after the 4 baseline runs, everything twice as fast
    assert result.returncode == 0, result.stderr
    assert out["status"] == "isolated" and [d["name"] for d in out["minimal"]] == ["PLANTED_T_V17"], out["message"]
    drifted = [c for c in out["baseline_checks"] if c["drifted"]]
    assert len(drifted) == 1 and drifted[0]["good_before"] == 1000 and drifted[0]["good"] == 2000
    assert any("the baseline drifted: GOOD 1000 -> 2000, BAD 500 -> 1000" in line for line in result.stderr.splitlines())
    assert any("drifted 1 time while bisect ran" in note for note in out["notes"])
    assert out["good"]["median"] == 2000 and out["bad"]["median"] == 1000  # the baseline the answer stands on


def test_a_drift_that_leaves_good_and_bad_inseparable_stops_with_a_clear_message(pair, tmp_path):
    steady, flat = tmp_path / "steady", tmp_path / "flat"
    steady.mkdir()
    flat.mkdir()
    result, out = _drift_bisect(pair, steady, 4, 1.0)
    assert result.returncode == 0 and out["status"] == "isolated"  # the same benchmark, steady: no drift
    assert out["baseline_checks"] and not any(c["drifted"] for c in out["baseline_checks"])
    result, out = _drift_bisect(pair, flat, 4, 0.0)
    # After the baseline every run reads 0: GOOD and BAD no longer separate.
    assert result.returncode == 1, result.stderr
    assert out["status"] == "drifted" and out["minimal"] == []
    assert out["message"].startswith("GOOD and BAD drifted while bisect ran (GOOD 1000 -> 0, BAD 500 -> 0")
    assert "no longer separate beyond noise" in out["message"]


def test_the_eta_follows_the_latest_run_times(tmp_path):
    journal = journal_mod.Journal(str(tmp_path / "j.jsonl"), HEADER).open()
    bisector = search_mod.Bisector([], ["bench"], journal, repeat=1)
    bisector.names = bisector.current = list(NAMES[:8])
    bisector.good_key, bisector.bad_key = (), tuple(NAMES[:8])
    bisector._config(())
    bisector._config(tuple(NAMES[:8]))
    bisector.configs[()].outcome = "good"
    # The machine was slow for the first runs (10 s each), then fast (1 s): the ETA's time per run follows.
    bisector.run_seconds = [10.0] * 6 + [1.0] * 5
    eta = bisector._eta()
    assert ", ~1 s/run, ETA ~" in eta, eta
    journal.close()
