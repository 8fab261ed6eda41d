"""Semantic differences (envsnap.diff) and the `envsnap diff` command."""
from __future__ import annotations

import json
import random

import pytest
from helpers import REPO_ROOT, run_envsnap, run_envsnap_in_process
from helpers.diff import copy_of, sampled_run, shuffled, snap, workers, write_unsorted

from envsnap.analysis.compare import diff, views
from envsnap.model import store

EXAMPLE_GOOD = REPO_ROOT / "snapshots" / "eagle3-tp8-good.json"
EXAMPLE_BAD = REPO_ROOT / "snapshots" / "eagle3-tp8-bad.json"


def _keys(comparison, volatile=False):
    return {d.key: d for d in comparison.differences if volatile or not d.volatile}


def test_identical_snapshots_have_no_differences():
    a = snap(env={"PATH": "/usr/bin", "NCCL_PROTO": "LL"})
    assert diff.compare(a, copy_of(a)).differences == []


def test_env_changes_and_volatile_fields():
    a = snap(env={"PATH": "/usr/bin", "NCCL_PROTO": "LL", "OLDPWD": "/a", "GONE": "1"})
    b = snap(env={"PATH": "/usr/bin", "NCCL_PROTO": "Simple", "OLDPWD": "/b", "NEW": "x"})
    keys = _keys(diff.compare(a, b), volatile=True)
    assert keys["env.NCCL_PROTO"].change == "changed" and not keys["env.NCCL_PROTO"].volatile
    assert keys["env.NCCL_PROTO"].flat_keys == ["env.vars.NCCL_PROTO"]
    assert keys["env.GONE"].change == "removed" and keys["env.NEW"].change == "added"
    assert keys["env.OLDPWD"].volatile  # the shell's previous directory says nothing
    assert "env.PATH" not in keys


def test_workers_aggregate_disagree_and_parent_only():
    env = {"PATH": "/usr/bin", "NCCL_NVLS_ENABLE": "1"}
    good = snap(env=env, **workers({f"scheduler_TP{i}": dict(env) for i in range(4)}))
    bad_workers = {f"scheduler_TP{i}": dict(env, NCCL_NVLS_ENABLE="0") for i in range(4)}
    bad_workers["scheduler_TP3"]["OMP_NUM_THREADS"] = "1"  # one worker differs from its peers
    bad = snap(env=env, **workers(bad_workers))
    comp = diff.compare(good, bad)
    keys = _keys(comp)
    assert keys["workers.env.NCCL_NVLS_ENABLE"].good == "1" and keys["workers.env.NCCL_NVLS_ENABLE"].bad == "0"
    assert len(keys["workers.env.NCCL_NVLS_ENABLE"].flat_keys) == 4
    assert all(f.startswith("probe.records.scheduler_TP") for f in keys["workers.env.NCCL_NVLS_ENABLE"].flat_keys)
    disagree = keys["workers.disagree.OMP_NUM_THREADS"]
    assert disagree.change == "added" and disagree.bad["scheduler_TP3"] == "1" and disagree.bad["scheduler_TP0"] is None
    assert "1 on scheduler_TP3" in diff.display(disagree.subject, disagree.bad)
    parent_only = keys["workers.parent_only.NCCL_NVLS_ENABLE"]
    assert parent_only.change == "added" and parent_only.bad == {"parent": "1", "workers": "0"}
    # GOOD had no mismatch: it reads what the shell and the workers had there, never "none".
    assert (parent_only.side_text("good"), parent_only.side_text("bad")) == ("shell 1, workers 1", "shell 1, workers 0")
    assert "env.NCCL_NVLS_ENABLE" not in keys  # the shell did not change
    assert any("NCCL_NVLS_ENABLE=1 is set in the shell that captured bad" in w for w in comp.warnings)
    [trap] = comp.shell_traps
    assert trap.warning() in comp.warnings and trap.side == "bad"


def test_probe_is_preferred_over_proc_environ_and_proc_only_warns():
    env = {"NCCL_PROTO": "LL"}
    via_proc = snap(env=env, **workers({"scheduler_TP0": env, "scheduler_TP1": env}, probe=False))
    view = views.build_view(via_proc, views.usable_sections([via_proc]))
    assert view.worker_env_source == "proc" and view.workers == ["scheduler_TP0", "scheduler_TP1"]
    comp = diff.compare(via_proc, copy_of(via_proc))
    assert any("/proc/PID/environ" in w for w in comp.warnings)
    via_probe = snap(env=env, **workers({"scheduler_TP0": env}))
    via_probe["sections"]["processes"]["data"]["processes"]["scheduler_TP0"]["environ"] = {"NCCL_PROTO": "stale"}
    view = views.build_view(via_probe, views.usable_sections([via_probe]))
    assert view.worker_env_source == "probe" and view.values["workers"]["workers.env.NCCL_PROTO"] == "LL"


def test_section_ok_on_one_side_only_is_a_difference_and_a_warning():
    gpu = {"driver_version": "580.159.04", "gpus": {"0": {"name": "NVIDIA H200"}}}
    good = snap(env={}, nvidia=gpu)
    bad = snap(env={}, nvidia={"status": "unavailable", "reason": "NVML: library not found"})
    comp = diff.compare(good, bad)
    keys = _keys(comp)
    assert keys["nvidia.status"].category == "gpu"
    assert keys["nvidia.status"].bad == "unavailable: NVML: library not found"
    assert "nvidia unavailable in bad (NVML: library not found): can't compare GPU state" in comp.warnings
    assert not any(k.startswith("gpu.") for k in keys)  # half a comparison would mislead


def test_same_change_on_every_gpu_is_one_difference():
    def nv(limit, temps):
        return {"driver_version": "580.159.04", "count": 4, "gpus": {
            str(i): {"name": "NVIDIA H200", "power": {"limit_w": limit}, "temperature": {"gpu_c": temps + i},
                     "clocks": {"max": {"sm": 1980 if i else 1500}}} for i in range(4)}}
    comp = diff.compare(snap(nvidia=nv(700.0, 30)), snap(nvidia=nv(500.0, 40)))
    keys = _keys(comp)
    assert "gpu.*.power.limit_w" in keys and len(keys["gpu.*.power.limit_w"].flat_keys) == 4
    assert not any(k.startswith("gpu.") and "temperature" in k for k in keys)
    assert "gpu.*.temperature.gpu_c" not in keys


def test_packages_integrity_startup_git_files_sglang_nccl():
    def pkgs(torch_version, modified):
        return {"count": 2, "dists": {
            "torch": {"name": "torch", "version": torch_version, "origin": {"kind": "index"}},
            "requests": {"name": "requests", "version": "2.32.3", "origin": {"kind": "index"}}},
            "integrity": {"mode": "py", "checked_files": 10, "modified": modified, "missing": {}}}
    edit = {"sglang/srt/layers/moe/topk.py": {"dist": "sglang", "recorded_sha256": "a" * 64,
                                              "actual_sha256": "b" * 64, "recorded_size": 10, "actual_size": 12}}
    hook = {"kind": "sitecustomize", "sha256": "c" * 64, "env_mentions": ["NCCL_PROTO"], "touches_env": True}
    repo = {"roles": ["repo"], "head": "1" * 40, "branch": "main", "dirty": {}, "stash": {}}
    dirty_repo = dict(repo, dirty={"a.py": {"status": "M", "sha256": "d" * 64}},
                      stash={"stash@{0}": {"sha": "e" * 40, "message": "On main: wip"}})
    good = snap(packages=pkgs("2.8.0", {}), python={"version": "3.11.7", "startup_hooks": {}},
                git={"repos": {"/src/sglang": repo}}, files={"entries": {"/etc/a.yaml": {"size": 1, "sha256": "1"}}},
                sglang={"version": "0.5.5", "server_args": {"tp_size": 8, "cuda_graph_bs": [1, 2, 4]}},
                nccl={"version": "2.27.3", "ranks": {"0": {"env": {"NCCL_PROTO": "LL"}, "pid": 1},
                                                     "1": {"env": {"NCCL_PROTO": "LL"}, "pid": 2}}})
    bad = snap(packages=pkgs("2.9.0", edit), python={"version": "3.11.7", "startup_hooks": {"/site/sitecustomize.py": hook}},
               git={"repos": {"/src/sglang": dirty_repo}}, files={"entries": {"/etc/a.yaml": {"size": 2, "sha256": "2"}}},
               sglang={"version": "0.5.5", "server_args": {"tp_size": 4, "cuda_graph_bs": [4, 2, 1]}},
               nccl={"version": "2.27.3", "ranks": {"0": {"env": {"NCCL_PROTO": "Simple"}, "pid": 3},
                                                    "1": {"env": {"NCCL_PROTO": "LL"}, "pid": 4}}})
    keys = _keys(diff.compare(good, bad))
    assert keys["packages.torch"].flat_keys == ["packages.dists.torch.version"]
    assert diff.display(keys["packages.torch"].subject, keys["packages.torch"].bad) == "2.9.0"
    assert keys["integrity.sglang/srt/layers/moe/topk.py"].change == "added"
    topk = keys["integrity.sglang/srt/layers/moe/topk.py"]
    assert diff.display(topk.subject, topk.bad).startswith("modified (sha256 bbbb")
    assert keys["startup./site/sitecustomize.py"].change == "added"
    assert keys["git./src/sglang.dirty.a.py"].change == "added"
    assert diff.display(keys["git./src/sglang.stash"].subject, keys["git./src/sglang.stash"].bad) == "1 entry: On main: wip"
    assert keys["files./etc/a.yaml"].change == "changed"
    assert keys["sglang.args.tp_size"].good == 8
    assert "sglang.args.cuda_graph_bs" not in keys  # the same set, listed in another order
    assert keys["nccl.disagree.env.NCCL_PROTO"].bad == {"0": "Simple", "1": "LL"}
    # What each difference is about travels as fields: nobody takes the key string apart.
    nccl = keys["nccl.disagree.env.NCCL_PROTO"].to_json()
    assert (nccl["where"], nccl["variable"], nccl["aspect"]) == ("nccl", "NCCL_PROTO", "disagree")
    dirty = keys["git./src/sglang.dirty.a.py"].to_json()
    assert (dirty["where"], dirty["entity"], dirty["aspect"], dirty["item"]) == ("git", "/src/sglang", "dirty", "a.py")
    assert keys["integrity.sglang/srt/layers/moe/topk.py"].subject.entity == "sglang/srt/layers/moe/topk.py"
    assert keys["packages.torch"].subject.entity == "torch" and keys["packages.torch"].variable is None
    assert "packages.requests" not in keys
    # A side without a key reads in words a user understands: git's letters become words.
    assert keys["git./src/sglang.dirty.a.py"].side_text("good") == "clean"
    assert keys["git./src/sglang.dirty.a.py"].side_text("bad") == "modified (sha256 dddddddddddd)"


def test_missing_sides_read_as_what_they_mean():
    repo = {"roles": ["repo"], "head": "1" * 40, "branch": "main", "dirty": {}, "untracked": {}}
    dists = {"torch": {"name": "torch", "version": "2.8.0", "origin": {"kind": "index"}}}
    good = snap(packages={"dists": dict(dists), "integrity": {}}, git={"repos": {"/src/app": repo}})
    bad = snap(packages={"dists": dict(dists, ipython={"name": "ipython", "version": "9.7.0"}), "integrity": {}},
               git={"repos": {"/src/app": dict(repo, untracked={"notes/nvls.md": {"sha256": "4" * 64}})}})
    keys = _keys(diff.compare(good, bad))
    ipython = keys["packages.ipython"]
    assert (ipython.side_text("good"), ipython.side_text("bad")) == ("not installed", "9.7.0")
    note = keys["git./src/app.untracked.notes/nvls.md"]
    assert (note.side_text("good"), note.side_text("bad")) == ("absent", "untracked (sha256 444444444444)")
    reverse = _keys(diff.compare(bad, good))["packages.ipython"]
    assert (reverse.side_text("good"), reverse.side_text("bad")) == ("9.7.0", "not installed")


def test_ordered_lists_stay_ordered():
    a = snap(python={"version": "3.11.7", "sys_path": ["/a", "/b"]})
    b = snap(python={"version": "3.11.7", "sys_path": ["/b", "/a"]})
    assert "python.sys_path" in _keys(diff.compare(a, b))  # import order decides which copy wins


# ------------------------------------------------------------------ the CLI
# Exit statuses and error lines from a real process; what diff writes through the CLI's entry point called
# in this process (helpers.run_envsnap_in_process: the same command without an interpreter's start-up).


def test_cli_same_file_exits_0_and_differences_exit_1():
    same = run_envsnap("diff", EXAMPLE_GOOD, EXAMPLE_GOOD)
    assert same.returncode == 0, same.stderr
    assert "no relevant differences" in same.stdout
    differs = run_envsnap("diff", EXAMPLE_GOOD, EXAMPLE_BAD)
    assert differs.returncode == 1, differs.stderr
    first = differs.stdout.splitlines()[0]
    assert first.startswith("REGRESSION output_throughput") and "verify side" in first


def test_cli_errors_are_one_line_exit_2(tmp_path):
    missing = run_envsnap("diff", tmp_path / "nope.json", EXAMPLE_BAD)
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "no such file" in missing.stderr
    notjson = tmp_path / "x.json"
    notjson.write_text("{ nope")
    assert run_envsnap("diff", notjson, EXAMPLE_BAD).returncode == 2
    unknown = run_envsnap("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "--metric", "nonsense")
    assert unknown.returncode == 2 and "'nonsense'" in unknown.stderr and "Traceback" not in unknown.stderr
    assert run_envsnap("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "--format", "xml").returncode == 2


def test_cli_output_file_is_atomic_and_not_overwritten(tmp_path):
    out = tmp_path / "result.json"
    first = run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "--format", "json", "-o", out)
    assert first.returncode == 1 and first.stdout == ""
    result = json.loads(out.read_text())
    # groups (causes that cannot be told apart) and context (parts of the stack in play): the ranking's evidence.
    assert set(result) == {"schema_version", "good", "bad", "verdict", "causes", "groups", "context", "differences",
                           "patches", "warnings", "tables"}
    out.write_text("precious")
    refused = run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "-o", out)
    assert refused.returncode == 2 and "--force" in refused.stderr and out.read_text() == "precious"
    forced = run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "-o", out, "--force")
    assert forced.returncode == 1 and out.read_text().startswith("REGRESSION")
    assert [p.name for p in tmp_path.iterdir()] == ["result.json"]  # no temp file left behind


def test_cli_json_shape_top_all_and_html(tmp_path):
    top = json.loads(run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "--format", "json", "--top", "3").stdout)
    assert [c["rank"] for c in top["causes"]] == [1, 2, 3]
    cause = top["causes"][0]
    subject_fields = {"where", "entity", "aspect", "item", "variable", "node"}
    # factors: the prior and every factor that moved the score, with its value; tied: how many
    # other causes share its rank.
    assert set(cause) == {"rank", "key", "category", "component", "score", "good", "bad", "change", "absent", "why",
                          "evidence", "factors", "tied", "patches", "reach", "folded"} | subject_fields
    assert cause["factors"][0]["factor"] == "prior" and all("value" in f and f["why"] for f in cause["factors"])
    assert 0 <= cause["score"] <= 1 and "\n" not in cause["why"]
    assert set(top["verdict"]) >= {"metric", "direction", "good", "bad", "change_pct", "significant", "p_value",
                                   "method", "summary", "metrics", "decomposition", "mechanism"}
    assert set(top["differences"][0]) == {"key", "category", "change", "good", "bad", "absent", "volatile",
                                          "flat_keys"} | subject_fields
    assert not any(d["volatile"] for d in top["differences"])
    everything = json.loads(run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "--format", "json", "--all").stdout)
    assert any(d["volatile"] for d in everything["differences"])
    assert len(everything["differences"]) > len(top["differences"])
    verbose = run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "-v").stdout
    assert "  [workers]" in verbose and "changed workers.env.NCCL_NVLS_ENABLE" in verbose
    html = run_envsnap_in_process("diff", EXAMPLE_GOOD, EXAMPLE_BAD, "--format", "html", "-o", tmp_path / "r.html")
    assert html.returncode == 1, html.stderr
    assert (tmp_path / "r.html").read_text().lstrip().lower().startswith("<!doctype html>")


def test_shuffled_input_gives_byte_identical_output(tmp_path):
    """Keys in any order, unordered lists in any order, runs in any order: the same bytes out."""
    from envsnap.analysis.result import analyze
    from envsnap.render.text import render_diff

    rng = random.Random(11)
    outputs = set()
    for attempt in range(4):
        sides = []
        for name, path in (("good", EXAMPLE_GOOD), ("bad", EXAMPLE_BAD)):
            data = store.load(str(path))
            target = tmp_path / f"{name}{attempt}.json"
            write_unsorted(shuffled(data, rng) if attempt else data, target)
            sides.append(store.load(str(target)))
        result = analyze(*sides, include_volatile=True, good_file="good.json", bad_file="bad.json")
        outputs.add(json.dumps(result, sort_keys=True, indent=1, ensure_ascii=False) + render_diff(result, verbose=True))
    assert len(outputs) == 1, "shuffling keys and unordered lists changed the output"


@pytest.mark.slow
def test_unchanged_real_capture_pair_exits_0(tmp_path):
    """Two real captures a moment apart differ only in volatile fields: exit 0."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path in (a, b):
        proc = run_envsnap("capture", "-o", path, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    result = run_envsnap("diff", a, b, "--format", "json")
    found = json.loads(result.stdout)
    relevant = found["differences"]
    # envsnap is installed editable from this checkout, so the capture records it; on a shared
    # workstation someone may edit it between the two captures. A process busy beside one capture only (another
    # job on a loaded machine) is a neighbour with no work to delay: ruled out, never a cause. Nothing else may differ.
    tiers = {c["key"]: c["reach"]["tier"] for c in found["causes"]}
    foreign = [d["key"] for d in relevant if not d["key"].startswith(f"git.{REPO_ROOT}.")
               and not (d["key"].startswith("neighbour.") and tiers.get(d["key"]) == "cannot")]
    assert foreign == [] and result.returncode == (1 if relevant else 0), foreign
    with_all = json.loads(run_envsnap("diff", a, b, "--all", "--format", "json").stdout)["differences"]
    assert len(with_all) >= len(relevant)
    assert all(d["volatile"] for d in with_all if d["key"] not in {r["key"] for r in relevant})


def test_a_moved_head_does_not_hide_the_checkouts_other_changes(tmp_path, git_repo):
    """A new commit changes the repository's presence value (branch@head): that must not swallow the
    dirty file and the stash that changed with it (real captures of a real repository)."""
    good, bad = tmp_path / "good.json", tmp_path / "bad.json"
    assert run_envsnap("capture", "-o", good, "--timeout", "60", cwd=git_repo).returncode == 0
    (git_repo / "b.py").write_text("y = 1\n")
    git_repo.git("add", "b.py")
    git_repo.git("commit", "-q", "-m", "second")
    (git_repo / "a.py").write_text("x = 2  # dirty\n")
    assert run_envsnap("capture", "-o", bad, "--timeout", "60", cwd=git_repo).returncode == 0
    result = json.loads(run_envsnap_in_process("diff", good, bad, "--format", "json").stdout)
    top = str(git_repo.resolve())
    keys = {d["key"]: d for d in result["differences"] if d["key"].startswith(f"git.{top}")}
    assert set(keys) == {f"git.{top}.commit", f"git.{top}.dirty.a.py"}, sorted(keys)
    assert keys[f"git.{top}.dirty.a.py"]["change"] == "added" and keys[f"git.{top}.dirty.a.py"]["absent"] == "clean"


def test_one_change_on_every_worker_keeps_the_key_its_rule_matches():
    """The same shadowed module on both TP workers is one difference, spelled as view_key spells a process's
    module ("workers.*.modules.shadowed.NAME"), so the rule for a worker's shadowed module still applies."""
    from envsnap.analysis.knowledge import rule_for

    envs = {"scheduler_TP0": {}, "scheduler_TP1": {}}
    good = snap("good", env={}, **workers(envs))
    bad = snap("bad", env={}, **workers(envs))
    for record in bad["sections"]["probe"]["data"]["records"].values():
        record["modules"] = {"shadowed": {"json": {"path": "/srv/app/json.py", "stdlib": "/usr/lib/python3.12/json"}}}
    shadowed = [d for d in diff.compare(good, bad).differences if "shadowed" in d.key]
    assert [d.key for d in shadowed] == ["workers.*.modules.shadowed.json"]
    # the same rule as the per-worker spelling it was written for, not the default for unknown keys
    assert rule_for(shadowed[0].key) == rule_for("workers.scheduler_TP0.modules.shadowed.json")
    assert rule_for(shadowed[0].key).weight > 0.05


def test_a_command_process_read_on_one_side_only_is_not_compared():
    """A short benchmark process can end between two samples in every run of one side: its environment and maps
    are unknown there, not empty, so they are no difference (a warning says so); the shell's change remains."""
    good = sampled_run({"PLANTED": "1", "HOME": "/root"}, read=False)
    bad = sampled_run({"PLANTED": "0", "HOME": "/root"}, read=True)
    comparison = diff.compare(good, bad)
    assert sorted(_keys(comparison)) == ["env.PLANTED"]
    assert any("process python-0 was read on BAD only" in w for w in comparison.warnings)
    assert not any("/proc/PID/environ" in w for w in comparison.warnings)
    # Read on both sides, the same process's environment and maps are compared as ever.
    both = diff.compare(sampled_run({"PLANTED": "1"}, read=True), sampled_run({"PLANTED": "0"}, read=True))
    assert {"env.PLANTED", "workers.env.PLANTED"} <= set(_keys(both))
    assert not any("read on" in w for w in both.warnings)


def test_a_command_environment_read_on_one_side_only_is_not_compared():
    """A short benchmark process can be mapped and gone before its environment is read: its maps mark it seen on
    both sides, but one side has no environment for the workers it stands in for. Those variables are unknown
    there, not unset: no workers.env difference, a warning that says so; the shell's change remains."""
    good = sampled_run({"PLANTED": "1", "HOME": "/root"}, read=True)
    bad = sampled_run({"PLANTED": "0", "HOME": "/root"}, read=True)
    for run in bad["runs"]:
        run.pop("telemetry")  # the environment was never read; the maps were
    comparison = diff.compare(good, bad)
    assert not [k for k in _keys(comparison) if k.startswith("workers.")]
    assert "env.PLANTED" in _keys(comparison)
    assert any("benchmark command's environment was read on GOOD only" in w for w in comparison.warnings)
    assert not any("/proc/PID/environ" in w for w in comparison.warnings)
