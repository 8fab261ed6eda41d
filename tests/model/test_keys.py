"""model/keys.py: subjects and their view keys, the flat keys of real snapshots, and the rules' key spaces.

Snapshots: snapshots/h200-*.json are measured captures (an H200, see snapshots/README.md);
snapshots/eagle3-tp8-*.json is the illustrative pair built from real captures of a stand-in process tree
(processes, probe records, sglang, files).
"""
import json
from pathlib import Path

import pytest

from envsnap.analysis import knowledge
from envsnap.analysis.compare import diff, views
from envsnap.analysis.tables.hardware import hardware_tables
from envsnap.model import keys
from envsnap.model.keys import ANY, FLAG, FLAT, VIEW, EnvSource, Subject
from envsnap.model.rules import FieldRule, check_spaces, rule, volatile
from envsnap.model.snapshot import flatten, section_data

ROOT = Path(__file__).resolve().parents[2]
MEASURED = ("h200-spec-decode-good.json", "h200-spec-decode-bad.json", "h200-nccl-probe.json", "h200-capture-deep.json")
ILLUSTRATIVE = ("eagle3-tp8-good.json", "eagle3-tp8-bad.json")


def _load(name):
    return json.loads((ROOT / "snapshots" / name).read_text())


def _view(snap):
    usable = views.usable_sections([snap])
    return views.build_view(snap, usable, builds=views.comparable_builds([snap]))


def _flat_paths(snap):
    """Every flattened key of a snapshot and every prefix of one (a dict-valued path is a flat key too)."""
    out = set()
    for key in flatten(snap):
        parts = key.split(".")
        out.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return out


@pytest.mark.parametrize("name", MEASURED + ILLUSTRATIVE)
def test_every_view_key_is_its_subjects_key_and_back(name):
    """Subject -> key -> subject over every key of a real snapshot's view: the key View.put stored is
    view_key of the subject stored with it, and looking the key up gives that subject back."""
    view = _view(_load(name))
    assert view.subjects
    for key, subject in view.subjects.items():
        assert keys.view_key(subject) == key
        assert view.subject_of(keys.view_key(subject)) == subject


@pytest.mark.parametrize("name", MEASURED + ILLUSTRATIVE)
def test_every_flat_key_of_a_view_is_a_path_of_its_snapshot(name):
    """The flat keys the view records (built by the keys.py helpers) are paths snapshot.flatten writes."""
    snap = _load(name)
    view = _view(snap)
    paths = _flat_paths(snap) | {"run_session.command"}  # the run command's argv sits outside the sections
    itemised = f".{views.flags.ITEM_FIELD}."  # a command line's items: named beside the list they came from
    flats = {f for found in view.flats.values() for f in found if itemised not in f}
    assert flats
    assert sorted(f for f in flats if f not in paths) == []


def test_flat_helpers_name_paths_of_measured_snapshots():
    probe = _load("h200-nccl-probe.json")
    paths = _flat_paths(probe)
    name = sorted(section_data(probe, "env")["vars"])[0]
    assert keys.env_var_flat(name) in paths
    gpu, info = sorted(section_data(probe, "nvidia")["gpus"].items())[0]
    attr = sorted(info)[0]
    assert keys.gpu_flat(gpu, attr) in paths and keys.gpu_flat(int(gpu)) in paths
    rank, logged = sorted(section_data(probe, "nccl")["ranks"].items())[0]
    assert keys.nccl_rank_flat(rank, sorted(logged)[0]) in paths
    record, fields = sorted(section_data(probe, "probe")["records"].items())[0]
    assert keys.probe_record_flat(record, sorted(fields)[0]) in paths


def test_flat_helpers_name_paths_of_processes_and_integrity():
    snap = _load("eagle3-tp8-good.json")
    paths = _flat_paths(snap)
    process, proc = next((k, p) for k, p in sorted(section_data(snap, "processes")["processes"].items())
                         if isinstance(p.get("environ"), dict) and p["environ"])
    assert keys.process_flat(process, "environ", sorted(proc["environ"])[0]) in paths
    rel = sorted(section_data(snap, "packages")["integrity"]["modified"])[0]
    assert keys.integrity_flat("modified", rel) in paths
    assert keys.integrity_file(keys.integrity_key(rel)) == rel
    # the spelled-out integrity key is the one view_key gives its subject
    assert keys.integrity_key(rel) == keys.view_key(Subject("integrity", rel))


def test_env_sources_name_the_variable_where_the_snapshot_holds_it():
    snap = _load("eagle3-tp8-good.json")
    paths = _flat_paths(snap)
    process, proc = next((k, p) for k, p in sorted(section_data(snap, "processes")["processes"].items())
                         if isinstance(p.get("environ"), dict) and p["environ"])
    record, fields = next((k, r) for k, r in sorted(section_data(snap, "probe")["records"].items())
                          if isinstance(r.get("env_at_start"), dict) and r["env_at_start"])
    cases = [(EnvSource("env"), sorted(section_data(snap, "env")["vars"])[0], "env"),
             (EnvSource("process", process), sorted(proc["environ"])[0], f"workers.{process}"),
             (EnvSource("probe", record, "env_at_start"), sorted(fields["env_at_start"])[0],
              f"probe.{record}.env_at_start")]
    for source, name, label in cases:
        assert source.flat(name) in paths
        assert source.label == label
    assert EnvSource("nccl_conf").flat("NCCL_PROTO") == "nccl_conf.settings.NCCL_PROTO"


def test_node_qualified_keys_and_instances():
    assert keys.qualify(None, "env.NCCL_ALGO") == "env.NCCL_ALGO"
    assert keys.qualify("node-a", "env.NCCL_ALGO") == "node-a/env.NCCL_ALGO"
    # one change on several GPUs or processes: the instance's name replaced by "*" or "0,1"
    assert keys.view_key(Subject("gpu", "*", "power.limit_w")) == "gpu.*.power.limit_w"
    assert keys.view_key(Subject("process", "0,1", "cmdline")) == "workers.0,1.cmdline"


def test_the_run_commands_own_processes_in_the_libraries_view_and_probe_records():
    """The libraries view names the run command's processes run/<key>; a probe record of one run of
    `envsnap run` is "<run>/<process>": both read back to the process a user knows."""
    own = keys.run_process("python-2")
    assert own == "run/python-2" and keys.run_process_name(own) == "python-2"
    assert keys.run_process_name("scheduler_TP0") is None
    assert keys.run_process_words(own) == "python-2 (the benchmark command)"
    assert keys.run_process_words("scheduler_TP0") == "scheduler_TP0"
    assert keys.record_process("3/python-0") == "python-0"
    assert keys.record_process("scheduler_TP0") == "scheduler_TP0"
    assert keys.record_process("x/python-0") == "x/python-0"


def test_a_processes_own_run_series_in_the_mechanism():
    name = keys.series_key("cpus", "python-0")
    assert name == "cpus.python-0" and keys.series_of(name) == ("cpus", "python-0")
    assert keys.series_of("cpus") == ("cpus", "")


def test_process_keys_and_their_aspects():
    run_own = keys.command_process("python-0")
    assert keys.command_process_name(run_own) == "python-0"
    assert keys.command_process_name("scheduler_TP0") is None
    assert keys.view_key(Subject("process", "scheduler_TP0", keys.aspect(FLAG, "--tp"))) == "workers.scheduler_TP0.flag.--tp"
    assert keys.view_key(Subject("process", run_own, "cmdline")) == "command.python-0.cmdline"
    assert keys.view_key(Subject("process", "w", keys.aspect(keys.SHADOWED, "torch"))) == "workers.w.modules.shadowed.torch"
    assert keys.view_key(Subject("process", "w", keys.aspect(keys.MODULE, "numpy"))) == "workers.w.modules.elsewhere.numpy"
    assert keys.aspect_parts(keys.aspect(FLAG, "--tp")) == (FLAG, "--tp")
    assert keys.aspect_kind("program") == "" and keys.aspect_kind("flag.--tp") == FLAG


def test_variable_keys_by_whose_environment():
    name = "NCCL_PROTO"
    found = {where: keys.view_key(keys.env_subject(where, name)) for where in ("env", "workers", "parent_only", "nccl",
                                                                            "nccl_conf")}
    assert found == {"env": "env.NCCL_PROTO", "workers": "workers.env.NCCL_PROTO",
                     "parent_only": "workers.parent_only.NCCL_PROTO", "nccl": "nccl.env.NCCL_PROTO",
                     "nccl_conf": "nccl_conf.NCCL_PROTO"}
    assert keys.worker_env_key(name, disagree=True) == "workers.disagree.NCCL_PROTO"
    assert keys.nccl_field_subject("env.NCCL_PROTO", True) == keys.env_subject("nccl", name, keys.DISAGREE)
    assert keys.view_key(keys.nccl_field_subject("channels", True)) == "nccl.disagree.channels"


def test_rule_for_variable_is_the_rule_wherever_the_variable_shows_up():
    for name in ("NCCL_PROTO", "OMP_NUM_THREADS", "SGLANG_RUN_ID", "SGLANG_SOMETHING_NEW"):
        rule_ = knowledge.rule_for_variable(name)
        assert rule_ == knowledge.rule_for(keys.worker_env_key(name)) == knowledge.rule_for(keys.env_var_flat(name))


# ---------------------------------------------------------------- key spaces of the rules

FIELDS = {"processes": frozenset({"processes"}), "sglang": frozenset({"server_args", "version"}),
          "nvidia": frozenset({"gpus"}), "env": frozenset({"vars", "count"})}


@pytest.mark.parametrize("pattern, space", [
    ("*.NCCL_PROTO", ANY), ("host.cpu.model", ANY), ("sglang.version", ANY),
    ("processes.processes.*.cmdline*", FLAT), ("nvidia.gpus.*.temperature*", FLAT), ("sglang.server_args.x", FLAT),
    ("sglang.startup_time", FLAT), ("env.vars.*", FLAT),
    ("workers.*.cpu_affinity", VIEW), ("gpu.*.clocks.max*", VIEW), ("sglang.args.tp_size", VIEW),
    ("env.NCCL_PROTO", VIEW), ("integrity.*", VIEW),
])
def test_pattern_space(pattern, space):
    assert keys.pattern_space(pattern, FIELDS) == space


def test_the_table_builds_with_every_rule_in_its_space():
    table = knowledge.all_rules()
    check_spaces(table, knowledge.section_fields())
    assert {r.space for r in table} == {ANY, FLAT, VIEW}


@pytest.mark.parametrize("wrong", [
    volatile("workers.*.pid", "a volatile rule written against a view key"),
    rule("nvidia.gpus.*.name", "gpu", "none", 0.3, "a weighted rule written against a snapshot path the view renames"),
    FieldRule("gpu.*.name", "gpu", space=ANY),
    FieldRule("sglang.server_args.tp_size", "sglang", space=VIEW),
])
def test_check_spaces_rejects_a_rule_in_the_other_space(wrong):
    with pytest.raises(ValueError, match="wrong key space"):
        check_spaces([wrong], knowledge.section_fields())


def test_check_spaces_accepts_rules_declared_for_their_space():
    check_spaces([volatile("nvidia.gpus.*.fan*", "a fan"), rule("gpu.*.name", "gpu", "none", 0.3, "the model"),
                  volatile("*.pid", "a pid", space=ANY), volatile("host.uptime*", "uptime")],
                 knowledge.section_fields())


# ---------------------------------------------------------------- callers that used to build keys by hand

def test_gpu_table_reads_volatility_on_the_gpus_captured():
    """A capture of GPUs 2 and 3 only (a partition): their volatile fields are judged on their own indices, the
    current clocks shown as seen at capture (never a difference), the temperatures left out."""
    def snap(mhz, temperature, name="NVIDIA H200"):
        gpus = {str(i): {"name": name, "temperature_c": temperature + i, "clocks": {"current": {"sm": mhz}}}
                for i in (2, 3)}
        return {"sections": {"nvidia": {"status": "ok", "data": {"count": 2, "gpus": gpus}}}}
    table = hardware_tables(snap(1980, 40), snap(345, 55, "NVIDIA H100"))["gpus"]
    rows = {row["attribute"]: row for row in table["rows"]}
    assert table["indices"] == ["2", "3"]
    assert rows["clocks.current.sm"]["at_capture"] and not rows["clocks.current.sm"]["differs"]
    assert "temperature_c" not in rows
    assert rows["name"]["differs"] and not rows["name"]["at_capture"]


def test_parent_only_warnings_found_through_subjects():
    """The shell's variable the workers lack: a warning named by its variable, found by subject."""
    good, bad = _load("eagle3-tp8-good.json"), _load("eagle3-tp8-bad.json")
    comp = diff.compare(good, bad)
    flagged = {d.subject.entity for d in comp.differences if d.where == "parent_only"}
    named = {w.split("=", 1)[0] for w in comp.warnings if "=" in w.split(" ", 1)[0]}
    assert flagged and flagged <= named


# ---------------------------------------------------------------- paths inside a section

def test_nested_keys_of_a_measured_gpu_are_paths_of_its_flat_keys():
    """Every row a GPU table shows names a place snapshot.flatten knows under that GPU."""
    snap = _load("h200-spec-decode-good.json")
    gpus = section_data(snap, "nvidia")["gpus"]
    known = _flat_paths(snap)
    for index, gpu in gpus.items():
        rows = keys.nested_keys(gpu)
        assert len(rows) > 20
        assert {keys.gpu_flat(index, path) for path in rows} <= known


def test_nested_keys_order_lists_and_empty_dicts():
    rows = keys.nested_keys({"link10": 1, "link9": 2, "tags": ["a", "b"], "ports": [{"up": True}], "mig": {}})
    assert list(rows) == ["link9", "link10", "mig", "ports.0.up", "tags"]
    assert rows["tags"] == ["a", "b"] and rows["mig"] == {}
    assert keys.nested_keys({}) == {}


@pytest.mark.parametrize("key,prefix,expected", [
    ("clocks.max.sm", "clocks.max", True), ("clocks.max", "clocks.max", True),
    ("clocks.maximum", "clocks.max", False), ("clocks", "clocks.max", False)])
def test_at_or_below(key, prefix, expected):
    assert keys.at_or_below(key, prefix) is expected


def test_path_key_joins_as_flat_keys_do():
    assert keys.flat_key("nvidia", keys.path_key(("topology", "GPU0", "GPU1"))) == "nvidia.topology.GPU0.GPU1"


def test_integrity_entry_names_a_clash_by_its_dist_and_reads_back():
    table = {}
    first = keys.integrity_entry("torch/x.py", "torch", table)
    table[first] = {}
    second = keys.integrity_entry("torch/x.py", "torch-nightly", table)
    assert (first, second) == ("torch/x.py", "torch/x.py [torch-nightly]")
    assert keys.integrity_entry_rel(second, "torch-nightly") == keys.integrity_entry_rel(first, "torch") == "torch/x.py"
    assert keys.integrity_entry_rel(second, "torch") == second


def test_the_questions_the_comparison_asks_of_a_subject():
    """What a subject is about, as analysis/compare/ asks it instead of comparing its where itself."""
    parent_only, workers, shell = (keys.env_subject(where, "X") for where in ("parent_only", "workers", "env"))
    assert keys.is_parent_only(parent_only) and not keys.is_parent_only(workers)
    assert keys.is_workers_env(parent_only) and keys.is_workers_env(workers._replace(aspect=keys.DISAGREE))
    assert not keys.is_workers_env(shell)
    assert keys.process_of(Subject("process", "scheduler_TP0", "nice")) == "scheduler_TP0"
    assert keys.process_of(Subject("in_process", "python-0", "changed_in_process.X")) == "python-0"
    assert keys.process_of(Subject("library", "run/python-0", "libz.so")) is None
    assert keys.is_gpu(Subject("gpu", "driver", "driver_version")) and not keys.is_gpu(Subject("host", "cpu"))
    assert keys.is_instance_field(Subject("gpu", "3", "clocks.max.sm"))
    assert keys.is_instance_field(Subject("process", "scheduler_TP1", "nice"))
    assert not keys.is_instance_field(Subject("gpu", "3"))  # a GPU's presence, not a field of it
    assert not keys.is_instance_field(Subject("gpu", "topology", "GPU0.GPU1"))
    assert not keys.is_instance_field(Subject("in_process", "python-0", "changed_in_process.X"))
