"""Evidence lines about worker environments: which TP workers saw a variable (and from which
source), what the server's parent had that its workers never saw, and what NCCL's own log says
per rank (a missing "set by environment" line is never read as "unset")."""
from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from envsnap import format as fmt
from envsnap.analysis.compare.view_model import View
from envsnap.model.keys import parent_only_key


def _ranks_text(ranks: List[str]) -> str:
    ranks = sorted(ranks, key=lambda r: (len(r), r))
    return f"rank{'s' if len(ranks) > 1 else ''} {fmt.span(ranks)}"


def worker_sightings(view: View, name: str, side: str) -> str:
    """One line: which TP workers saw NAME (with which value), and from which source."""
    groups: Dict[Tuple[str, str], List[str]] = {}
    for worker in sorted(view.worker_views, key=lambda k: (len(k), k)):
        env, source = view.worker_views[worker]
        value = env.get(name)
        groups.setdefault(("" if value is None else f"={value}", source), []).append(worker)
    if not groups:
        return f"{side}: no TP worker's environment was captured (--probe-dir, or --pid with SPT_NOENV=1)"
    parts = [f"{fmt.span(workers)} {'saw ' + name + shown if shown else 'never saw it'} ({source})"
             for (shown, source), workers in sorted(groups.items(), key=lambda kv: (kv[0][0] != "", kv[0]))]
    return f"{side}: TP workers: " + "; ".join(parts)


def parent_only_evidence(view: View, name: str, side: str) -> List[str]:
    """Evidence lines of a server-parent workers.parent_only.NAME: which processes have it, which lack
    it, and where each was seen (probe at exit/init/start, /proc)."""
    info = view.parent_only_info.get(name)
    value = view.values["workers"].get(parent_only_key(name))
    if not info or not isinstance(value, dict):
        return []
    parent = info["process"]
    seen = [f"its own environment ({source})" if who == parent else f"inherited by {who}, which it started ({source})"
            for who, source in info["has"]]
    lines = [f"{side}: {parent}, the server's parent process, had {name}={value['parent']}: " + "; ".join(seen)]
    if info.get("late") and info.get("lacks"):
        sources = ", ".join(sorted({source for _, source in info["lacks"]}))
        lines.append(f"{side}: {parent}'s environment at exec lacks it ({sources}): it was set in-process, "
                     "after the TP workers had started")
    lines.append(worker_sightings(view, name, side))
    if "shell" in info:
        lines.append(f"{side}: the capturing shell has {name}={info['shell']} too")
    return lines


def nccl_sightings(name: str, sides: Sequence[Tuple[str, View]]) -> str:
    """What NCCL's own log says about NAME per rank on each side. A missing "set by environment"
    line is not proof the variable was unset (NCCL logs a variable only when it reads it)."""
    if all(view.nccl_rank_env is None for _, view in sides):
        return ("NCCL's own log: none captured on both sides (gloo, or no --log of an NCCL_DEBUG=INFO run): "
                "the evidence is the workers' environments above")
    parts = []
    missing = False
    for side, view in sides:
        ranks = view.nccl_rank_env or {}
        if not ranks:
            parts.append(f"{side}: no per-rank lines")
            continue
        by_value: Dict[str, List[str]] = {}
        for rank, env in ranks.items():
            by_value.setdefault("" if name not in env else str(env[name]), []).append(rank)
        bits = [f"'{name} set by environment to {v}' on {_ranks_text(r)}" for v, r in sorted(by_value.items()) if v]
        if "" in by_value:
            missing = True
            bits.append(f"not logged on {_ranks_text(by_value[''])}")
        parts.append(f"{side}: " + ", ".join(bits))
    text = "NCCL's own log: " + "; ".join(parts)
    if missing:
        text += " (a missing line is not proof it was unset: NCCL logs a variable when it reads it)"
    return text
