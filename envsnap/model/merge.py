"""Join per-node snapshots into one cluster snapshot: {"nodes": {host: {"sections": ...}}}.

Each node's capture is started by the launcher the user already has (srun, torchrun,
mpirun, pdsh); envsnap has no cluster protocol of its own. A merged snapshot is a
normal snapshot (same schema_version) whose "sections" are empty and whose "nodes" hold
one entry per host; runs of every node are kept at the top level, each tagged with its
"host", so the verdict of a later diff sees them. A merged snapshot can be merged again.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from envsnap.errors import EnvsnapError
from envsnap.model import schema, snapshot as snapshot_mod

NODE_FIELDS = ("label", "created", "envsnap_version", "redaction", "provenance")


def merge(snapshots: Sequence[Dict[str, Any]], sources: Sequence[str], created: str,
          label: Optional[str] = None) -> Dict[str, Any]:
    """Merge loaded snapshots (from `sources`, for messages) into a cluster snapshot."""
    if len(snapshots) < 1:
        raise EnvsnapError("merge needs at least one snapshot")
    nodes: Dict[str, Dict[str, Any]] = {}
    origin: Dict[str, str] = {}
    runs: List[Dict[str, Any]] = []
    for snap, source in zip(snapshots, sources):
        for host, node, node_runs in _nodes_of(snap, source):
            if host in nodes:
                raise EnvsnapError(f"host {host!r} is in both {origin[host]} and {source}: "
                                   "merge one snapshot per node")
            nodes[host] = node
            origin[host] = source
            for run in node_runs:
                tagged = dict(run)
                tagged.setdefault("host", host)
                runs.append(tagged)
    labels = {n.get("label") or "" for n in nodes.values()}
    if label is None:
        label = labels.pop() if len(labels) == 1 else ""
    merged = snapshot_mod.new_snapshot(label, ",".join(sorted(nodes)), created)
    merged["nodes"] = {host: nodes[host] for host in sorted(nodes)}
    merged["runs"] = runs
    redactions = {n.get("redaction") for n in nodes.values()}
    merged["redaction"] = "on" if redactions == {"on"} else ("off" if "off" in redactions else "on")
    return schema.validate(merged, "<merged>")


def _nodes_of(snap: Dict[str, Any], source: str) -> Iterator[Tuple[str, Dict[str, Any], List[Dict[str, Any]]]]:
    """(host, node entry, runs) for a node snapshot, or for each node of a merged one."""
    if isinstance(snap.get("nodes"), dict) and snap["nodes"]:
        by_host: Dict[str, List[Dict[str, Any]]] = {}
        for run in snap.get("runs") or []:
            by_host.setdefault(str(run.get("host", "")), []).append({k: v for k, v in run.items() if k != "host"})
        for host, node in snap["nodes"].items():
            if not isinstance(node, dict) or not isinstance(node.get("sections"), dict):
                raise EnvsnapError(f"{source}: node {host!r} has no sections")
            yield host, node, by_host.get(host, [])
        return
    host = snap.get("host")
    if not host or not isinstance(host, str):
        raise EnvsnapError(f"{source}: snapshot has no host name")
    node = {"sections": snap.get("sections", {}), "file": source}
    for field in NODE_FIELDS:
        if snap.get(field) is not None:
            node[field] = snap[field]
    yield host, node, list(snap.get("runs") or [])


def node_snapshots(snap: Dict[str, Any]) -> Dict[str, Dict[str, Any]]:
    """{host: snapshot-shaped dict} for each node of a merged snapshot (or {host: snap} for one node),
    so that per-node code (flatten, diff) can run on each node unchanged."""
    if not isinstance(snap.get("nodes"), dict) or not snap["nodes"]:
        return {str(snap.get("host", "")): snap}
    out = {}
    for host, node in snap["nodes"].items():
        single = snapshot_mod.new_snapshot(node.get("label"), host, node.get("created") or snap.get("created", ""))
        single["sections"] = node.get("sections", {})
        single["runs"] = [{k: v for k, v in r.items() if k != "host"} for r in snap.get("runs") or []
                          if r.get("host") == host]
        out[host] = single
    return out
