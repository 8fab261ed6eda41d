"""Reach tiers (analysis/rank/reach.py) and one change, one cause (analysis/rank/fold.py), on exact minimal
snapshots (tests/helpers/diff.py). Assertions are on structured evidence: tier, basis, factor names, folded
keys and their relations; the end-to-end planted causes on real processes are tests/e2e/test_planted_*.py."""
from __future__ import annotations

import copy

from helpers import causes_by_key
from helpers.diff import runs, section, snap

from envsnap.analysis import result as result_mod
from envsnap.analysis.rank import reach

NO_GPU = section({}, status="unavailable")
NO_GPU["reason"] = "NVML: NVML Shared Library Not Found; nvidia-smi not on PATH"
FAST, SLOW = {"tok_s": [100, 101, 99, 100, 102]}, {"tok_s": [20, 21, 19, 20, 22]}
SITE = "/venv/lib/python3.11/site-packages"
FAMOUS_OUT_OF_CONTEXT = {"LD_LIBRARY_PATH": "/opt/empty-libs", "PYTHONPATH": "/opt/empty-py", "LD_BIND_NOW": "1",
                         "MALLOC_ARENA_MAX": "2", "NCCL_PROTO": "Simple", "NCCL_P2P_DISABLE": "1",
                         "NCCL_IB_DISABLE": "1", "CUDA_LAUNCH_BLOCKING": "1", "OMP_NUM_THREADS": "1"}


def _libraries(paths):
    objects = {p.rsplit("/", 1)[-1]: p for p in paths}
    return {"processes": {"python-0": {"pid": 5, "source": "probe", "status": "ok", "objects": objects,
                                       "probe_key": "python-0"}},
            "objects": {p: {"name": p.rsplit("/", 1)[-1]} for p in paths}, "checked_names": [],
            "scan": {"complete": True, "objects": len(paths)}}


def _probe(installed=(), elsewhere=None, env=None):
    modules = {"count": 3 + len(installed), "stdlib": ["os", "sys"], "installed": list(installed),
               "elsewhere": dict(elsewhere or {}), "shadowed": {}}
    return {"dir": "/p", "records": {"python-0": {"pid": 5, "title": "python bench.py", "env_at_start": dict(env or {}),
                                                  "cwd": "/work", "modules": modules}}}


def _packages(modified):
    return {"count": 2, "dists": {"fastlib": {"version": "1.0"}, "otherlib": {"version": "2.0"}},
            "integrity": {"checked_files": 10, "dists_checked": 2, "errors": {}, "missing": {}, "mode": "py",
                          "modified": {rel: {"dist": rel.split("/")[0], "recorded_sha256": "a" * 64,
                                             "actual_sha256": "b" * 64, "recorded_size": 10, "actual_size": 11}
                                       for rel in modified}}}


def _pair(bad_env, good_sections, bad_sections):
    good = snap("good", env={"HOME": "/root"}, runs=runs(FAST), nvidia=copy.deepcopy(NO_GPU), **good_sections)
    bad = snap("bad", env={"HOME": "/root", **bad_env}, runs=runs(SLOW), nvidia=copy.deepcopy(NO_GPU),
               **bad_sections)
    return good, bad


def _seed_case():
    """The seed case in its simplest form: the benchmark imports an installed package whose file was edited in
    place; BAD also carries famous names that nothing the benchmark loaded takes."""
    libs = ["/usr/lib/x86_64-linux-gnu/libc.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6"]
    good = {"libraries": _libraries(libs), "packages": _packages([]),
            "probe": _probe(installed=["fastlib", "numpy"], env={"HOME": "/root"})}
    bad = {"libraries": _libraries(libs), "packages": _packages(["fastlib/core.py", "otherlib/unused.py"]),
           "probe": _probe(installed=["fastlib", "numpy"], env={"HOME": "/root", **FAMOUS_OUT_OF_CONTEXT})}
    return _pair(FAMOUS_OUT_OF_CONTEXT, good, bad)


def test_an_edited_file_the_benchmark_imported_ranks_above_every_famous_name_that_could_not_act():
    good, bad = _seed_case()
    result = result_mod.analyze(good, bad)
    top = result["causes"][0]
    assert top["key"] == "integrity.fastlib/core.py" and top["tied"] == 0
    assert top["reach"]["tier"] == reach.ACTED and top["reach"]["basis"] == "modules"
    causes = causes_by_key(result["causes"])
    # The search paths: nothing was mapped or imported through their entries.
    for key in ("workers.env.LD_LIBRARY_PATH", "workers.env.PYTHONPATH"):
        assert causes[key]["reach"]["tier"] == reach.CANNOT and causes[key]["reach"]["basis"] == "search path"
    # NCCL and CUDA settings with no GPU: ruled out by the context.
    for key in ("workers.env.NCCL_PROTO", "workers.env.NCCL_P2P_DISABLE", "workers.env.CUDA_LAUNCH_BLOCKING"):
        assert causes[key]["reach"]["tier"] == reach.CANNOT
    # The edited file of a package nobody imported: ruled out by the module lists.
    other = causes["integrity.otherlib/unused.py"]
    assert other["reach"]["tier"] == reach.CANNOT and other["reach"]["basis"] == "modules"
    # Every could-act and cannot cause ranks below the acted one, and shows a lower score.
    for cause in result["causes"][1:]:
        assert cause["reach"]["tier"] != reach.ACTED
        assert cause["score"] < top["score"]
    cannot = [c for c in result["causes"] if c["reach"]["tier"] == reach.CANNOT]
    assert cannot and all(c["score"] < 0.1 for c in cannot)
    assert result["causes"][-len(cannot):] == cannot  # ruled-out causes last


def test_a_search_path_entry_something_was_mapped_through_acted():
    libs = ["/usr/lib/libc.so.6", "/opt/slowblas/libblas.so.3"]
    good, bad = _pair({"LD_LIBRARY_PATH": "/opt/slowblas"}, {"libraries": _libraries(libs[:1])},
                      {"libraries": _libraries(libs)})
    causes = causes_by_key(result_mod.analyze(good, bad)["causes"])
    path = causes["env.LD_LIBRARY_PATH"]
    assert path["reach"]["tier"] == reach.ACTED and "libblas.so.3 mapped from /opt/slowblas on BAD" \
        in path["reach"]["observation"]


def test_without_maps_or_module_lists_the_tier_is_not_decided_and_says_what_would_decide_it():
    good, bad = _pair({"LD_LIBRARY_PATH": "/opt/x", "SOME_KNOB": "3"}, {}, {})
    causes = causes_by_key(result_mod.analyze(good, bad)["causes"])
    for key in ("env.LD_LIBRARY_PATH", "env.SOME_KNOB"):
        found = causes[key]["reach"]
        assert found["tier"] == reach.COULD_ACT and found["decided"] is False and found["would_decide"]


def test_a_hook_that_mentions_an_out_of_context_variable_is_not_lifted_by_it_and_folds_what_it_sets():
    hook_good = {"kind": "sitecustomize", "sha256": "1" * 64, "size": 10, "import_lines": [],
                 "touches_env": True, "env_mentions": ["APP_MODE"]}
    hook_bad = dict(hook_good, sha256="2" * 64, env_mentions=["APP_MODE", "NCCL_IB_DISABLE"])
    hooks = f"{SITE}/sitecustomize.py"
    good, bad = _pair({"NCCL_IB_DISABLE": "1"},
                      {"python": {"startup_hooks": {hooks: hook_good}}, "probe": _probe()},
                      {"python": {"startup_hooks": {hooks: hook_bad}}, "probe": _probe()})
    result = result_mod.analyze(good, bad)
    causes = causes_by_key(result["causes"])
    hook = causes[f"startup.{hooks}"]
    names = [f["factor"] for f in hook["factors"]]
    assert "startup_mentions_changed" not in names  # NCCL_IB_DISABLE is out of context here
    assert any("rule out here: not counted" in e for e in hook["evidence"])
    # The variable it writes is its effect: folded under it, one change, one cause.
    assert causes["env.NCCL_IB_DISABLE"]["folded_into"] == f"startup.{hooks}"
    assert causes["env.NCCL_IB_DISABLE"]["relation"] == "set by it"
    assert [c["key"] for c in result["causes"]].count(f"startup.{hooks}") == 1


def test_one_variable_under_several_keys_is_one_cause():
    env = {"NCCL_PROTO": "Simple"}
    workers = {"processes": {"processes": {"w0": {"pid": 7, "cmdline": ["python", "w.py"], "status": "ok",
                                                  "environ_status": "ok", "environ": {"HOME": "/root"}}}}}
    bad_workers = copy.deepcopy(workers)
    bad_workers["processes"]["processes"]["w0"]["environ"]["NCCL_PROTO"] = "Simple"
    good, bad = _pair(env, workers, bad_workers)
    result = result_mod.analyze(good, bad)
    proto = [c for c in result["causes"] if "NCCL_PROTO" in c["key"]]
    assert len(proto) == 1
    folded = proto[0].get("folded") or []
    assert {proto[0]["key"]} | {f["key"] for f in folded} >= {"env.NCCL_PROTO"}
    assert all(f["relation"] == "the same change" for f in folded)


def test_a_neighbour_with_nothing_measured_beside_it_cannot_have_acted():
    row = {"cpus": 1.0, "processes": 1, "pids": [4242], "source": "capture"}
    good = snap("good", env={"HOME": "/root"})
    bad = snap("bad", env={"HOME": "/root"})
    good["sections"]["neighbours"] = section({"processes": {}, "cpus_online": 2})
    bad["sections"]["neighbours"] = section({"processes": {"python3 -c while True: pass": row}, "cpus_online": 2})
    result = result_mod.analyze(good, bad)
    neighbour = [c for c in result["causes"] if c["where"] == "neighbour"]
    for cause in neighbour:
        assert cause["reach"]["tier"] == reach.CANNOT and cause["reach"]["basis"] == "nothing measured"


def test_banded_scores_follow_the_tiers():
    acted, observed, named, cannot = (reach.order_of(reach.ACTED), reach.order_of(reach.COULD_ACT, "readable_by_loaded_code"),
                                      reach.order_of(reach.COULD_ACT, "name"), reach.order_of(reach.CANNOT))
    assert acted > observed > named > cannot
    assert reach.banded(acted, 0.0) >= reach.banded(observed, 1.0)
    assert reach.banded(observed, 0.0) >= reach.banded(named, 1.0)
    assert reach.banded(named, 0.0) >= reach.banded(cannot, 1.0)
    assert reach.banded(cannot, 2.0) == 0.1 and reach.banded(acted, -1.0) == 0.5
