"""Merged multi-node snapshots through the real CLI: diff, rank, report and show compare every node.

Each node's snapshot is a real capture of this machine's environment (env section) taken with
NCCL_ALGO set as that node's launcher would set it; the local host is one of the nodes, the others
get their own host names (tests/e2e/test_multinode_torchrun.py captures real nodes under their own
host names through torchrun). Clusters are joined by the real `envsnap merge`. The commands run through
the CLI's entry point in this process (helpers.run_envsnap_in_process); bisect's refusal runs as a process.
"""
from __future__ import annotations

import contextlib
import json
import os
import socket

import pytest
from helpers import run_envsnap, run_envsnap_in_process

from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.model import store

LOCAL = socket.gethostname()
RUN = {"ok": True, "exit_code": 0, "duration_s": 1.0, "started": "2026-11-29T00:00:00Z", "output_tail": "",
       "command": ["bench"], "source": "run", "parsers": ["generic"]}


@contextlib.contextmanager
def _env(**values):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _node(where, name, host, algo, throughput=None):
    with _env(NCCL_ALGO=algo):
        snap = runner.capture(CaptureContext(label=name, timeout=30), only=["env"])
    assert snap["sections"]["env"]["status"] == "ok"
    snap["host"] = host
    if throughput is not None:
        snap["runs"] = [dict(RUN, metrics={"output_throughput": throughput + i}) for i in range(3)]
    path = where / f"{name}-{host}.json"
    store.save(snap, str(path))
    return path


def _merge(where, name, *node_files):
    out = where / f"{name}.json"
    merged = run_envsnap_in_process("merge", *node_files, "-o", out)
    assert merged.returncode == 0, merged.stderr
    return out


@pytest.fixture(scope="module")
def clusters(tmp_path_factory):
    where = tmp_path_factory.mktemp("clusters")
    files = {}
    for name, algos in (("good", ("Ring", "Ring")), ("bad", ("Tree", "Tree")), ("half", ("Ring", "Tree"))):
        files[name] = _merge(where, name, *(_node(where, name, host, algo)
                                            for host, algo in zip((LOCAL, "node-b"), algos)))
    files["wider"] = _merge(where, "wider", _node(where, "wider", LOCAL, "Ring"), _node(where, "wider", "node-b", "Ring"),
                            _node(where, "wider", "node-c", "Ring"))
    files["single-b"] = _node(where, "single", "node-b", "Tree")
    files["single-x"] = _node(where, "single", "elsewhere", "Tree")
    return files


def _diff_json(good, bad):
    proc = run_envsnap_in_process("diff", good, bad, "--format", "json")
    assert proc.returncode in (0, 1), proc.stderr
    return proc.returncode, json.loads(proc.stdout)


def test_every_node_changed_is_one_node_qualified_cause(clusters):
    text = run_envsnap_in_process("diff", clusters["good"], clusters["bad"])
    assert text.returncode == 1, text.stdout + text.stderr
    assert "*/env.NCCL_ALGO  Ring \u2192 Tree" in text.stdout
    assert "no relevant differences" not in text.stdout and "multi-node snapshot" not in text.stdout
    code, result = _diff_json(clusters["good"], clusters["bad"])
    assert code == 1
    [difference] = [d for d in result["differences"] if d["variable"] == "NCCL_ALGO"]
    assert (difference["key"], difference["node"], difference["good"], difference["bad"]) == (
        "*/env.NCCL_ALGO", "*", "Ring", "Tree")
    algo_causes = [c for c in result["causes"] if c["variable"] == "NCCL_ALGO"]
    assert [c["key"] for c in algo_causes] == ["*/env.NCCL_ALGO"]  # once, not once per node
    assert result["causes"][0]["key"] == "*/env.NCCL_ALGO"
    assert "the same change on every node compared" in result["causes"][0]["evidence"]
    assert result["nodes"]["mode"] == "clusters"
    assert result["nodes"]["compared"] == sorted([LOCAL, "node-b"])


def test_a_cluster_against_itself_matches(clusters):
    proc = run_envsnap_in_process("diff", clusters["good"], clusters["good"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no relevant differences" in proc.stdout


def test_one_node_changed_is_named_by_its_node(clusters):
    code, result = _diff_json(clusters["good"], clusters["half"])
    assert code == 1
    keys = [d["key"] for d in result["differences"] if d["variable"] == "NCCL_ALGO"]
    assert keys == ["node-b/env.NCCL_ALGO"]
    assert result["causes"][0]["key"] == "node-b/env.NCCL_ALGO" and result["causes"][0]["node"] == "node-b"


def test_a_node_on_one_side_only_is_a_difference_and_a_warning(clusters):
    code, result = _diff_json(clusters["good"], clusters["wider"])
    assert code == 1
    [node] = [d for d in result["differences"] if d["key"] == "node-c/node"]
    assert node["change"] == "added" and node["absent"] == "not captured" and node["bad"] == "1/1 sections captured"
    assert any(w.startswith("node node-c of bad is not in good") for w in result["warnings"])
    assert result["nodes"]["bad_only"] == ["node-c"]
    text = run_envsnap_in_process("diff", clusters["good"], clusters["wider"])
    assert "node-c/node  not captured \u2192 1/1 sections captured" in text.stdout


def test_cluster_against_a_single_node_of_the_same_host_compares_that_node(clusters):
    code, result = _diff_json(clusters["good"], clusters["single-b"])
    assert code == 1
    note = (f"good is a cluster of 2 nodes ({', '.join(sorted([LOCAL, 'node-b']))}), bad a single node (node-b): "
            "bad was compared with good's node node-b, matched by host name")
    assert any(w.startswith(note) for w in result["warnings"]), result["warnings"]
    assert [d["key"] for d in result["differences"] if d["variable"] == "NCCL_ALGO"] == ["node-b/env.NCCL_ALGO"]
    text = run_envsnap_in_process("diff", clusters["good"], clusters["single-b"]).stdout
    assert note in text
    html = run_envsnap_in_process("diff", clusters["good"], clusters["single-b"], "--format", "html").stdout
    assert note.replace("'", "&#39;") in html


def test_cluster_against_a_single_node_of_another_host_compares_each_node(clusters):
    code, result = _diff_json(clusters["single-x"], clusters["good"])
    assert code == 1
    assert any("bad is a cluster of 2 nodes" in w and "good a single node (elsewhere) that is none of them: "
               "good was compared with each of bad's nodes" in w for w in result["warnings"]), result["warnings"]
    assert [d["key"] for d in result["differences"] if d["variable"] == "NCCL_ALGO"] == ["*/env.NCCL_ALGO"]
    assert result["nodes"]["pairs"] == [{"node": n, "good": "elsewhere", "bad": n} for n in sorted([LOCAL, "node-b"])]


def test_report_shows_every_node(clusters, tmp_path):
    out = tmp_path / "report.html"
    proc = run_envsnap_in_process("report", clusters["good"], clusters["half"], "-o", out)
    assert proc.returncode == 0, proc.stderr
    html = out.read_text(encoding="utf-8")
    assert "node-b/env.NCCL_ALGO" in html
    for host in (LOCAL, "node-b"):
        assert html.count(f'<h3 class="node-head">node {host}</h3>') == 2  # code state, GPU and host


def test_show_lists_each_node(clusters):
    proc = run_envsnap_in_process("show", clusters["wider"])
    assert proc.returncode == 0, proc.stderr
    assert "cluster of 3 nodes" in proc.stdout and "0/0 sections" not in proc.stdout
    for host in (LOCAL, "node-b", "node-c"):
        assert f"\nnode {host}  (label wider, captured " in proc.stdout
    assert proc.stdout.count("1/1 sections captured") == 3
    verbose = run_envsnap_in_process("show", "-v", clusters["good"])
    assert verbose.stdout.count("perf-relevant: NCCL_ALGO") == 2


def test_rank_over_clusters_ranks_the_node_qualified_key(tmp_path):
    files = []
    for index, (algo, throughput) in enumerate((("Ring", 1500.0), ("Tree", 900.0), ("Ring", 1490.0), ("Tree", 910.0))):
        files.append(_merge(tmp_path, f"c{index}", _node(tmp_path, f"c{index}", LOCAL, algo, throughput),
                            _node(tmp_path, f"c{index}", "node-b", algo)))
    proc = run_envsnap_in_process("rank", *files, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    top = result["associations"][0]
    assert (top["key"], top["node"], top["values"]) == ("*/env.NCCL_ALGO", "*", ["Ring", "Tree", "Ring", "Tree"])
    assert [a["key"] for a in result["associations"]].count("*/env.NCCL_ALGO") == 1


def test_bisect_refuses_a_merged_snapshot_instead_of_finding_nothing(clusters, tmp_path):
    proc = run_envsnap("bisect", clusters["good"], clusters["bad"], "--dry-run", "--journal", tmp_path / "j.jsonl",
                       "--", "true")
    assert proc.returncode == 2 and "is a merged multi-node snapshot" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "j.jsonl").exists()
