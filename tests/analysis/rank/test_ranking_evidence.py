"""Ranking on evidence, unit by unit, on exact minimal snapshots (tests/helpers/diff.py): context
(is the part of the stack in play?), who read a variable, the mechanism's factors, priors of unknown
differences, ties reported as groups with the bisect command, and the factor table itself. The end-to-end
planted causes on real processes are tests/e2e/test_planted_evidence.py."""
from __future__ import annotations

import ast
import copy

import pytest
from helpers import REPO_ROOT, causes_by_key, factors_of, has_factor
from helpers.diff import runs, section, snap, workers

from envsnap.analysis import knowledge, result as result_mod
from envsnap.analysis.compare import diff as diff_mod
from envsnap.analysis.rank import context as context_mod, factors, priors
from envsnap.analysis.rank.groups import configurations_for_one_cause
from envsnap.bisect.ddmin import simulated_configurations_for_one_cause

NO_GPU = section({}, status="unavailable")
NO_GPU["reason"] = "NVML: NVML Shared Library Not Found; nvidia-smi not on PATH"
ONE_GPU = section({"count": 1, "gpus": {"0": {"name": "NVIDIA H200"}}})
FAST, SLOW = {"tok_s": [100, 101, 99, 100, 102]}, {"tok_s": [60, 61, 59, 60, 62]}


def _pair(good_env, bad_env, **sections):
    good = snap("good", env=good_env, runs=runs(FAST), **copy.deepcopy(sections))
    bad = snap("bad", env=bad_env, runs=runs(SLOW), **copy.deepcopy(sections))
    return good, bad


def _causes(good, bad):
    return causes_by_key(result_mod.analyze(good, bad)["causes"])


def _has(cause, prefix):
    return any(e.startswith(prefix) for e in cause["evidence"])


# ---------------------------------------------------------------- context

def test_gpu_and_nccl_settings_are_out_of_context_without_a_gpu():
    good, bad = _pair({"A": "1"}, {"A": "1", "NCCL_PROTO": "Simple", "CUDA_LAUNCH_BLOCKING": "1", "EDITOR": "vi"},
                      nvidia=NO_GPU)
    causes = _causes(good, bad)
    for key in ("env.NCCL_PROTO", "env.CUDA_LAUNCH_BLOCKING"):
        assert has_factor(causes[key], "out_of_context", "out of context: no GPU captured on either side (NVML: NVML"), \
            causes[key]["evidence"]
    assert not has_factor(causes["env.EDITOR"], "out_of_context", "out of context")  # needs nothing in particular
    # Without the factor NCCL_PROTO (prior 0.8) would outrank anything here; out of context it is below 0.2.
    assert causes["env.NCCL_PROTO"]["score"] < 0.2


def test_a_gpu_in_play_keeps_cuda_settings_and_no_nccl_init_means_not_seen():
    probe = {"dir": "/p", "records": {"python-0": {"pid": 5, "title": "python bench.py", "env_at_start": {}}}}
    good, bad = _pair({}, {"NCCL_ALGO": "Tree", "CUDA_LAUNCH_BLOCKING": "1"}, nvidia=ONE_GPU, probe=probe)
    causes = _causes(good, bad)
    assert has_factor(causes["env.NCCL_ALGO"], "not_seen_in_play", "NCCL not seen in use on either side")
    assert has_factor(causes["env.NCCL_ALGO"], "not_seen_in_play", "process initialised NCCL")
    assert not any("x0." in e and "context" in e for e in causes["env.CUDA_LAUNCH_BLOCKING"]["evidence"])
    assert _has(causes["env.CUDA_LAUNCH_BLOCKING"], "in context: 1 GPU captured (both sides)")


def test_an_nccl_init_record_puts_nccl_in_play_and_unknown_context_moves_nothing():
    envs = {"scheduler_TP0": {"NCCL_PROTO": "LL"}}
    good = snap("good", env={}, runs=runs(FAST), **workers(envs))
    bad = copy.deepcopy(good)
    bad["runs"] = runs(SLOW)
    bad["sections"]["probe"]["data"]["records"]["scheduler_TP0"]["env_at_init"]["NCCL_PROTO"] = "Simple"
    presence = context_mod.build_context(good, bad).of(knowledge.NCCL_CONTEXT)
    assert presence.state == context_mod.IN_PLAY and "scheduler_TP0 initialised NCCL" in presence.why
    # No nvidia section at all: whether a GPU ran is not known, and nothing is taken off.
    unknown = context_mod.build_context(snap("g", env={}), snap("b", env={})).of(knowledge.GPU_CONTEXT)
    assert unknown.state == context_mod.UNKNOWN
    assert context_mod.context_factor("env.CUDA_LAUNCH_BLOCKING", context_mod.build_context(good, bad)) is None


NCCL_SO = "/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"


def _maps(**processes):
    """A libraries section: each measured process (name -> its pid) mapped libnccl, as torch's CUDA build does."""
    entries = {name: {"pid": pid, "status": "ok", "objects": {"libnccl.so.2": NCCL_SO}} for name, pid in processes.items()}
    return {"processes": entries, "objects": {NCCL_SO: {"version": "2.27.3"}}}


def _nccl(probe_records, maps):
    sections = {"nvidia": ONE_GPU, "libraries": maps}
    if probe_records is not None:
        sections["probe"] = {"dir": "/p", "records": probe_records}
    good, bad = _pair({}, {"NCCL_ALGO": "Tree"}, **sections)
    return context_mod.build_context(good, bad).of(knowledge.NCCL_CONTEXT), _causes(good, bad)["env.NCCL_ALGO"]


def test_libnccl_mapped_by_probed_processes_that_never_initialised_nccl_is_not_seen_in_play():
    """Mapping libnccl is not using NCCL: NCCL reads its settings when a communicator is created."""
    presence, cause = _nccl({"worker-0": {"pid": 7, "env_at_start": {}}}, _maps(worker=7))
    assert presence.state == context_mod.NOT_SEEN
    assert "worker loaded libnccl.so.2 (" in presence.why and "but no probed process initialised NCCL" in presence.why
    assert has_factor(cause, "not_seen_in_play", "not seen in play")


def test_libnccl_mapped_where_no_probe_recorded_the_process_leaves_nccl_unknown():
    presence, cause = _nccl(None, _maps(worker=7))
    assert presence.state == context_mod.UNKNOWN and "no probe records or NCCL log" in presence.why
    assert not has_factor(cause, "not_seen_in_play")
    assert _has(cause, "whether NCCL is in play is not known (worker loaded libnccl")
    # A probe record of another process says nothing about the one that mapped libnccl.
    presence, cause = _nccl({"client-0": {"pid": 9, "env_at_start": {}}}, _maps(worker=7))
    assert presence.state == context_mod.UNKNOWN and "no probe record of worker" in presence.why
    assert not has_factor(cause, "not_seen_in_play")


@pytest.mark.parametrize("backend", ["nccl", "cpu:gloo,cuda:nccl", "NCCL"])
def test_an_init_with_nccl_among_its_backends_puts_nccl_in_play(backend):
    record = {"pid": 7, "env_at_start": {}, "init": {"backend": backend, "rank": 0, "world_size": 2}}
    presence, cause = _nccl({"worker-0": record}, _maps(worker=7))
    assert presence.state == context_mod.IN_PLAY and "worker-0 initialised NCCL" in presence.why
    assert not has_factor(cause, "not_seen_in_play")


def test_maps_without_libnccl_are_absent_whatever_the_probe_says():
    maps = {"processes": {"worker": {"pid": 7, "status": "ok", "objects": {"libc.so.6": "/usr/lib/libc.so.6"}}}}
    presence, cause = _nccl({"worker-0": {"pid": 7, "env_at_start": {}}}, maps)
    assert presence.state == context_mod.ABSENT and "no measured process loaded libnccl" in presence.why
    assert has_factor(cause, "out_of_context", "out of context")


def test_sglang_settings_need_sglang():
    pkgs = {"python": "/venv/bin/python", "dists": {"torch": {"version": "2.13.0"}}, "integrity": {}}
    good, bad = _pair({}, {"SGLANG_ENABLE_SPEC_V2": "1"}, packages=pkgs)
    # Nothing shows that the described interpreter is the one that ran (it may be envsnap's own): weaker.
    assert has_factor(_causes(good, bad)["env.SGLANG_ENABLE_SPEC_V2"], "not_seen_in_play",
                      "SGLang not seen in use on either side (SGLang is not installed in the interpreter envsnap "
                      "described (/venv/bin/python)")
    for side in (good, bad):
        side["run_session"] = {"command": ["/venv/bin/python", "bench.py"]}
    assert has_factor(_causes(good, bad)["env.SGLANG_ENABLE_SPEC_V2"], "out_of_context",
                      "no SGLang captured on either side (SGLang is not installed in the interpreter that ran "
                      "(/venv/bin/python))")
    with_sglang = {"dists": {"sglang": {"version": "0.5.23"}}, "integrity": {}}
    good, bad = _pair({}, {"SGLANG_ENABLE_SPEC_V2": "1"}, packages=with_sglang, sglang={"server_args": {"tp_size": 2}})
    assert not has_factor(_causes(good, bad)["env.SGLANG_ENABLE_SPEC_V2"], "out_of_context")


def test_a_merged_cluster_is_in_context_when_any_node_shows_the_part():
    def cluster(label, gpu_node, algo):
        nodes = {}
        for host, nvidia in (("node-a", ONE_GPU if gpu_node else NO_GPU), ("node-b", NO_GPU)):
            node = snap(label, env={"NCCL_ALGO": algo}, nvidia=copy.deepcopy(nvidia))
            nodes[host] = {"label": label, "created": node["created"], "sections": node["sections"]}
        merged = snap(label, env={})
        merged["sections"], merged["nodes"] = {}, nodes
        return merged

    in_play = context_mod.build_context(cluster("g", True, "Ring"), cluster("b", True, "Tree"))
    assert in_play.of(knowledge.GPU_CONTEXT).state == context_mod.IN_PLAY
    assert "(node-a)" in in_play.of(knowledge.GPU_CONTEXT).why
    absent = context_mod.build_context(cluster("g", False, "Ring"), cluster("b", False, "Tree"))
    assert absent.of(knowledge.GPU_CONTEXT).state == context_mod.ABSENT
    assert "(every node)" in absent.of(knowledge.GPU_CONTEXT).why
    causes = _causes(cluster("g", True, "Ring"), cluster("b", True, "Tree"))
    assert not has_factor(causes["*/env.NCCL_ALGO"], "out_of_context", "out of context")
    assert _has(causes["*/env.NCCL_ALGO"], "the same change on every node compared")


# ---------------------------------------------------------------- who read it

def _probe(reads):
    return {"dir": "/p", "records": {"python-0": {"pid": 5, "title": "python bench.py", "env_at_start": {},
                                                   "env_reads": reads}}}


def test_a_variable_the_benchmark_read_outranks_one_nobody_read():
    reads = {"APP_VALIDATE": 3}
    good, bad = _pair({}, {"APP_VALIDATE": "1", "APP_COLOR": "1", "OMP_NUM_THREADS": "2"}, probe=_probe(reads))
    causes = _causes(good, bad)
    assert _has(causes["env.APP_VALIDATE"], "x2 read by python-0 (6 reads)")
    assert has_factor(causes["env.APP_COLOR"], "not_read", "not read: read tracking was on in 1 measured process and none")
    # Equal priors (both look like switches): the read decides.
    assert causes["env.APP_VALIDATE"]["score"] > causes["env.APP_COLOR"]["score"]
    # C libraries read with getenv, unseen by the probe: no penalty for OpenMP's variable.
    omp = causes["env.OMP_NUM_THREADS"]
    assert not has_factor(omp, "not_read", "not read")
    assert any("the OpenMP runtime reads it with getenv" in e for e in omp["evidence"])


def test_without_read_tracking_nothing_is_called_unread():
    probe = {"dir": "/p", "records": {"python-0": {"pid": 5, "title": "python bench.py", "env_at_start": {}}}}
    good, bad = _pair({}, {"APP_COLOR": "1"}, probe=probe)
    assert not any("read" in e for e in _causes(good, bad)["env.APP_COLOR"]["evidence"][1:])


# ---------------------------------------------------------------- the mechanism

def _telemetry(cpu_s, cpus, threads, wall=1.0):
    return {"wall_s": wall, "cpu_user_s": cpu_s, "cpu_system_s": 0.0, "cpu_set": list(range(cpus)),
            "peak_threads": threads, "ctx_voluntary": 5, "ctx_involuntary": 10}


def _measured(values, telemetry):
    out = runs(values)
    for run, usage in zip(out, telemetry):
        run["telemetry"] = usage
    return out


def test_a_halved_cpu_set_moves_the_host_fact_up_and_a_thread_count_whose_threads_held_down():
    host_g = {"cpu": {"usable": 2, "logical": 2}}
    host_b = {"cpu": {"usable": 1, "logical": 2}}
    good = snap("good", env={"OMP_NUM_THREADS": "4"}, host=host_g,
                runs=_measured(FAST, [_telemetry(0.5, 2, 3, wall=0.25 + i / 100) for i in range(5)]))
    bad = snap("bad", env={"OMP_NUM_THREADS": "1"}, host=host_b,
               runs=_measured(SLOW, [_telemetry(0.5, 1, 3, wall=0.5 + i / 100) for i in range(5)]))
    result = result_mod.analyze(good, bad)
    assert result["verdict"]["mechanism"]["kind"] == "fewer_cpus"
    causes = causes_by_key(result["causes"])
    usable = causes["host.cpu.usable"]
    assert usable["factors"][0] == {"factor": "prior", "value": pytest.approx(0.65),
                                    "why": "sized: usable CPUs 2 \u2192 1: 50% of them taken away"}
    assert has_factor(usable, "series_moved", "the runs' CPU set moved with it (2 \u2192 1)")
    assert has_factor(usable, "mechanism_matches", "fits the mechanism (cpu/host): ran on 1 CPU instead of 2")
    omp = causes["env.OMP_NUM_THREADS"]
    assert has_factor(omp, "series_held", "the runs' peak threads held (3 \u2192 3): it sizes OpenMP's thread pool")
    assert not has_factor(omp, "mechanism_matches", "fits the mechanism")  # the pathway it acts through did not act
    assert result["causes"][0]["key"] == "host.cpu.usable" and usable["score"] - omp["score"] > 0.5


def test_the_mechanism_moves_components_it_implicates_up_and_those_it_contradicts_down():
    mechanism = {"kind": "gpu_work", "line": "GPU busy 99% on both sides, SM clock held: GPU work got slower",
                 "factors": {}, "components": {"matches": [knowledge.KERNELS], "contradicts": [knowledge.CPU_HOST]}}
    good, bad = _pair({}, {"NVIDIA_TF32_OVERRIDE": "0", "OMP_NUM_THREADS": "1"}, nvidia=ONE_GPU)
    verdict, _ = result_mod.build_verdict(good, bad)
    verdict["mechanism"] = mechanism
    comp = diff_mod.compare(good, bad)
    causes = causes_by_key(result_mod.rank_causes(comp, verdict, context_mod.build_context(good, bad)))
    assert has_factor(causes["env.NVIDIA_TF32_OVERRIDE"], "mechanism_matches", "fits the mechanism (attention/kernels): GPU")
    assert has_factor(causes["env.OMP_NUM_THREADS"], "mechanism_contradicts", "contradicts the mechanism (cpu/host): GPU busy")
    assert causes["env.NVIDIA_TF32_OVERRIDE"]["rank"] == 1


# ---------------------------------------------------------------- priors of unknown differences

@pytest.mark.parametrize("value,kind", [
    ("1", "switch"), ("false", "switch"), ("", "switch"), ("8", "count"), ("0.75", "count"), ("512MB", "count"),
    ("LAZY", "mode"), ("fast", "mode"), ("INIT,ENV", "mode"), ("/opt/models/llama", "bookkeeping"),
    ("https://example.com/x", "bookkeeping"), ("1764000000", "bookkeeping"), ("9fceb02d0ae598e95dc9", "bookkeeping"),
    ("3f2b8c1e-9d4a-4c6e-8f1a-2b7d5e0c9a41", "bookkeeping"), ("2025-11-28T09:00", "bookkeeping"),
    ("PERF-1234", "bookkeeping"), ("redacted:0a1b2c3d", "bookkeeping"), ("try the new kernel", "text"),
])
def test_value_shapes(value, kind):
    assert priors.value_kind(value) == kind


@pytest.mark.parametrize("name,good,bad,kind", [
    ("LD_BIND_NOW", None, "1", "linker"), ("MALLOC_ARENA_MAX", None, "2", "allocator"),
    ("PYTHONTRACEMALLOC", None, "1", "interpreter"), ("LD_AUDIT", None, "/opt/audit.so", "linker"),
    ("DATA_LOADER_NUM_WORKERS", "4", "1", "threads"), ("FEATURE_X_ENABLED", None, "yes", "switch"),
    ("CACHE_SIZE", "64", "8", "count"), ("SCHED_POLICY", "fifo", "lru", "mode"),
    ("MODEL_DIR", "/a", "/b", "bookkeeping"), ("APP_MODE", None, "/etc/app.conf", "bookkeeping"),
    ("BUILD_TAG", None, "1", "bookkeeping"), ("VALIDATE_ROWS", None, "1", "switch"),
    ("EXPERIMENT", "a", "b", "mode"), ("MOTD", None, "have a nice day", "text"),
])
def test_unknown_variables_by_name_family_and_value_shape(name, good, bad, kind):
    assert priors.variable_kind(name, good, bad)[0] == kind


def test_knob_like_unknowns_outrank_bookkeeping_and_resources_are_sized():
    good, bad = _pair({"HF_HOME": "/a"}, {"HF_HOME": "/b", "APP_TURBO": "1"},
                      host={"cpu": {"usable": 8, "logical": 8}, "cgroup": {"cpu_limit_cores": "max"}})
    bad["sections"]["host"]["data"] = {"cpu": {"usable": 2, "logical": 8}, "cgroup": {"cpu_limit_cores": 4}}
    causes = _causes(good, bad)
    assert causes["env.APP_TURBO"]["score"] > causes["env.HF_HOME"]["score"]
    assert causes["host.cpu.usable"]["factors"][0]["value"] == pytest.approx(0.3 + 0.7 * 0.75)
    assert causes["host.cgroup.cpu_limit_cores"]["factors"][0]["why"] == \
        "sized: CPU quota 8 \u2192 4: 50% of them taken away"
    assert causes["host.cpu.usable"]["component"] == knowledge.CPU_HOST
    assert [c for c in _causes(good, bad).values()][0]["key"] == "host.cpu.usable"


# ---------------------------------------------------------------- ties

def test_equal_evidence_is_one_group_with_the_bisect_command_never_an_order_by_name():
    good, bad = _pair({}, {"ZZ_FLAG": "1", "AA_FLAG": "1", "MM_FLAG": "1", "NCCL_ALGO": "Tree"}, nvidia=NO_GPU)
    good["run_session"] = bad["run_session"] = {"command": ["python", "bench.py", "--fast path"]}
    result = result_mod.analyze(good, bad, good_file="g.json", bad_file="b.json")
    flags = [c for c in result["causes"] if c["key"].endswith("_FLAG")]
    assert {c["rank"] for c in flags} == {1} and all(c["tied"] == 2 for c in flags)
    group = result["groups"][0]
    assert group["rank"] == 1 and group["size"] == 3 and sorted(group["keys"]) == [c["key"] for c in flags]
    assert group["line"] == "these 3 cannot be told apart from the snapshots (the evidence scores them equally)"
    bisect = group["bisect"]
    assert bisect["command"] == "envsnap bisect g.json b.json -- python bench.py '--fast path'"
    assert bisect["deltas"] == 4 and bisect["configurations"] == configurations_for_one_cause(4)
    assert bisect["runs"] == bisect["configurations"] * 3
    assert f"about {bisect['runs']} runs" in group["bisect_line"]


def test_one_change_seen_in_several_places_is_not_sent_to_bisect():
    causes = [{"rank": 1, "key": "workers.a.changed_in_process.X", "variable": "X", "score": 0.5},
              {"rank": 1, "key": "workers.b.changed_in_process.X", "variable": "X", "score": 0.5}]
    from envsnap.analysis.rank.groups import tie_groups

    group = tie_groups(causes, {"deltas": 3, "command": "c", "runs": 1, "configurations": 1, "repeat": 1})[0]
    assert group["line"] == "these 2 are one change (X) seen in 2 places, scored equally"
    assert "bisect" not in group


def test_bisect_cost_estimate_matches_ddmin():
    # benchmarks/bisect_runs.py: one cause among 32 deltas, worst case 12 configurations with the baselines.
    assert configurations_for_one_cause(32) == 12
    assert [configurations_for_one_cause(n) for n in (0, 1, 2)] == [0, 2, 4]
    assert configurations_for_one_cause(1000) < 2 * 10 + 6
    # The analysis' closed form is the count bisect's own ddmin gives (analysis cannot import bisect).
    for n in (1, 2, 3, 5, 8, 13, 20, 33, 64, 100, 257):
        assert configurations_for_one_cause(n) == simulated_configurations_for_one_cause(n), n


# ---------------------------------------------------------------- the factor table

def test_every_factor_is_named_with_a_reason_and_no_ranker_module_holds_a_number_of_its_own():
    for factor in factors.FACTORS.values():
        assert factor.value > 0 and factor.why and factor.name
    for side in factors.SIDE_WEIGHTS.values():
        assert all(0 < w <= 1 for w in side.values())
    # The ranking modules take every number from the table (analysis/knowledge, factors.py): no float literal
    # other than 0 and 1 in them.
    for name in ("causes", "domain", "observed", "context", "priors", "groups"):
        tree = ast.parse((REPO_ROOT / "envsnap" / "analysis" / "rank" / f"{name}.py").read_text())
        floats = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, float)
                  and n.value not in (0.0, 1.0)]
        assert not floats, (name, floats)


def test_score_lines_say_every_factor_with_its_value(monkeypatch):
    monkeypatch.setattr(factors, "WEIGHTS", {})  # unfitted: every weight 1, the plain product
    score = factors.Score(0.8, "NCCL_PROTO rule")
    score.apply("out_of_context", "out of context: no GPU captured on either side")
    score.apply("read_by_process", "read by scheduler_TP0 (12 reads)")
    score.apply("runs_significant")  # 1.0 moves nothing: not listed
    assert score.lines() == ["prior 0.80 (NCCL_PROTO rule)", "x0.1 out of context: no GPU captured on either side",
                             "x2 read by scheduler_TP0 (12 reads)"]
    assert score.raw == pytest.approx(0.16) and 0 < score.score < 1
    assert [f["factor"] for f in score.to_json()] == ["prior", "out_of_context", "read_by_process"]
    # Fitted weights are exponents: log raw = w_prior * log prior + sum of w_f * log value_f.
    monkeypatch.setattr(factors, "WEIGHTS", {"prior": 0.5, "read_by_process": 2.0})
    assert score.raw == pytest.approx(0.8 ** 0.5 * 0.1 * 2.0 ** 2)


# ---------------------------------------------------------------- rules read with their values (a *_DIR path
# under SGLANG_* ranked 2nd with no SGLang anywhere); the real processes: tests/e2e/test_real_use_ranking.py

def _family_rules():
    """Every family rule of the table (a `*.PREFIX_*` variable rule), by its variable pattern."""
    return sorted({r.pattern[2:] for r in knowledge.KNOWLEDGE_RULES
                   if not r.volatile and r.pattern.startswith("*.") and "*" in r.pattern[2:]})


def _prior(name, good, bad):
    g, b = _pair({name: good} if good is not None else {}, {name: bad} if bad is not None else {})
    cause = _causes(g, b)[f"env.{name}"]
    return cause["factors"][0], cause


@pytest.mark.parametrize("family", _family_rules())
def test_every_family_rule_judges_its_variables_values_like_unknown_ones(family):
    prefix = family.rstrip("*")
    weight = knowledge.rule_for(f"env.{prefix}ZZ_KNOB").weight
    # A knob-like value keeps the family's prior; a *_DIR holding a path is bookkeeping, whatever the family,
    # unless the family takes a path as a setting (knowledge.PATH_SETTING_FAMILIES).
    knob, _ = _prior(f"{prefix}ZZ_KNOB", "1", "2")
    assert knob["value"] == weight, knob
    path, cause = _prior(f"{prefix}ZZ_DIR", "/srv/a", "/srv/b")
    if any(knowledge.glob_matcher(p)(f"{prefix}ZZ_DIR") for p in knowledge.PATH_SETTING_FAMILIES.get(family, ())):
        assert path["value"] == weight, path
    else:
        assert path["value"] == min(weight, knowledge.VARIABLE_KINDS["bookkeeping"].prior), path
        assert path["why"] == f"{family} rule, but bookkeeping by its name"
        assert cause["why"].startswith(f"{prefix}ZZ_DIR has the {prefix} prefix, but its name (*_DIR) and values "
                                       "(/srv/a \u2192 /srv/b) look like bookkeeping"), cause["why"]
        assert cause["component"] == knowledge.NONE
    # A bookkeeping-shaped value under a knob-like name (a uuid) is bookkeeping too, in every family.
    ident, _ = _prior(f"{prefix}ZZ_MODE", None, "3f2b8c1e-9d4a-4c6e-8f1a-2b7d5e0c9a41")
    assert ident["value"] == min(weight, knowledge.VARIABLE_KINDS["bookkeeping"].prior), ident


def test_a_family_path_that_is_a_setting_keeps_its_prior():
    graph, _ = _prior("NCCL_GRAPH_FILE", "/etc/nccl/a.xml", "/etc/nccl/b.xml")  # NCCL reads the graph from it
    assert graph["value"] == knowledge.rule_for("env.NCCL_GRAPH_FILE").weight
    ptxas, _ = _prior("TRITON_PTXAS_PATH", None, "/usr/local/cuda/bin/ptxas")  # which ptxas builds the kernels
    assert ptxas["value"] == knowledge.rule_for("env.TRITON_PTXAS_PATH").weight
    cache, _ = _prior("TRITON_CACHE_DIR", "/a", "/b")  # where Triton keeps its cache: bookkeeping
    assert cache["value"] == knowledge.VARIABLE_KINDS["bookkeeping"].prior


@pytest.mark.parametrize("name,good,bad,costly", [
    ("NCCL_DEBUG", "INFO", "WARN", False), ("NCCL_DEBUG", None, "INFO", False), ("NCCL_DEBUG", "VERSION", "warn", False),
    ("NCCL_DEBUG", "INFO", "TRACE", True), ("NCCL_DEBUG", None, "SOMETHING", True),
    ("CUDA_LAUNCH_BLOCKING", None, "0", False), ("CUDA_LAUNCH_BLOCKING", "0", "1", True),
    ("CUDA_LAUNCH_BLOCKING", None, "1", True),
    ("TORCH_DISTRIBUTED_DEBUG", "OFF", "INFO", False), ("TORCH_DISTRIBUTED_DEBUG", "INFO", "DETAIL", True),
])
def test_named_rules_read_the_values_that_decide_what_the_knob_does(name, good, bad, costly):
    prior, cause = _prior(name, good, bad)
    rule = knowledge.rule_for(f"env.{name}")
    if costly:
        assert prior["value"] == rule.weight and prior["why"] == f"{name} rule" and cause["why"].startswith(rule.why)
    else:
        case = knowledge.VALUE_CASES[name]
        assert prior["value"] == case.weight < rule.weight and prior["why"] == f"{name} rule, for these values"
        shown = " \u2192 ".join("unset" if v is None else v for v in (good, bad))
        assert cause["why"].startswith(f"{name} {shown}: "), cause["why"]
    if name == "NCCL_DEBUG" and not costly:
        assert "TRACE logs every" not in cause["why"] and "neither side logs every call" in cause["why"]


def test_no_rule_reason_claims_an_observation():
    """A rule's `why` says what a knob does; that something read it is evidence (the probe, NCCL's log)."""
    claims = ("read by the server", "read by the workers", "seen by", "was read", "the server read")
    found = [r.pattern for r in knowledge.all_rules() if not r.volatile and any(c in r.why for c in claims)]
    found += [n for n, case in knowledge.VALUE_CASES.items() if any(c in case.why for c in claims)]
    assert found == []


# ---------------------------------------------------------------- what runs: a checkout whose code a measured process ran

def _checkout(roles=("cwd",)):
    repo = {"roles": list(roles), "head": "a" * 40, "branch": "main",
            "dirty": {"engine.py": {"status": "M", "sha256": "b" * 64}}}
    return {"repos": {"/srv/app": repo}, "errors": {}, "python": "/venv/bin/python"}


def _git_cause(good, bad):
    return _causes(good, bad)["git./srv/app.dirty.engine.py"]


@pytest.mark.parametrize("where", ["cwd", "main", "module", "run_cwd", "run_cwd_code_elsewhere", "run_script",
                                   "sys_path"])
def test_a_checkout_whose_code_a_measured_process_ran_is_what_runs(where):
    """Its main script, a module, the run command's program, a sys.path entry: its code ran (x1.3). A working
    directory is where a process ran, not its code: never "not what runs"; it moves the score only when the code
    that ran is known to have come from elsewhere (python /home/ops/bench.py run in the checkout)."""
    record = {"pid": 7, "title": "python serve.py", "env_at_start": {}, "cwd": "/home/ops"}
    session = {"command": ["python", "-m", "bench"], "cwd": "/home/ops"}
    python = {"sys_path": ["/usr/lib/python3.11", "/venv/lib/python3.11/site-packages"]}
    if where == "cwd":
        record["cwd"] = "/srv/app/sub"
    elif where == "main":
        record["modules"] = {"count": 1, "main": "/srv/app/serve.py", "elsewhere": {}}
    elif where == "module":
        record["modules"] = {"count": 2, "elsewhere": {"engine": "/srv/app/engine.py"}}
    elif where == "run_cwd":
        session["cwd"] = "/srv/app"
    elif where == "run_cwd_code_elsewhere":
        session.update(cwd="/srv/app", command=["/venv/bin/python", "/home/ops/bench.py"])
    elif where == "run_script":
        session["command"] = ["/venv/bin/python", "../../srv/app/bench.py"]
    else:
        python["sys_path"].append("/srv/app/src")
    sections = {"git": _checkout(), "probe": {"dir": "/p", "records": {"python-0": record}}, "python": python}
    good, bad = snap("good", runs=runs(FAST), **copy.deepcopy(sections)), snap("bad", runs=runs(SLOW), **sections)
    good["run_session"], bad["run_session"] = dict(session), dict(session)
    good["sections"]["git"]["data"]["repos"]["/srv/app"]["dirty"] = {}
    cause = _git_cause(good, bad)
    names = [f["factor"] for f in cause["factors"]]
    assert "checkout_not_running" not in names, cause["evidence"]
    if where == "run_cwd_code_elsewhere":
        assert "checkout_runs" not in names, cause["evidence"]
        assert [f["why"] for f in cause["factors"] if f["factor"] == "checkout_code_elsewhere"] == [
            "/srv/app is the working directory of the run command, but the code they ran came from elsewhere (the run "
            "command's program bench.py), and none from it"]
        return
    if where in ("cwd", "run_cwd"):
        who = "python-0" if where == "cwd" else "the run command"
        assert "checkout_runs" not in names and "checkout_code_elsewhere" not in names, cause["evidence"]
        assert f"/srv/app is the working directory of {who}, but no code of it was seen running (no main script, " \
               "imported module or sys.path entry in it): whether its changes run is not known" in cause["evidence"]
        return
    assert "checkout_runs" in names, cause["evidence"]
    line = next(f["why"] for f in factors_of(cause, "checkout_runs") if f["why"].startswith("/srv/app is what runs: "))
    expected = {"main": "the main script serve.py of python-0", "module": "module engine, imported by python-0",
                "run_script": "the run command's program bench.py",
                "sys_path": "a directory on the described interpreter's sys.path"}[where]
    assert expected in line, line


def test_a_checkout_the_processes_did_not_run_from_is_not_what_runs_and_without_processes_nothing_is_said():
    record = {"pid": 7, "title": "python serve.py", "env_at_start": {}, "cwd": "/home/ops",
              "modules": {"count": 1, "main": "/home/ops/serve.py", "elsewhere": {}}}
    sections = {"git": _checkout(("cwd",)), "probe": {"dir": "/p", "records": {"python-0": record}}}
    good, bad = snap("good", runs=runs(FAST), **copy.deepcopy(sections)), snap("bad", runs=runs(SLOW), **sections)
    good["sections"]["git"]["data"]["repos"]["/srv/app"]["dirty"] = {}
    cause = _git_cause(good, bad)
    assert [f["why"] for f in cause["factors"] if f["factor"] == "checkout_not_running"] == [
        "/srv/app is not what runs: the measured processes ran in /home/ops, and none of their main scripts lies "
        "in it"]
    # The same checkout with no process recorded at all (a bare capture): neither runs nor "not what runs".
    for side in (good, bad):
        del side["sections"]["probe"]
    cause = _git_cause(good, bad)
    assert not {"checkout_runs", "checkout_not_running"} & {f["factor"] for f in cause["factors"]}
    assert "whether /srv/app is code that runs is not known: no measured process was recorded (--pid, --probe-dir " \
           "or envsnap run show where they ran)" in cause["evidence"]
    # A process recorded with nothing that places it (no cwd, script or module list): still not known.
    for side in (good, bad):
        side["sections"]["probe"] = {"status": "ok", "data": {"dir": "/p", "records": {"python-0": {
            "pid": 7, "title": "python serve.py", "env_at_start": {}}}}}
    cause = _git_cause(good, bad)
    assert not {"checkout_runs", "checkout_not_running"} & {f["factor"] for f in cause["factors"]}
    assert "whether /srv/app is code that runs is not known: the measured processes were recorded without their " \
           "working directories, scripts or modules" in cause["evidence"]
