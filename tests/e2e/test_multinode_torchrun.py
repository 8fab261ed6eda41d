"""The README's multi-node recipe, run for real: two nodes through torchrun, captured, merged, diffed.

Each "node" is a UTS namespace with its own host name (`unshare -u`, then `hostname node-a`) on this
machine; the nodes meet through torchrun's static rendezvous on 127.0.0.1. Per cluster:

  1. the job: on each node `torchrun --nnodes 2 --node-rank R ... worker.py` from a real venv with
     the probe installed (`envsnap probe install --python`), ENVSNAP_PROBE_DIR a directory per node
     and NCCL_ALGO set as that cluster's launcher sets it; the workers init_process_group("gloo")
     across the two nodes and all-reduce (tests/data/multinode/worker.py);
  2. the README's torchrun line, run on each node by bash (NODE_RANK in its environment; HEAD, the
     port and the probe directory filled in, and without --sglang: the job is a gloo job, no SGLang
     server runs here), then the README's merge line.

The bad cluster's nodes ran with NCCL_ALGO=Tree, the good one's with Ring; the capturing shells do
not have it, so only the probe's per-node worker records show it. Root is needed for the host names.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO_ROOT, TEST_DATA, run_envsnap
from helpers.workers import clean_env, make_venv

pytestmark = pytest.mark.slow

NODES = ("node-a", "node-b")
WORKER = TEST_DATA / "multinode" / "worker.py"
# Enter a new UTS namespace's host name, then run the rest of the command line.
IN_NODE = 'hostname "$1" && shift && exec "$@"'


def _namespaces_usable() -> str:
    """'' when host names can be kept apart with unshare -u, else why not."""
    if os.geteuid() != 0:
        return "needs root: `unshare -u` and `hostname` in a new UTS namespace"
    if shutil.which("unshare") is None:
        return "unshare (util-linux) is not installed"
    probe = subprocess.run(["unshare", "-u", "sh", "-c", IN_NODE, "sh", "node-probe", "true"],
                           capture_output=True, text=True, timeout=30, check=False)
    if probe.returncode != 0:
        return f"unshare -u is refused here: {probe.stderr.strip()[:200]}"
    return ""


def _readme_lines():
    """The README's torchrun line (with its continuation) and its merge line."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index("### Several nodes"):]
    torchrun = re.search(r"^    (torchrun .*\\\n\s+.*)$", section, re.MULTILINE)
    merge = re.search(r"^    (envsnap merge .*)$", section, re.MULTILINE)
    assert torchrun and merge, "README: the multi-node recipe lost its torchrun or merge line"
    return torchrun.group(1).replace("\\\n", " "), merge.group(1)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _on_nodes(commands, timeout=120):
    """Start one command per node (each in its own UTS namespace), wait for all; (rc, out, err) each."""
    procs = [subprocess.Popen(["unshare", "-u", "sh", "-c", IN_NODE, "sh", node, *argv], env=env, cwd=cwd,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
             for node, argv, env, cwd in commands]
    results = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=timeout)
            results.append((proc.returncode, out, err))
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait(10)
    return results


@pytest.fixture(scope="module")
def recipe(tmp_path_factory):
    why = _namespaces_usable()
    if why:
        pytest.skip(why)
    root = tmp_path_factory.mktemp("multinode")
    venv = make_venv(root / "venv", with_deps=True)
    installed = run_envsnap("probe", "install", "--python", venv["python"])
    assert installed.returncode == 0, installed.stderr
    torchrun_line, merge_line = _readme_lines()
    # envsnap and torchrun of this test run on PATH, as they are on a node where envsnap is installed.
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}"
    clusters = {}
    for name, algo in (("good", "Ring"), ("bad", "Tree")):
        where = root / name
        (where / "snaps").mkdir(parents=True)
        probe_root = where / "probe"
        port = _free_port()
        job = [(node, [venv["python"], "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(rank),
                       "--nproc-per-node", "1", "--master-addr", "127.0.0.1", "--master-port", str(port), WORKER],
                clean_env(ENVSNAP_PROBE_DIR=str(probe_root / node), NCCL_ALGO=algo, GLOO_SOCKET_IFNAME="lo"), where)
               for rank, node in enumerate(NODES)]
        for rc, out, err in _on_nodes(job):
            assert rc == 0 and "ALLREDUCE" in out and " 2\n" in out, err[-3000:]
        line = (torchrun_line.replace("HEAD", "127.0.0.1").replace("29500", str(_free_port()))
                .replace("--sglang ", "").replace("/tmp/probe-run1", f"{probe_root}/$(hostname)"))
        capture = [(node, ["bash", "-c", line], clean_env(NODE_RANK=str(rank), PATH=path), where)
                   for rank, node in enumerate(NODES)]
        for rc, _out, err in _on_nodes(capture):
            assert rc == 0, err[-3000:]
        merged = subprocess.run(["bash", "-c", merge_line], cwd=where, env=clean_env(PATH=path),
                                capture_output=True, text=True, timeout=120, check=False)
        assert merged.returncode == 0, merged.stderr
        clusters[name] = where / "cluster.json"
    return {"clusters": clusters, "torchrun_line": torchrun_line}


def test_each_node_was_captured_under_its_own_host_name(recipe):
    cluster = json.loads(recipe["clusters"]["good"].read_text())
    assert list(cluster["nodes"]) == list(NODES) and cluster["host"] == "node-a,node-b"
    for node in NODES:
        records = cluster["nodes"][node]["sections"]["probe"]["data"]["records"]
        ranks = {r["init"]["rank"] for r in records.values() if isinstance(r.get("init"), dict)}
        assert ranks == {NODES.index(node)}  # the worker of this node, in a 2-process gloo group
        assert {r["host"] for r in records.values()} == {node}
        assert all(r["env_at_start"].get("NCCL_ALGO") == "Ring" for r in records.values())


def test_diff_ranks_the_node_qualified_nccl_algo_change(recipe):
    good, bad = recipe["clusters"]["good"], recipe["clusters"]["bad"]
    proc = run_envsnap("diff", good, bad, "--format", "json")
    assert proc.returncode == 1, proc.stderr
    result = json.loads(proc.stdout)
    algo = [c for c in result["causes"] if c["variable"] == "NCCL_ALGO"]
    assert [c["key"] for c in algo][:1] == ["*/workers.env.NCCL_ALGO"], [c["key"] for c in result["causes"][:8]]
    assert (algo[0]["good"], algo[0]["bad"], algo[0]["node"]) == ("Ring", "Tree", "*")
    # gloo on CPUs: NCCL is out of context on every node, so the change cannot have acted (it ranks after the
    # torchrun port, which only names a resource); still one cause for every node, node-qualified.
    assert algo[0]["reach"]["tier"] == "cannot" and len(algo) == 1
    assert result["nodes"]["compared"] == list(NODES)
    text = run_envsnap("diff", good, bad)
    assert text.returncode == 1 and "*/workers.env.NCCL_ALGO  Ring \u2192 Tree" in text.stdout


def test_a_cluster_against_itself_matches(recipe):
    """Each node matched to itself by host name, and nothing to report: what `diff` of one cluster twice says."""
    cluster = recipe["clusters"]["bad"]
    proc = run_envsnap("diff", cluster, cluster, "--format", "json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout)
    assert result["nodes"]["compared"] == list(NODES)
    assert result["differences"] == [] and result["causes"] == []
    text = run_envsnap("diff", cluster, cluster)
    assert text.returncode == 0 and "no relevant differences" in text.stdout and "differences: 0" in text.stdout
