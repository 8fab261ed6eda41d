"""Ranking (envsnap.rank): priors, domain logic, the verdict, EAGLE-3 decomposition, N-snapshot association."""
from __future__ import annotations

import json

import pytest
from helpers import causes_by_key, run_envsnap, run_envsnap_in_process
from helpers.diff import copy_of, runs, sampled_run, snap, workers

from envsnap.analysis import association, result as result_mod
from envsnap.errors import EnvsnapError

GOOD_RUNS = {"output_throughput": [94.1, 93.0, 95.2, 94.8, 93.9], "accept_length": [3.1, 3.12, 3.09, 3.11, 3.1],
             "verify_ms": [19.0, 19.2, 18.9, 19.1, 19.0]}
VERIFY_BAD = {"output_throughput": [60.2, 59.1, 61.0, 60.5, 58.7], "accept_length": [3.1, 3.11, 3.09, 3.12, 3.1],
              "verify_ms": [29.0, 29.3, 28.8, 29.1, 29.2]}
DRAFTER_BAD = {"output_throughput": [70.2, 69.1, 71.0, 70.5, 68.7], "accept_length": [2.3, 2.31, 2.29, 2.3, 2.32],
               "verify_ms": [19.1, 19.0, 19.2, 18.9, 19.1]}


def _causes(result):
    return causes_by_key(result["causes"])


def _pair(bad_runs, good_extra=None, bad_extra=None, custom_ar_disabled=True):
    args = {"tp_size": 8, "disable_custom_all_reduce": custom_ar_disabled, "speculative_num_steps": 3}
    env = {"PATH": "/usr/bin"}
    good = snap("good", env=env, runs=runs(GOOD_RUNS), sglang={"version": "0.5.5", "server_args": args},
                **workers({f"scheduler_TP{i}": dict(env, NCCL_PROTO="LL") for i in range(2)}))
    bad = copy_of(good)
    bad["label"] = "bad"
    bad["runs"] = runs(bad_runs)
    for _key, rec in bad["sections"]["probe"]["data"]["records"].items():
        rec["env_at_init"]["NCCL_PROTO"] = "Simple"
    for extra, target in ((good_extra, good), (bad_extra, bad)):
        for fn in extra or []:
            fn(target)
    return good, bad


def _set_arg(name, value):
    def apply(s):
        s["sections"]["sglang"]["data"]["server_args"][name] = value
    return apply


def _shell(name, value):
    def apply(s):
        s["sections"]["env"]["data"]["vars"][name] = value
    return apply


def _bump(name, version):
    def apply(s):
        pk = s["sections"].setdefault("packages", {"status": "ok", "data": {"dists": {}, "integrity": {}}})["data"]
        pk["dists"][name] = {"name": name, "version": version, "origin": {"kind": "index"}}
    return apply


def _edit(rel, dist="sglang"):
    def apply(s):
        pk = s["sections"].setdefault("packages", {"status": "ok", "data": {"dists": {}, "integrity": {}}})["data"]
        pk["integrity"].setdefault("modified", {})[rel] = {"dist": dist, "recorded_sha256": "a" * 64,
                                                           "actual_sha256": "b" * 64, "recorded_size": 1,
                                                           "actual_size": 2}
    return apply


def test_verdict_quantifies_regression_and_decomposes_verify_side():
    good, bad = _pair(VERIFY_BAD)
    verdict = result_mod.analyze(good, bad)["verdict"]
    assert verdict["metric"] == "output_throughput" and verdict["direction"] == "higher"
    assert verdict["significant"] and verdict["p_value"] < 0.01 and verdict["method"].startswith("Mann-Whitney")
    assert verdict["good"]["median"] == 94.1 and verdict["bad"]["n"] == 5
    assert verdict["change_pct"] == pytest.approx(-36.0, abs=0.5)
    dec = verdict["decomposition"]
    assert dec["side"] == "verify" and dec["accept_length"]["holds"] and not dec["cycle_time"]["holds"]
    assert dec["cycle_time"]["metric"] == "verify_ms"
    assert verdict["summary"] == ("REGRESSION output_throughput 94.1 \u2192 60.2 tok/s (\u221236%, p<0.01, beyond "
                                  "noise); accept length holds (3.1 \u2192 3.1), verify 19 \u2192 29.1 ms: verify side")
    assert set(verdict["metrics"]) == {"output_throughput", "accept_length", "verify_ms"}
    assert verdict["metrics"]["verify_ms"]["direction"] == "lower"


def test_drafter_side_weights_drafter_components():
    arg = [_set_arg("speculative_num_steps", 2)]
    verify_good, verify_bad = _pair(VERIFY_BAD, bad_extra=arg)
    drafter_good, drafter_bad = _pair(DRAFTER_BAD, bad_extra=arg)
    on_verify = _causes(result_mod.analyze(verify_good, verify_bad))
    on_drafter = result_mod.analyze(drafter_good, drafter_bad)
    assert on_drafter["verdict"]["decomposition"]["side"] == "drafter"
    drafter = _causes(on_drafter)
    # The same two differences; which one leads depends on the decomposition.
    assert on_verify["workers.env.NCCL_PROTO"]["score"] > on_verify["sglang.args.speculative_num_steps"]["score"]
    assert drafter["sglang.args.speculative_num_steps"]["score"] > drafter["workers.env.NCCL_PROTO"]["score"]
    assert on_drafter["causes"][0]["key"] == "sglang.args.speculative_num_steps"


def test_custom_all_reduce_caveat():
    off = _causes(result_mod.analyze(*_pair(VERIFY_BAD, custom_ar_disabled=True)))["workers.env.NCCL_PROTO"]
    on = _causes(result_mod.analyze(*_pair(VERIFY_BAD, custom_ar_disabled=False)))["workers.env.NCCL_PROTO"]
    assert on["score"] < off["score"]
    assert "custom all-reduce is on" in on["why"]
    assert any("disabled" in e for e in off["evidence"])


def test_workers_env_outranks_shell_only_and_parent_only_is_flagged():
    good, bad = _pair(VERIFY_BAD, bad_extra=[_shell("NCCL_ALGO", "Tree"), _shell("NCCL_PROTO", "LL")])
    # NCCL_PROTO=LL in the shell that captured bad, but the workers run with Simple.
    result = result_mod.analyze(good, bad)
    causes = _causes(result)
    assert result["causes"][0]["key"] == "workers.env.NCCL_PROTO"
    # NCCL_ALGO changed in the shell only: the workers never saw it.
    assert causes["env.NCCL_ALGO"]["score"] < causes["workers.env.NCCL_PROTO"]["score"] / 2
    assert "only in the capturing shell" in causes["env.NCCL_ALGO"]["why"]
    assert "workers.parent_only.NCCL_PROTO" in causes
    assert any("NCCL_PROTO=LL is set in the shell that captured bad" in w for w in result["warnings"])


def test_hot_path_edit_outranks_unrelated_bumps():
    good, bad = _pair(VERIFY_BAD, good_extra=[_bump("requests", "2.32.3")],
                      bad_extra=[_bump("requests", "2.32.5"), _edit("sglang/srt/layers/attention/flashinfer_backend.py"),
                                 _edit("somepkg/util.py", dist="somepkg")])
    causes = _causes(result_mod.analyze(good, bad))
    hot = causes["integrity.sglang/srt/layers/attention/flashinfer_backend.py"]
    assert hot["component"] == "attention/kernels"
    assert hot["score"] > causes["integrity.somepkg/util.py"]["score"] > causes["packages.requests"]["score"]


def test_engine_edit_is_linked_to_worker_env_it_sets():
    good, bad = _pair(VERIFY_BAD)
    for side, value in ((good, "1"), (bad, "0")):
        for rec in side["sections"]["probe"]["data"]["records"].values():
            rec["env_at_init"]["NCCL_NVLS_ENABLE"] = value
    for side in (good, bad):
        _bump("requests", "2.32.3")(side)  # a packages section on both sides
    _edit("sglang/srt/entrypoints/engine.py")(bad)
    _edit("sglang/srt/managers/io_struct.py")(bad)
    causes = _causes(result_mod.analyze(good, bad))
    engine = causes["integrity.sglang/srt/entrypoints/engine.py"]
    assert any("the likely mechanism" in e for e in engine["evidence"])
    assert engine["score"] > causes["integrity.sglang/srt/managers/io_struct.py"]["score"]


def test_scores_bounded_deterministic_and_ordered():
    good, bad = _pair(VERIFY_BAD, bad_extra=[_shell("EDITOR", "nvim"), _bump("tqdm", "4.67.1")])
    first = result_mod.analyze(good, bad)
    assert json.dumps(first, sort_keys=True) == json.dumps(result_mod.analyze(good, bad), sort_keys=True)
    scores = [c["score"] for c in first["causes"]]
    assert scores == sorted(scores, reverse=True) and all(0 <= s <= 1 for s in scores)
    # Equal evidence shares a rank (no silent ties): ranks start at 1 and step by one per group;
    # here the same in-process NCCL_PROTO change seen in two TP workers is one group.
    ranks = [c["rank"] for c in first["causes"]]
    assert ranks[0] == 1 and all(b - a in (0, 1) for a, b in zip(ranks, ranks[1:]))
    for a, b in zip(first["causes"], first["causes"][1:]):
        assert (a["rank"] == b["rank"]) == (a["score"] == b["score"] and a["tied"] > 0)
    assert [g["keys"] for g in first["groups"]] == [[c["key"] for c in first["causes"] if c["rank"] == g["rank"]]
                                                    for g in first["groups"]]


def test_metric_choice_and_failed_runs():
    good, bad = _pair(VERIFY_BAD)
    assert result_mod.analyze(good, bad, metric="verify_ms")["verdict"]["metric"] == "verify_ms"
    with pytest.raises(EnvsnapError, match="not in the runs of good, bad"):
        result_mod.analyze(good, bad, metric="nope")
    # No throughput metric: the first metric both sides have.
    g = snap(env={}, runs=runs({"b_metric": [1, 2], "a_metric": [3, 4]}))
    b = snap(env={}, runs=runs({"a_metric": [3, 4], "b_metric": [1, 2], "only_bad": [9]}))
    assert result_mod.analyze(g, b)["verdict"]["metric"] == "a_metric"
    failed = copy_of(bad)
    failed["runs"].append({"ok": False, "exit_code": 1, "metrics": {"output_throughput": 1.0}, "error": "boom"})
    result = result_mod.analyze(good, failed)
    assert result["verdict"]["bad"]["n"] == 5
    assert any("1 of 6 runs failed in bad" in w for w in result["warnings"])
    bare = result_mod.analyze(snap(env={"A": "1"}), snap(env={"A": "2"}))
    assert bare["verdict"]["metric"] is None and bare["verdict"]["summary"].startswith("NO RUNS")
    assert bare["causes"][0]["key"] == "env.A"


@pytest.mark.slow  # 13 CLI runs
def test_a_metric_without_direction_changes_but_never_regresses_or_improves(tmp_path):
    """bench_serving's `concurrency` (and counts) have no better direction: real `envsnap attach` measurements,
    `diff --metric concurrency` in text, JSON and HTML."""
    files = {}
    for label, values in (("good", [1.0, 1.01, 0.99, 1.0]), ("bad", [3.9, 4.0, 4.1, 4.0])):
        files[label] = tmp_path / f"{label}.json"
        assert run_envsnap("capture", "-o", files[label], "--label", label, "--timeout", "60").returncode == 0
        for value in values:
            attached = run_envsnap_in_process("attach", files[label], "--metric", f"concurrency={value}")
            assert attached.returncode == 0, attached.stderr
    as_json = json.loads(run_envsnap_in_process("diff", files["good"], files["bad"], "--metric", "concurrency",
                                                "--format", "json").stdout)
    verdict = as_json["verdict"]
    assert verdict["direction"] == "none" and verdict["significant"]
    assert verdict["summary"].startswith("CHANGE concurrency 1 \u2192 4 (+300%"), verdict["summary"]
    text = run_envsnap_in_process("diff", files["good"], files["bad"], "--metric", "concurrency").stdout
    assert text.startswith("CHANGE concurrency") and "REGRESSION" not in text and "IMPROVEMENT" not in text
    report = tmp_path / "r.html"
    made = run_envsnap_in_process("report", files["good"], files["bad"], "--metric", "concurrency", "-o", report)
    assert made.returncode in (0, 1)
    page = report.read_text()
    assert "change, beyond noise" in page and "no better direction" in page and "none is better" not in page
    assert "worse, beyond noise" not in page and "better, beyond noise" not in page


def test_direction_overrides_from_snapshot():
    g = snap(env={}, runs=runs({"score": [10, 11, 10.5, 10.2]}))
    b = snap(env={}, runs=runs({"score": [20, 21, 20.5, 20.2]}))
    assert result_mod.analyze(g, b)["verdict"]["summary"].startswith("IMPROVEMENT")
    b["metric_directions"] = {"score": "lower"}
    assert result_mod.analyze(g, b)["verdict"]["summary"].startswith("REGRESSION")


# ------------------------------------------------------------------ N snapshots


def _sweep():
    snaps = []
    for day, (nvls, editor, tok) in enumerate([("1", "vim", 94), ("1", "nvim", 95), ("0", "vim", 60),
                                                ("1", "vim", 93), ("0", "nvim", 61), ("0", "vim", 59)]):
        s = snap(f"day{day}", env={"NCCL_NVLS_ENABLE": nvls, "EDITOR": editor, "CONST": "x", "OLDPWD": f"/d{day}"},
                 runs=runs({"output_throughput": [tok, tok + 0.5, tok - 0.5]}))
        snaps.append(s)
    return snaps


def test_associate_ranks_the_key_that_tracks_the_metric():
    snaps = _sweep()
    result = association.associate(snaps, [f"s{i}.json" for i in range(len(snaps))])
    keys = [a["key"] for a in result["associations"]]
    assert keys[0] == "env.NCCL_NVLS_ENABLE" and result["associations"][0]["score"] > 0.99
    assert result["associations"][0]["p_value"] == pytest.approx(0.1)  # 2 of C(6,3)=20 relabelings
    assert "env.CONST" not in keys and "env.OLDPWD" not in keys  # constant / volatile
    assert keys.index("env.EDITOR") > 0 and result["metric"] == "output_throughput"
    with pytest.raises(EnvsnapError, match="at least 3"):
        association.associate(snaps[:2], ["a", "b"])
    no_runs = [snap("x", env={})] + snaps[:2]
    with pytest.raises(EnvsnapError, match="no successful runs"):
        association.associate(no_runs, ["x.json", "a", "b"])


def test_rank_cli(tmp_path):
    paths = []
    for i, s in enumerate(_sweep()):
        path = tmp_path / f"day{i}.json"
        path.write_text(json.dumps(s))
        paths.append(path)
    text = run_envsnap("rank", *paths)
    assert text.returncode == 0, text.stderr
    assert "association with output_throughput across 6 snapshots" in text.stdout
    assert "1. [1.00] env.NCCL_NVLS_ENABLE" in text.stdout
    data = json.loads(run_envsnap_in_process("rank", *paths, "--format", "json").stdout)
    assert data["associations"][0]["key"] == "env.NCCL_NVLS_ENABLE"
    two = run_envsnap_in_process("rank", *paths[:2])
    assert two.returncode == 2 and "at least 3 snapshots" in two.stderr and two.stderr.count("\n") == 1


def test_a_value_unique_to_every_snapshot_is_flagged_and_ranked_after_every_testable_key():
    """A process title holding a fresh port per launch splits the runs by snapshot: the largest eta squared any
    key can have, and nothing a permutation can test (it ranked first, 0.97, above the real cause)."""
    snaps = _sweep()
    for day, s in enumerate(snaps):
        s["sections"]["env"]["data"]["vars"]["SERVER_TITLE"] = f"python -m server --port {41000 + day}"
    result = association.associate(snaps, [f"s{i}.json" for i in range(len(snaps))])
    items = {a["key"]: a for a in result["associations"]}
    title = items["env.SERVER_TITLE"]
    assert title["unique_per_snapshot"] and not title["testable"] and title["score"] > 0.99
    assert "cannot be tested" in title["why"]
    testable = [a for a in result["associations"] if a["testable"]]
    assert testable and all(not a["unique_per_snapshot"] for a in testable)
    assert result["associations"][0]["key"] == "env.NCCL_NVLS_ENABLE"
    assert title["rank"] > max(a["rank"] for a in testable)
    assert any(w.startswith("1 key differs in every snapshot (env.SERVER_TITLE)") for w in result["warnings"])
    from envsnap.render.text import render_rank

    text = render_rank(result)
    assert f"  {title['rank']}. [untested] env.SERVER_TITLE  unique per snapshot (none)" in text
    assert text.index("1. [1.00] env.NCCL_NVLS_ENABLE") < text.index("[untested] env.SERVER_TITLE")


def test_a_command_environment_read_in_some_snapshots_only_is_left_out_with_a_warning():
    """rank's views, like diff's: where one snapshot mapped the benchmark's process but never read its environment,
    the workers' variables are unknown there. They are not candidates; the shell's variable is; a warning says so."""
    snaps = [sampled_run({"PLANTED": value}, read=True, metric=(tok, tok + 0.5, tok - 0.5))
             for value, tok in (("1", 100.0), ("1", 101.0), ("0", 60.0), ("0", 61.0))]
    for run in snaps[3]["runs"]:
        run.pop("telemetry")
    result = association.associate(snaps, [f"s{i}.json" for i in range(len(snaps))])
    keys = [a["key"] for a in result["associations"]]
    assert keys[0] == "env.PLANTED"
    assert not [k for k in keys if k.startswith("workers.")]
    assert any("benchmark command's environment was read in 3 of 4 snapshots" in w for w in result["warnings"])
