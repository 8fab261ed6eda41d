"""`envsnap merge`: per-node snapshots into one cluster snapshot, via the real CLI."""
from __future__ import annotations

import json

import pytest
from helpers import run_envsnap, run_envsnap_in_process

from envsnap.capture import runner
from envsnap.capture.base import CaptureContext
from envsnap.model import merge, snapshot, store


@pytest.fixture(scope="module")
def node_files(tmp_path_factory):
    """Two real snapshots of this machine (env section only); the second is given another
    host name and a run, standing in for a second node (there is one machine here)."""
    where = tmp_path_factory.mktemp("nodes")
    files = []
    for index, host in enumerate(("node-b", "node-a")):
        snap = runner.capture(CaptureContext(label="cluster-good", timeout=30), only=["env"])
        snap["host"] = host
        if index == 0:
            snap["runs"] = [{"ok": True, "exit_code": 0, "duration_s": 1.0, "started": "2026-11-29T00:00:00Z",
                             "metrics": {"output_throughput": 1500.0}, "output_tail": "", "command": ["bench"],
                             "source": "run", "parsers": ["generic"]}]
        path = where / f"{host}.json"
        store.save(snap, str(path))
        files.append(path)
    return files


def test_merge_cli_keys_nodes_by_host(node_files, tmp_path):
    out = tmp_path / "cluster.json"
    result = run_envsnap("merge", *node_files, "-o", out)
    assert result.returncode == 0, result.stderr
    assert "2 nodes (node-a, node-b)" in result.stderr
    merged = store.load(str(out))
    assert list(merged["nodes"]) == ["node-a", "node-b"]
    assert merged["host"] == "node-a,node-b" and merged["label"] == "cluster-good"
    assert merged["nodes"]["node-a"]["sections"]["env"]["status"] == "ok"
    assert merged["nodes"]["node-b"]["file"] == str(node_files[0])
    assert merged["sections"] == {}
    assert [r["host"] for r in merged["runs"]] == ["node-b"]
    assert merged["runs"][0]["metrics"] == {"output_throughput": 1500.0}
    # Per-node views for code that works on single snapshots (flatten, diff).
    views = merge.node_snapshots(merged)
    assert set(views) == {"node-a", "node-b"}
    assert snapshot.flatten(views["node-a"])["env.status"] == "ok"
    assert views["node-b"]["runs"][0]["metrics"]["output_throughput"] == 1500.0


def test_merge_refuses_overwrite_duplicates_and_bad_input(node_files, tmp_path):
    out = tmp_path / "cluster.json"
    out.write_text("keep me")
    refused = run_envsnap_in_process("merge", *node_files, "-o", out)
    assert refused.returncode == 2 and "exists" in refused.stderr and out.read_text() == "keep me"
    assert run_envsnap_in_process("merge", *node_files, "-o", out, "--force").returncode == 0
    duplicate = run_envsnap_in_process("merge", node_files[0], node_files[0], "-o", tmp_path / "dup.json")
    assert duplicate.returncode == 2 and "host 'node-b' is in both" in duplicate.stderr
    assert len(duplicate.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    broken = run_envsnap_in_process("merge", node_files[0], bad, "-o", tmp_path / "x.json")
    assert broken.returncode == 2 and "schema_version" in broken.stderr
    assert not (tmp_path / "x.json").exists()


def test_merged_snapshot_merges_again(node_files, tmp_path):
    first = merge.merge([store.load(str(node_files[0]))], [str(node_files[0])], "2026-11-29T00:00:00Z")
    extra = store.load(str(node_files[1]))
    again = merge.merge([first, extra], ["first.json", "extra.json"], "2026-11-29T00:00:01Z", label="relabelled")
    assert list(again["nodes"]) == ["node-a", "node-b"]
    assert again["label"] == "relabelled"
    assert [r["host"] for r in again["runs"]] == ["node-b"]
    assert json.loads(store.dumps(again)) == again
