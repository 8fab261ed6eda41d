"""`envsnap run` and `envsnap attach`: real CLI subprocesses running real benchmark scripts."""
from __future__ import annotations

import json
import os
import pty
import re
import signal
import subprocess
import sys
import time

import pytest
from helpers import TEST_DATA, interruptible, run_envsnap, run_envsnap_in_process
from helpers.bench import base_env, bench_cmd

from envsnap.errors import EnvsnapError
from envsnap.measure import runs
from envsnap.model import store

SECRET = "hf_ABCDEFGHIJKLMNOPQRSTUVWX"


def load(path):
    return store.load(str(path))


def test_run_records_measured_runs_after_warmups(tmp_path):
    out, counter = tmp_path / "s.json", tmp_path / "count"
    result = run_envsnap("run", "-o", out, "--repeat", "3", "--warmup", "1", "--label", "good", "--",
                         *bench_cmd("env", "--counter", counter, "--print", f"token in output {SECRET}",
                                    "--slow", f"NEVER_SET={SECRET}:0.5"))
    assert result.returncode == 0, result.stderr
    assert counter.read_text() == "4"  # 1 warm-up + 3 measured, and only the 3 are stored
    snap = load(out)
    assert snap["label"] == "good" and snap["sections"]["env"]["status"] == "ok"
    assert len(snap["runs"]) == 3
    for record in snap["runs"]:
        assert record["ok"] is True and record["source"] == "run" and record["exit_code"] == 0
        assert record["metrics"] == {"tok_s": 1000.0}
        assert record["parsers"] == ["json_line"]
        assert record["started"].endswith("Z") and record["duration_s"] > 0
        assert '{"tok_s": 1000.0}' in record["output_tail"]
    assert snap["run_session"]["warmup"] == 1 and snap["run_session"]["interrupted"] is False
    text = out.read_text()
    assert SECRET not in text  # neither in the recorded command nor in the output tail
    assert "redacted:" in " ".join(snap["runs"][0]["command"])
    assert f"wrote {out}: 3 runs (3 ok, 0 failed); tok_s median 1000" in result.stderr


def test_failed_run_is_recorded_not_counted(tmp_path):
    out, counter = tmp_path / "s.json", tmp_path / "count"
    result = run_envsnap("run", "-o", out, "--repeat", "3", "--",
                         *bench_cmd("env", "--counter", counter, "--fail-on-call", "2"))
    assert result.returncode == 0, result.stderr
    recs = load(out)["runs"]
    assert [r["ok"] for r in recs] == [True, False, True]
    assert recs[1]["exit_code"] == 3 and recs[1]["metrics"] == {}
    assert "planted failure" in recs[1]["error"] and "planted failure" in recs[1]["output_tail"]
    assert "3 runs (2 ok, 1 failed)" in result.stderr


def test_no_successful_run_exits_1_but_keeps_the_record(tmp_path):
    out = tmp_path / "s.json"
    result = run_envsnap("run", "-o", out, "--repeat", "2", "--", sys.executable, "-c", "print('no metric here')")
    assert result.returncode == 1
    recs = load(out)["runs"]
    assert len(recs) == 2 and not any(r["ok"] for r in recs)
    assert "no metric found" in recs[0]["error"]
    assert "no run succeeded" in result.stderr


def test_refuses_to_overwrite_before_running_anything(tmp_path):
    out, counter = tmp_path / "s.json", tmp_path / "count"
    out.write_text("precious")
    result = run_envsnap("run", "-o", out, "--", *bench_cmd("env", "--counter", counter))
    assert result.returncode == 2 and "--force" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not counter.exists() and out.read_text() == "precious"
    forced = run_envsnap("run", "-o", out, "--force", "--repeat", "1", "--", *bench_cmd("env", "--counter", counter))
    assert forced.returncode == 0, forced.stderr
    assert load(out)["runs"][0]["metrics"]["tok_s"] == 1000.0


def test_custom_metric_regex_and_direction_override(tmp_path):
    out = tmp_path / "s.json"
    result = run_envsnap("run", "-o", out, "--repeat", "1", "--metric", r"verify_ms=verify: ([0-9.]+) ms",
                         "--direction", "tok_s=lower", "--",
                         *bench_cmd("env", "--print", "verify: 31.5 ms", "--print", "verify: 29.25 ms"))
    assert result.returncode == 0, result.stderr
    snap = load(out)
    assert snap["runs"][0]["metrics"] == {"tok_s": 1000.0, "verify_ms": 29.25}
    assert snap["runs"][0]["parsers"] == ["json_line", "regex"]
    assert snap["metric_directions"] == {"tok_s": "lower"}
    assert snap["run_session"]["metric_regexes"] == {"verify_ms": r"verify: ([0-9.]+) ms"}


@pytest.mark.parametrize("args, fragment", [
    (["--metric", "x=[0-9]+"], "(group)"),
    (["--direction", "tok_s=sideways"], "NAME=higher, NAME=lower or NAME=none"),
    (["--repeat", "0"], "repeat"),
])
def test_bad_options_exit_2_one_line(tmp_path, args, fragment):
    result = run_envsnap("run", "-o", tmp_path / "s.json", *args, "--", *bench_cmd("env"))
    assert result.returncode == 2 and fragment in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "s.json").exists()


def test_decode_log_metrics_come_only_from_what_the_run_appended(tmp_path):
    out, log = tmp_path / "s.json", tmp_path / "server.log"
    # An older part of the server log (a previous, faster benchmark) must not count.
    old = (TEST_DATA / "runs" / "sglang-0.4.6-server-decode.log").read_text()
    log.write_text(old)
    new_lines = (TEST_DATA / "runs" / "sglang-0.5.5-server-decode.log").read_text().splitlines()
    args = []
    for line in new_lines:
        args += ["--log-line", line]
    result = run_envsnap("run", "-o", out, "--repeat", "2", "--log", log, "--",
                         *bench_cmd("env", "--append-log", log, *args))
    assert result.returncode == 0, result.stderr
    for record in load(out)["runs"]:
        assert record["metrics"]["gen_throughput"] == pytest.approx(60.02)
        assert record["metrics"]["accept_len"] == pytest.approx(2.1)
        assert "decode_log" in record["parsers"]


def test_bench_serving_output_file_appended_part(tmp_path):
    out, results = tmp_path / "s.json", tmp_path / "bench.jsonl"
    # bench_serving appends; an earlier line (another run's) is already there.
    subprocess.run(bench_cmd("sglang-serving", "--output-file", results, "--scale", "0.5"), check=True,
                   capture_output=True)
    result = run_envsnap("run", "-o", out, "--repeat", "1", "--",
                         *bench_cmd("sglang-serving", "--output-file", results))
    assert result.returncode == 0, result.stderr
    record = load(out)["runs"][0]
    assert record["metrics"]["output_throughput"] == pytest.approx(94.11015)  # the JSONL's full precision
    assert record["metrics"]["accept_length"] == pytest.approx(3.1904)
    assert record["parsers"] == ["bench_serving", "bench_serving_jsonl"]
    assert "running average" in record["note"]


def test_bench_serving_default_output_file_is_read_like_a_named_one(tmp_path):
    """`python -m sglang.bench_serving` without --output-file appends to `sglang_<MMDD>_<n>_<in>_<out>.jsonl`
    in its working directory (sglang 0.5.23 sglang/benchmark/serving.py:1927-1961; a stand-in with that exact
    naming runs here): `envsnap run` reads what each run appended there, at full precision, std_* and
    token counts included, and one name per metric."""
    work = tmp_path / "bench"
    work.mkdir()
    # Yesterday's result file of the same benchmark and one of another backend: never read.
    (work / "sglang_0101_32_1024_512.jsonl").write_text('{"output_throughput": 1.0, "median_ttft_ms": 1.0}\n')
    (work / "vllm_0101_32_1024_512.jsonl").write_text('{"output_throughput": 2.0, "median_ttft_ms": 1.0}\n')
    out = tmp_path / "s.json"
    command = [sys.executable, "-m", "sglang.bench_serving", "--backend", "sglang", "--dataset-name", "random",
               "--num-prompts", "32", "--random-input-len", "1024", "--random-output-len", "512"]
    result = run_envsnap("run", "-o", out, "--repeat", "2", "--", *command, cwd=work,
                         env={"PYTHONPATH": str(TEST_DATA / "workers" / "fakesglang")})
    assert result.returncode == 0, result.stderr
    written = sorted(p.name for p in work.glob("sglang_*.jsonl"))
    assert len(written) == 2 and written[0] == "sglang_0101_32_1024_512.jsonl", written  # it did write one
    for record in load(out)["runs"]:
        assert record["parsers"] == ["bench_serving", "bench_serving_jsonl"], record
        m = record["metrics"]
        assert m["output_throughput"] == pytest.approx(94.187609)  # the file's full precision, not 94.19
        assert m["std_itl_ms"] == pytest.approx(0.9312) and m["total_output_tokens"] == 16384
        assert m["max_output_tokens_per_s"] == 98.0 and m["max_concurrent_requests"] == 1
        assert not [name for name in m if name.startswith("peak_")], sorted(m)
        assert "bench_serving wrote" not in record.get("note", "")  # only this run's appended line was read


def _start_run(tmp_path, out, counter, repeat=5, sleep_from_call=1, sleep=0.4):
    """`envsnap run` of a benchmark whose runs take `sleep` seconds from the `sleep_from_call`-th on (the
    earlier ones no time), so that a signal sent once that run has started lands while it runs."""
    return subprocess.Popen(
        [sys.executable, "-m", "envsnap", "run", "-o", str(out), "--repeat", str(repeat), "--",
         *bench_cmd("env", "--counter", counter, "--sleep", sleep, "--sleep-from-call", sleep_from_call)],
        env=base_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=interruptible,
    )


def _wait_for_count(counter, value, proc, limit=60.0):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if counter.exists() and counter.read_text() == str(value):
            return
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    raise AssertionError("benchmark never reached the expected run")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=["INT", "TERM", "HUP"])
def test_an_interruption_keeps_completed_runs_marked_interrupted(tmp_path, signum):
    """Ctrl-C, SIGTERM (a CI job's timeout, `kill`) and SIGHUP (a closed terminal) alike: the runs
    completed are written, atomically, marked interrupted; one message says so; exit 130."""
    out, counter = tmp_path / "s.json", tmp_path / "count"
    # Three quick runs, then a fourth that takes long (envsnap kills it when interrupted).
    proc = _start_run(tmp_path, out, counter, sleep_from_call=4, sleep=30)
    _wait_for_count(counter, 4, proc)  # the fourth run started: three are complete
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    snap = load(out)
    assert len(snap["runs"]) == 3 and all(r["ok"] for r in snap["runs"])
    assert snap["run_session"]["interrupted"] is True and snap["run_session"]["completed"] == 3
    lines = err.strip().splitlines()
    assert "" not in lines, err  # no blank line before the message
    about = [line for line in lines if "interrupted" in line]
    assert about == [lines[-1]] and lines[-1] == (
        f"envsnap: error: interrupted; wrote {out} with the 3 runs completed (of 5; marked interrupted)"), err
    assert not [p for p in os.listdir(tmp_path) if p.startswith(".envsnap-")]  # no temp file left


def test_ctrl_c_before_any_run_completes_writes_nothing(tmp_path):
    out, counter = tmp_path / "s.json", tmp_path / "count"
    proc = _start_run(tmp_path, out, counter)
    _wait_for_count(counter, 1, proc)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert not out.exists()
    assert err.strip().splitlines()[-1] == "envsnap: error: interrupted before any run completed; nothing written"
    assert "\n\n" not in err


def test_progress_lines_without_a_terminal_and_stdout_unchanged(tmp_path):
    """A run's progress (number, metric, duration) reaches stderr redirected to a file or a CI log
    too; stdout (`-o -`) holds the snapshot alone."""
    result = run_envsnap("run", "-o", "-", "--repeat", "2", "--", *bench_cmd("env"), env=base_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["run_session"]["completed"] == 2
    progress = [line for line in result.stderr.splitlines() if line.startswith("envsnap run: run ")]
    assert [line.split(":")[1].strip() for line in progress] == ["run 1/2", "run 2/2"], result.stderr
    assert all(re.fullmatch(r"envsnap run: run \d/2: tok_s 1000 \(\d+\.\d s\)", line) for line in progress), progress


def test_one_run_is_one_run_not_one_runs(tmp_path):
    """Counts in the singular where there is one: the closing line of a single run, and attach's."""
    out = tmp_path / "s.json"
    result = run_envsnap("run", "-o", out, "--repeat", "1", "--", *bench_cmd("env"), env=base_env(), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"wrote {out}: 1 run (1 ok, 0 failed)" in result.stderr, result.stderr
    data = load(out)
    data["runs"] = []
    out.write_text(json.dumps(data))
    attached = run_envsnap("attach", out, "--metric", "tok_s=5")
    assert attached.returncode == 0 and "(1 run)" in attached.stderr, attached.stderr
    assert "1 runs" not in result.stderr + attached.stderr


def test_progress_lines_on_a_terminal(tmp_path):
    out = tmp_path / "s.json"
    master, slave = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "envsnap", "run", "-o", str(out), "--repeat", "2", "--",
                               *bench_cmd("env")], env=base_env(), stdout=subprocess.PIPE, stderr=slave,
                              timeout=120)
        os.close(slave)
        slave = None
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:
                break
            if not data:
                break
            chunks.append(data)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    text = b"".join(chunks).decode()
    assert proc.returncode == 0
    assert "envsnap run: run 1/2: tok_s 1000" in text and "envsnap run: run 2/2: tok_s 1000" in text


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    """One real capture, copied by each attach test (a capture takes a while on 2 shared cores)."""
    path = tmp_path_factory.mktemp("captured") / "snap.json"
    result = run_envsnap("capture", "-o", path, "--timeout", "20")
    assert result.returncode == 0, result.stderr
    return path.read_bytes()


def test_attach_adds_a_measurement_atomically(tmp_path, captured):
    snap_path = tmp_path / "bad.json"
    snap_path.write_bytes(captured)
    result = run_envsnap("attach", snap_path, "--metric", "verify_ms=29", "--metric", "accept_length=3.1",
                         "--note", f"nsys timeline, token {SECRET}", "--direction", "verify_ms=lower")
    assert result.returncode == 0, result.stderr
    snap = load(snap_path)
    record = snap["runs"][-1]
    assert record["source"] == "attach" and record["ok"] is True
    assert record["metrics"] == {"accept_length": 3.1, "verify_ms": 29.0}
    assert record["note"].startswith("nsys timeline") and SECRET not in snap_path.read_text()
    assert snap["metric_directions"] == {"verify_ms": "lower"}
    again = run_envsnap("attach", snap_path, "--metric", "verify_ms=28.5")
    assert again.returncode == 0 and len(load(snap_path)["runs"]) == 2


@pytest.mark.parametrize("args, fragment", [
    (["--metric", "verify_ms=abc"], "not a number"),
    (["--metric", "verify_ms=nan"], "finite"),
    (["--metric", "verify_ms"], "NAME=VALUE"),
])
def test_attach_bad_values_leave_the_file_untouched(tmp_path, captured, args, fragment):
    snap_path = tmp_path / "s.json"
    snap_path.write_bytes(captured)
    before = snap_path.read_bytes()
    result = run_envsnap("attach", snap_path, *args)
    assert result.returncode == 2 and fragment in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert snap_path.read_bytes() == before


def test_attach_to_missing_or_invalid_file(tmp_path):
    missing = run_envsnap("attach", tmp_path / "nope.json", "--metric", "x=1")
    assert missing.returncode == 2 and "no such file" in missing.stderr
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    result = run_envsnap("attach", broken, "--metric", "x=1")
    assert result.returncode == 2 and broken.read_text() == "{"


# --- library-level pieces ------------------------------------------------------------------

def test_result_files_follow_the_benchmarks_flags(tmp_path):
    cwd = str(tmp_path)
    assert runs.result_files(["python", "-m", "sglang.bench_serving", "--output-file", "a.jsonl"], cwd) == \
        [str(tmp_path / "a.jsonl")]
    assert runs.result_files(["python", "-m", "sglang.bench_one_batch_server", "--batch-size", "1"], cwd) == \
        [str(tmp_path / "result.jsonl")]  # its default --result-filename
    assert runs.result_files(["python", "-m", "sglang.bench_one_batch_server", "--result-filename=/x/r.jsonl"],
                             cwd) == ["/x/r.jsonl"]
    assert runs.result_files(["./bench.sh"], cwd) == []
    # Without --output-file, bench_serving's result file is named when it finishes: watched by pattern.
    assert runs.result_patterns(["python", "-m", "sglang.benchmark.serving", "--backend", "vllm"], cwd) == \
        [os.path.join(cwd, "vllm_[0-9][0-9][0-9][0-9]_*.jsonl")]
    assert runs.result_patterns(["python", "-m", "sglang.bench_serving", "--output-file", "a.jsonl"], cwd) == []
    assert runs.result_patterns(["./bench.sh"], cwd) == []


def test_append_watch_reads_only_new_bytes_and_survives_rotation(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("old line\n")
    watch = runs.AppendWatch([str(log), str(tmp_path / "later.log")])
    with open(log, "a") as handle:
        handle.write("new line\n")
    (tmp_path / "later.log").write_text("created during the run\n")
    assert watch.read() == {str(log): "new line\n", str(tmp_path / "later.log"): "created during the run\n"}
    rotated = runs.AppendWatch([str(log)])
    log.write_text("fresh\n")  # rewritten shorter: everything is new
    assert rotated.read() == {str(log): "fresh\n"}


def test_run_timeout_is_a_failed_run(tmp_path):
    record = runs.run_once(runs.RunOptions(command=bench_cmd("env", "--sleep", "5"), timeout=0.5))
    assert record["ok"] is False and "timeout" in record["error"] and record["metrics"] == {}


def test_required_metric_missing_is_a_failed_run():
    record = runs.run_once(runs.RunOptions(command=bench_cmd("env"), require_metric="gflops"))
    assert record["ok"] is False and "'gflops' not in the output (found: tok_s)" in record["error"]


def test_main_metric_prefers_named_then_throughput():
    assert runs.main_metric({"median_itl_ms": 1, "output_throughput": 2, "accept_length": 3}) == "output_throughput"
    assert runs.main_metric({"zeta": 1, "alpha_ms": 2}, preferred=["zeta"]) == "zeta"
    assert runs.main_metric({"b": 1, "a": 2}) == "a"
    assert runs.main_metric({}) is None


def test_parse_metric_values_and_directions():
    assert runs.parse_metric_values(["verify_ms=29", "x = 1e3"]) == {"verify_ms": 29.0, "x": 1000.0}
    assert runs.parse_direction_specs(["a=HIGHER", "b=lower"]) == {"a": "higher", "b": "lower"}
    with pytest.raises(EnvsnapError):
        runs.parse_metric_values(["x=inf"])


def test_default_repeat_is_enough_for_a_test_and_fewer_runs_are_said_plainly(tmp_path):
    out, counter = tmp_path / "s.json", tmp_path / "count"
    result = run_envsnap("run", "-o", out, "--", *bench_cmd("env", "--counter", counter))
    assert result.returncode == 0, result.stderr
    assert counter.read_text() == "5"  # 5 vs 5 fully separated runs: p = 0.008
    assert "too small to test" not in result.stderr
    snap = load(out)
    assert snap["run_session"]["repeat"] == 5
    # Every run says what it did; the snapshot (validated on load) keeps it.
    for record in snap["runs"]:
        usage = record["telemetry"]
        assert usage["cpu_user_s"] + usage["cpu_system_s"] > 0 and usage["cpu_set"]
        assert usage["gpu"].startswith(("nvml", "unavailable"))
    few = run_envsnap("run", "-o", tmp_path / "few.json", "--repeat", "3", "--", *bench_cmd("env"))
    assert few.returncode == 0
    assert "--repeat 3: n=3 vs 3 runs is too small to test: even fully separated runs give p=0.1 at best" \
        in few.stderr


def test_too_few_runs_is_said_before_the_runs(tmp_path):
    """The README's promise: said while it can still be changed, not after an hour of runs. The
    benchmark itself copies what envsnap has written to stderr so far when its first run starts."""
    err, seen, out = tmp_path / "stderr.txt", tmp_path / "seen.txt", tmp_path / "s.json"
    bench = (f"import os, shutil\nif not os.path.exists({str(seen)!r}): shutil.copyfile({str(err)!r}, {str(seen)!r})\n"
             "print('{\"tok_s\": 1}')")
    with open(err, "w") as handle:
        proc = subprocess.run([sys.executable, "-m", "envsnap", "run", "-o", str(out), "--repeat", "2", "--",
                               sys.executable, "-c", bench], stderr=handle, env=base_env(), timeout=120)
    assert proc.returncode == 0, err.read_text()
    before_runs = seen.read_text()
    assert "--repeat 2: n=2 vs 2 runs is too small to test" in before_runs
    assert "wrote" not in before_runs and err.read_text().count("too small to test") == 1


@pytest.fixture(scope="module")
def probed_venv(tmp_path_factory):
    from helpers.workers import make_venv

    from envsnap.probe import install as install_mod

    venv = make_venv(tmp_path_factory.mktemp("run-probe") / "venv", with_deps=True)
    install_mod.install(str(venv["site"]))
    return venv


def _run_probed(tmp_path, venv, name, repeat, warmup=0, **env_extra):
    probe_dir = tmp_path / f"probe-{name}"
    probe_dir.mkdir()
    command = [str(venv["python"]), bench_cmd("env")[1], "env", "--slow", "BENCH_KNOB=1:0.5"]
    env = base_env(**env_extra)
    env.pop("ENVSNAP_PROBE_DIR", None)  # run sets it for the command from --probe-dir
    out = tmp_path / f"{name}.json"
    result = run_envsnap("run", "-o", out, "--probe-dir", probe_dir, "--repeat", str(repeat), "--warmup", str(warmup),
                         "--", *command, env=env)
    assert result.returncode == 0, result.stderr
    return out


def test_probe_records_written_during_the_runs_join_the_snapshot(tmp_path, probed_venv):
    from envsnap.analysis.compare.env_reads import env_read_evidence

    snap = load(_run_probed(tmp_path, probed_venv, "s", repeat=2, warmup=1))
    probe = snap["sections"]["probe"]
    # Nothing was in the directory at capture time: every record came from the runs, and they are all the
    # command's own processes (its session), kept apart from any server's records. The first measured run's
    # processes are the compared ones; every run's are evidence.
    data = probe["data"]
    assert probe["status"] == "ok" and data["records_from_runs"] == 3 and data["compared_run"] == 1
    assert data["records"] == {}
    assert sorted(data["command_records"]) == ["1/python-0", "2/python-0", "warmup1/python-0"]
    assert [r["run"] for r in data["command_records"].values()] == [1, 2, "warmup 1"]
    every = list(data["command_records"].values())
    for record in every:
        assert record["env_reads"]["BENCH_KNOB"] == 1  # the benchmark's own read, counted once per process
        assert record["stages"] == ["start", "exit"] and record["reads_to_exit"] is True
    reads, tracked = env_read_evidence(snap)
    assert sorted(tracked) == sorted(data["command_records"])
    assert reads["BENCH_KNOB"] == {key: 1 for key in tracked}
    assert "NCCL_PROTO" not in reads  # nothing here reads it


def test_runs_with_the_probe_diff_by_what_changed_not_by_run_count_or_records_dir(tmp_path, probed_venv):
    good = _run_probed(tmp_path, probed_venv, "good", repeat=3)
    bad = _run_probed(tmp_path, probed_venv, "bad", repeat=2, BENCH_KNOB="1")
    result = run_envsnap_in_process("diff", good, bad, "--format", "json")
    assert result.returncode == 1, result.stderr
    keys = [d["key"] for d in json.loads(result.stdout)["differences"] if not d.get("volatile")]
    assert "workers.env.BENCH_KNOB" in keys and "env.BENCH_KNOB" in keys
    # Neither a third run's processes nor the records directory is a difference.
    assert not [k for k in keys if k.startswith("workers.python-") or "ENVSNAP_PROBE_DIR" in k], keys


def test_without_records_from_the_runs_the_capture_time_section_stays(tmp_path):
    probe_dir = tmp_path / "probe"
    probe_dir.mkdir()
    # A native command: `envsnap run` observes the Python processes it starts (probe/launch.py), not this one.
    result = run_envsnap("run", "-o", tmp_path / "s.json", "--probe-dir", probe_dir, "--repeat", "1", "--",
                         "/bin/sh", "-c", "echo '{\"tok_s\": 5}'")
    assert result.returncode == 0, result.stderr
    probe = load(tmp_path / "s.json")["sections"]["probe"]
    assert probe["status"] == "unavailable" and "no probe records" in probe["reason"]
