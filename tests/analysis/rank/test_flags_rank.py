"""Command-line flags as causes (analysis/rank/kinds/command_line.py), on exact minimal snapshots: a flag's words name the part
of the stack it acts on, the mechanism then moves it like any cause; SGLang's own flags keep SGLang's rules and defer
to the server argument read from the running server; bookkeeping (ports) stays at the bottom; the benchmark
command's flags are causes of their own, a thread count judged by the runs' peak threads. The end-to-end planted
flag on real processes is tests/e2e/test_planted_flags.py."""
from __future__ import annotations

import copy

import pytest
from helpers import causes_by_key, has_factor
from helpers.diff import runs, section, snap

from envsnap.analysis import knowledge, result as result_mod
from envsnap.analysis.compare import diff as diff_mod
from envsnap.analysis.knowledge.flags import flag_word
from envsnap.analysis.rank import context as context_mod
from envsnap.analysis.rank.groups import commands_differ

NO_GPU = section({}, status="unavailable")
NO_GPU["reason"] = "NVML: NVML Shared Library Not Found"
ONE_GPU = section({"count": 1, "gpus": {"0": {"name": "NVIDIA H200"}}})
FAST, SLOW = {"tok_s": [100, 101, 99, 100, 102]}, {"tok_s": [60, 61, 59, 60, 62]}
LAUNCH_BOUND = {"kind": "launch_bound", "line": "GPU idle 72% (GOOD: 3%): launch/CPU bound; CPU time per run unchanged",
                "factors": {}, "components": {"matches": [knowledge.GRAPHS, knowledge.CPU_HOST],
                                              "contradicts": [knowledge.KERNELS]}}


def _server(argv):
    return {"processes": {"processes": {"python-0": {"pid": 10, "title": " ".join(argv), "cmdline": list(argv),
                                                     "status": "ok", "environ_status": "ok", "environ": {}}},
                          "roots": ["python-0"]}}


def _pair(good_argv, bad_argv, **sections):
    good = snap("good", runs=runs(FAST), **_server(good_argv), **copy.deepcopy(sections))
    bad = snap("bad", runs=runs(SLOW), **_server(bad_argv), **copy.deepcopy(sections))
    return good, bad


def _ranked(good, bad, mechanism=None):
    verdict, _ = result_mod.build_verdict(good, bad)
    if mechanism is not None:
        verdict["mechanism"] = mechanism
    comp = diff_mod.compare(good, bad)
    return result_mod.rank_causes(comp, verdict, context_mod.build_context(good, bad))


def _has(cause, text):
    return any(text in e for e in cause["evidence"])


@pytest.mark.parametrize("flag,component", [
    ("--attention-backend", knowledge.KERNELS), ("--attn-impl", knowledge.KERNELS), ("--dtype", knowledge.KERNELS),
    ("--cuda-graph-max-bs", knowledge.GRAPHS), ("--disable-cuda-graph", knowledge.GRAPHS),
    ("--enforce-eager", knowledge.GRAPHS), ("--num-threads", knowledge.CPU_HOST), ("--decode-threads", knowledge.CPU_HOST),
    ("--tp-size", knowledge.COMMUNICATION), ("--tp8", knowledge.COMMUNICATION),
    ("--speculative-num-steps", knowledge.DRAFTER), ("--mem-fraction-static", knowledge.MEMORY),
    ("--port", knowledge.NONE), ("--nccl-port", knowledge.NONE),
])
def test_a_flag_is_read_by_the_words_of_its_name(flag, component):
    found = flag_word(flag)
    assert found is not None and found.component == component, found
    assert (found.kind == "bookkeeping") == flag.endswith("port")


def test_launch_bound_puts_the_graphs_flag_first_and_argues_against_the_kernels_flag():
    good, bad = _pair(["python", "serve.py", "--port", "8001", "--attn-impl", "flash", "--log-level", "info"],
                      ["python", "serve.py", "--port", "8002", "--attn-impl", "sdpa", "--log-level", "debug",
                       "--enforce-eager"], nvidia=ONE_GPU)
    causes = _ranked(good, bad, LAUNCH_BOUND)
    by_key = causes_by_key(causes)
    first = causes[0]
    assert first["key"] == "workers.python-0.flag.--enforce-eager" and first["tied"] == 0, [c["key"] for c in causes]
    assert first["component"] == knowledge.GRAPHS and first["good"] is None and first["bad"] is True
    assert has_factor(first, "mechanism_matches", "fits the mechanism (cuda-graphs/launch): GPU idle 72%")
    assert _has(first, "x2 on the command line process python-0 was started with")
    attn = by_key["workers.python-0.flag.--attn-impl"]
    assert has_factor(attn, "mechanism_contradicts", "contradicts the mechanism (attention/kernels)")
    port = by_key["workers.python-0.flag.--port"]
    assert _has(port, "prior 0.02 (flag --port: bookkeeping, by its words (port))")
    assert first["score"] - max(c["score"] for c in causes[1:]) >= 0.2


def test_a_cuda_flag_on_a_machine_with_no_gpu_is_out_of_context():
    good, bad = _pair(["python", "serve.py", "--cuda-graph-max-bs", "64"],
                      ["python", "serve.py", "--cuda-graph-max-bs", "8"], nvidia=NO_GPU)
    cause = _ranked(good, bad)[0]
    assert has_factor(cause, "out_of_context", "out of context: no GPU captured on either side")


def test_sglang_flags_keep_sglangs_rules_and_defer_to_the_server_argument():
    launch = ["python3", "-m", "sglang.launch_server", "--model-path", "/m", "--tp", "8"]
    good, bad = _pair(launch, launch + ["--disable-cuda-graph"], nvidia=ONE_GPU)
    causes = causes_by_key(_ranked(good, bad, LAUNCH_BOUND))
    flag = causes["workers.python-0.flag.--disable-cuda-graph"]
    assert flag["factors"][0] == {"factor": "prior", "value": 0.9,
                                  "why": "SGLang's disable_cuda_graph rule: the server argument --disable-cuda-graph sets"}
    assert flag["component"] == knowledge.GRAPHS
    # With the running server's own arguments captured, the same change ranks there.
    good["sections"]["sglang"] = section({"version": "0.5.5", "server_args": {"disable_cuda_graph": False, "tp_size": 8}})
    bad["sections"]["sglang"] = section({"version": "0.5.5", "server_args": {"disable_cuda_graph": True, "tp_size": 8}})
    ranked = _ranked(good, bad, LAUNCH_BOUND)
    # One change, one cause: the flag and the server argument are folded together, first alone.
    assert ranked[0]["tied"] == 0 and len([c for c in ranked if "cuda" in c["key"]]) == 1
    keys = {ranked[0]["key"]} | {f["key"] for f in ranked[0].get("folded") or []}
    assert keys == {"sglang.args.disable_cuda_graph", "workers.python-0.flag.--disable-cuda-graph"}
    assert ranked[0]["reach"]["tier"] == "acted"  # a measured process was started with it
    flag = causes_by_key(ranked)["workers.python-0.flag.--disable-cuda-graph"]
    assert has_factor(flag, "shown_as_server_arg", "the same change shows as SGLang's server argument")


def _telemetry(threads, wall, cpus=16):
    return {"wall_s": wall, "cpu_user_s": 1.0, "cpu_system_s": 0.0, "cpu_set": list(range(cpus)),
            "peak_threads": threads, "ctx_voluntary": 5, "ctx_involuntary": 10}


def test_a_benchmark_thread_flag_is_judged_by_the_peak_threads_and_a_variable_that_cannot_explain_them_is_not():
    good = snap("good", env={"OMP_NUM_THREADS": "4"}, runs=runs(FAST))
    bad = snap("bad", env={"OMP_NUM_THREADS": "1"}, runs=runs(SLOW))
    for side, threads, wall, n in ((good, 3, 0.5, "2"), (bad, 2, 1.0, "1")):
        side["run_session"] = {"command": ["python", "bench.py", "--threads", n]}
        for i, run in enumerate(side["runs"]):
            run["telemetry"] = _telemetry(threads, wall + i / 100)
    result = result_mod.analyze(good, bad)
    assert result["verdict"]["mechanism"]["kind"] == "fewer_cpus", result["verdict"]["mechanism"]
    causes = causes_by_key(result["causes"])
    flag = causes["run.flag.--threads"]
    assert has_factor(flag, "series_moved", "the runs' peak threads moved with it (3 \u2192 2)")
    assert _has(flag, "bisect runs one command and cannot switch it")
    omp = causes["env.OMP_NUM_THREADS"]
    assert has_factor(omp, "series_moved_short", "the runs' peak threads moved with it, but by 1 (3 \u2192 2) where")
    assert has_factor(omp, "series_moved_short", "move it by 3")
    assert result["causes"][0]["key"] == "run.flag.--threads" and result["causes"][0]["tied"] == 0
    warning = next(w for w in result["warnings"] if "benchmark command" in w)
    assert "with different arguments (--threads 2 \u2192 1)" in warning and "ranked among the causes" in warning


def test_another_benchmark_program_is_a_warning_of_its_own():
    good = {"run_session": {"command": ["python", "bench_a.py", "--n", "1"]}}
    bad = {"run_session": {"command": ["python", "bench_b.py", "--n", "1"]}}
    assert "different benchmark programs" in commands_differ(good, bad)
    assert commands_differ(good, good) is None
