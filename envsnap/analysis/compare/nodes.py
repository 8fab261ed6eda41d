"""Which node is compared with which, when a snapshot holds several (`envsnap merge`).

A merged snapshot keeps each node's sections under `nodes.<host>.sections` (model/merge.py). Diff,
rank and the report compare node by node: the nodes of two clusters are matched by host name, and
every key of a node's comparison is qualified by that node:

    node-a/workers.env.NCCL_ALGO      on node node-a
    node-a,node-c/env.NCCL_ALGO       the same change on nodes node-a and node-c (not on every node)
    */workers.env.NCCL_ALGO           the same change on every node compared
    node-c/node                       node node-c is in one cluster only (its sections are not compared)

A host name never holds "/", "," or "*", so the qualifier reads unambiguously; the key after the
"/" is the key a single-node comparison gives (the knowledge table's rules match that part). Two
single-node snapshots are compared as before, with unqualified keys.

A cluster against a single-node snapshot compares that snapshot with the cluster's node of the
same host name; when no node has that name, with each node of the cluster (every difference
qualified by the node it was found against): comparing it with one node picked by envsnap would
hide what differs on the others. A warning line says which it did, in every output.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, Iterable, List, NamedTuple, Optional

from envsnap.model.merge import node_snapshots
from envsnap.model.result_types import NodePairing

EVERY_NODE = "*"


class NodePair(NamedTuple):
    """One comparison: `name` qualifies its keys (None: two single-node snapshots, keys unqualified).
    A side is None when that snapshot has no such node."""
    name: Optional[str]
    good: Optional[Dict[str, Any]]
    bad: Optional[Dict[str, Any]]

    @property
    def both(self) -> bool:
        return self.good is not None and self.bad is not None


@dataclass
class Pairing:
    """How two snapshots' nodes were paired, and what to say about it."""
    mode: str  # "single" (two single-node snapshots) | "clusters" | "cluster-vs-node"
    pairs: List[NodePair]
    notes: List[str] = field(default_factory=list)  # warning lines: what was compared, what was not
    good_nodes: List[str] = field(default_factory=list)
    bad_nodes: List[str] = field(default_factory=list)

    @property
    def compared(self) -> List[str]:
        """The names of the pairs compared on both sides (what "*" stands for)."""
        return [p.name for p in self.pairs if p.both and p.name is not None]

    def to_json(self) -> NodePairing:
        return {"mode": self.mode, "good": self.good_nodes, "bad": self.bad_nodes,
                "compared": self.compared,
                "good_only": [p.name for p in self.pairs if p.bad is None],
                "bad_only": [p.name for p in self.pairs if p.good is None],
                "pairs": [{"node": p.name, "good": _host(p.good), "bad": _host(p.bad)} for p in self.pairs]}


def _host(snap: Optional[Dict[str, Any]]) -> Optional[str]:
    return None if snap is None else str(snap.get("host") or "")


def is_cluster(snap: Dict[str, Any]) -> bool:
    nodes = snap.get("nodes")
    return isinstance(nodes, dict) and bool(nodes)


def label(nodes: Iterable[str], everyone: Iterable[str]) -> str:
    """The qualifier of a change found on `nodes`: "*" when that is every node compared (and more than one)."""
    found = sorted(set(nodes))
    every = set(everyone)
    if len(found) > 1 and set(found) >= every:
        return EVERY_NODE
    return ",".join(found)


def _list(names: Iterable[str]) -> str:
    return ", ".join(names)


def pair_nodes(good: Dict[str, Any], bad: Dict[str, Any]) -> Pairing:
    """Pair the nodes of good and bad (see the module docstring)."""
    g_cluster, b_cluster = is_cluster(good), is_cluster(bad)
    if not g_cluster and not b_cluster:
        return Pairing("single", [NodePair(None, good, bad)])
    g_nodes, b_nodes = node_snapshots(good), node_snapshots(bad)
    g_names, b_names = sorted(g_nodes), sorted(b_nodes)
    if g_cluster and b_cluster:
        pairs = [NodePair(host, g_nodes.get(host), b_nodes.get(host)) for host in sorted(set(g_names) | set(b_names))]
        notes = []
        if not set(g_names) & set(b_names):
            notes.append(f"good and bad share no node (good: {_list(g_names)}; bad: {_list(b_names)}): no node was "
                         "compared with another; to compare two machines anyway, diff their own node snapshots")
        for side, only, others in (("good", [h for h in g_names if h not in b_nodes], b_names),
                                   ("bad", [h for h in b_names if h not in g_nodes], g_names)):
            if only:
                other = "bad" if side == "good" else "good"
                notes.append(f"node{'s' if len(only) > 1 else ''} {_list(only)} of {side} "
                             f"{'are' if len(only) > 1 else 'is'} not in {other} ({other} has {_list(others)}): "
                             f"reported as {'nodes' if len(only) > 1 else 'a node'} on one side only, "
                             "{} sections not compared".format("their" if len(only) > 1 else "its"))
        return Pairing("clusters", pairs, notes, g_names, b_names)
    # One cluster, one single-node snapshot.
    cluster_side, single_side = ("good", "bad") if g_cluster else ("bad", "good")
    cluster_nodes = g_nodes if g_cluster else b_nodes
    single = bad if g_cluster else good
    host = str(single.get("host") or "")
    names = sorted(cluster_nodes)
    what = f"{cluster_side} is a cluster of {len(names)} node{'s' if len(names) != 1 else ''} ({_list(names)})"
    if host in cluster_nodes:
        pair = NodePair(host, cluster_nodes[host], single) if g_cluster else NodePair(host, single, cluster_nodes[host])
        rest = [n for n in names if n != host]
        note = (f"{what}, {single_side} a single node ({host}): {single_side} was compared with {cluster_side}'s "
                f"node {host}, matched by host name")
        if rest:
            note += f"; {cluster_side}'s node{'s' if len(rest) > 1 else ''} {_list(rest)} not compared"
        return Pairing("cluster-vs-node", [pair], [note], g_names, b_names)
    pairs = [NodePair(name, cluster_nodes[name], single) if g_cluster else NodePair(name, single, cluster_nodes[name])
             for name in names]
    note = (f"{what}, {single_side} a single node ({host or 'no host name'}) that is none of them: "
            f"{single_side} was compared with each of {cluster_side}'s nodes, every difference named by that node")
    return Pairing("cluster-vs-node", pairs, [note], g_names, b_names)
